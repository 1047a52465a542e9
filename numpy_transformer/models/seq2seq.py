"""A whole encoder-decoder model: token embeddings and positions for source and target, ``nt.Transformer``
and a vocabulary head, trained with teacher forcing and decoded greedily.

``Seq2SeqModel`` maps source ids (B, T) and decoder-input ids (B, S) to target logits (B, S, V)::

    s = dropout(src_embed(src) * sqrt(D) + pos[:T])          # (B, T, D)
    t = dropout(tgt_embed(tgt) * sqrt(D) + pos[:S])          # (B, S, D)
    y = transformer(s, t, tgt_mask=causal(S), src_key_padding_mask=pad, memory_key_padding_mask=pad)
    logits = head(y)                                         # (B, S, V)

The decoder input is ``BOS`` followed by the target shifted right (:func:`tasks_seq2seq.decoder_input`):
with the causal mask, position i predicts target token i from the target tokens before it. Shape
letters as in :mod:`numpy_transformer.nn.seq2seq`: T source length, S target length.

``state_dict`` keys: ``src_embed.weight``, ``tgt_embed.weight`` (``src_pos_embed.weight`` /
``tgt_pos_embed.weight`` with learned positions), ``transformer.*`` exactly ``torch.nn.Transformer``'s,
``head.weight`` / ``head.bias``.
"""

from __future__ import annotations

import math

import numpy as np

from ..nn import Dropout, Embedding, KVCache, LearnedPositionalEmbedding, Linear, PositionalEncoding, Transformer
from ..nn.kv_cache import resolve_use_cache
from ..nn.modes import eval_mode
from ..utils.checks import as_float_dtype, as_generator, check_grad, check_mask, check_positive_int, check_token_batch
from .encoder import ModelBase, check_model_options

__all__ = ["Seq2SeqModel", "POS_ENCODINGS"]

#: the position schemes the encoder-decoder implements (the vocabulary of its ``pos_encoding=``)
POS_ENCODINGS = ("sinusoidal", "learned")


class Seq2SeqModel(ModelBase):
    """Source ids (B, T) and decoder-input ids (B, S) -> target logits (B, S, V) through ``nt.Transformer``.

    Parameters
    ----------
    src_vocab_size, tgt_vocab_size : int
        The two vocabularies (equal for tasks over one alphabet).
    d_model, nhead, num_encoder_layers, num_decoder_layers, dim_feedforward, dropout, activation, norm_first
        As ``nt.Transformer`` (``dropout`` also on both embedding sums).
    max_len : int
        Longest source or decoder input accepted (size of the positional table).
    pos_encoding : {"sinusoidal", "learned"}
        One fixed table for both sides, or a trained table per side.
    dtype : np.float32 or np.float64
    seed : None, int or numpy.random.Generator
        Initialisation and every dropout mask derive from it.
    checkpoint : bool
        Activation checkpointing of both stacks' layers (``transformer.encoder`` and
        ``transformer.decoder``; see :attr:`~numpy_transformer.models.encoder.ModelBase.checkpoint`): same
        gradients bit for bit, less memory, one more forward of each layer.
    """

    model_kind = "seq2seq"          # what a checkpoint records (numpy_transformer.training.kinds)

    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=512, nhead=8, num_encoder_layers=2,
                 num_decoder_layers=2, dim_feedforward=2048, dropout=0.1, max_len=5000, activation="relu",
                 norm_first=False, pos_encoding="sinusoidal", dtype=np.float32, seed=None, checkpoint=False):
        super().__init__()
        src_vocab_size = check_positive_int(src_vocab_size, "src_vocab_size")
        tgt_vocab_size = check_positive_int(tgt_vocab_size, "tgt_vocab_size")
        d_model = check_positive_int(d_model, "d_model")
        nhead = check_positive_int(nhead, "nhead")
        max_len = check_positive_int(max_len, "max_len")
        dropout = check_model_options(d_model, nhead, dropout, activation, pos_encoding, POS_ENCODINGS)
        self.dtype = as_float_dtype(dtype)
        self.config = dict(src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size, d_model=d_model,
                           nhead=nhead, num_encoder_layers=num_encoder_layers,
                           num_decoder_layers=num_decoder_layers, dim_feedforward=dim_feedforward, dropout=dropout,
                           max_len=max_len, activation=activation, norm_first=bool(norm_first),
                           pos_encoding=pos_encoding, dtype=self.dtype.name)
        self.src_vocab_size, self.tgt_vocab_size = src_vocab_size, tgt_vocab_size
        self.d_model, self.max_len, self.pos_kind = d_model, max_len, pos_encoding
        rng = as_generator(seed)
        dt = self.dtype
        self.src_embed = Embedding(src_vocab_size, d_model, dtype=dt, seed=rng)
        self.tgt_embed = Embedding(tgt_vocab_size, d_model, dtype=dt, seed=rng)
        for e in (self.src_embed, self.tgt_embed):
            e.weight.data *= dt.type(1.0 / math.sqrt(d_model))      # N(0, 1/D): unit std once scaled
        self.scale = dt.type(math.sqrt(d_model))
        if pos_encoding == "learned":
            self.src_pos_embed = LearnedPositionalEmbedding(max_len, d_model, dtype=dt, seed=rng)
            self.tgt_pos_embed = LearnedPositionalEmbedding(max_len, d_model, dtype=dt, seed=rng)
        else:
            self.pos_encoding = PositionalEncoding(d_model, max_len=max_len, dtype=dt)   # shared: no parameters
        self.dropout = Dropout(dropout, seed=rng.spawn(1)[0])        # used on both sides, one mask per use
        self.transformer = Transformer(d_model, nhead, num_encoder_layers, num_decoder_layers, dim_feedforward,
                                       dropout, activation, norm_first=norm_first, batch_first=True, dtype=dt,
                                       seed=rng)
        self.head = Linear(d_model, tgt_vocab_size, dtype=dt, seed=rng)
        self.checkpoint = checkpoint

    def _stacks(self):
        return (self.transformer.encoder, self.transformer.decoder)

    # -- input checks -----------------------------------------------------------------------------------
    def _check_ids(self, ids, name, vocab):
        ids = check_token_batch(ids, name, vocab, shape_doc="(B, L)")
        if ids.shape[1] > self.max_len:
            raise ValueError(f"{name} length {ids.shape[1]} exceeds max_len={self.max_len}; build the model "
                             "with a larger max_len")
        return ids

    def _embed(self, ids, embed, pos_embed):
        x = embed(ids) * self.scale                                               # (B, L, D)
        if self.pos_kind == "learned":
            x = pos_embed(x)                                                      # (B, L, D) + (L, D)
        else:
            x = self.pos_encoding(x)
        return self.dropout(x)

    def _embed_backward(self, dx, embed, pos_embed):
        dx = self.dropout.backward(dx)
        if self.pos_kind == "learned":
            dx = pos_embed.backward(dx)                                           # dP: the batch sum
        else:
            dx = self.pos_encoding.backward(dx)
        embed.backward(dx * self.scale)                                           # y = E[ids] * sqrt(D)

    # -- training: teacher forcing ------------------------------------------------------------------------
    def forward(self, src, tgt, src_key_padding_mask=None):
        """src (B, T) ids in [0, src_vocab_size), tgt (B, S) decoder-input ids in [0, tgt_vocab_size) ->
        logits (B, S, tgt_vocab_size); target position i sees tgt[:, :i + 1] only (causal mask).

        ``src_key_padding_mask`` (B, T), True = padding: no encoder query and no decoder
        cross-attention query attends to it.
        """
        src = self._check_ids(src, "src", self.src_vocab_size)
        tgt = self._check_ids(tgt, "tgt", self.tgt_vocab_size)
        if src.shape[0] != tgt.shape[0]:
            raise ValueError(f"src and tgt must have the same batch size, got src {src.shape} and tgt {tgt.shape}")
        mask = check_mask(src_key_padding_mask, "src_key_padding_mask", [src.shape], self.dtype)
        s = self._embed(src, self.src_embed, getattr(self, "src_pos_embed", None))   # (B, T, D)
        t = self._embed(tgt, self.tgt_embed, getattr(self, "tgt_pos_embed", None))   # (B, S, D)
        causal = Transformer.generate_square_subsequent_mask(tgt.shape[1], self.dtype)  # (S, S)
        y = self.transformer(s, t, tgt_mask=causal, src_key_padding_mask=mask, memory_key_padding_mask=mask,
                             tgt_is_causal=True)                                  # (B, S, D)
        logits = self.head(y)                                                     # (B, S, V)
        self._save(logits.shape)
        return logits

    def backward(self, dlogits):
        """dlogits (B, S, V) -> None; accumulates every parameter's gradient (both embeddings included)."""
        shape = self._take()
        dlogits = check_grad(dlogits, "dlogits", shape, self.dtype)
        dy = self.head.backward(dlogits)                                          # (B, S, D)
        ds, dt = self.transformer.backward(dy)                                    # (B, T, D), (B, S, D)
        # the target side ran second, so its dropout/position uses are undone first
        self._embed_backward(dt, self.tgt_embed, getattr(self, "tgt_pos_embed", None))
        self._embed_backward(ds, self.src_embed, getattr(self, "src_pos_embed", None))
        return None

    # -- inference -------------------------------------------------------------------------------------
    def encode(self, src, src_key_padding_mask=None):
        """The memory (B, T, D) for source ids (B, T): what every decoding step attends to."""
        src = self._check_ids(src, "src", self.src_vocab_size)
        mask = check_mask(src_key_padding_mask, "src_key_padding_mask", [src.shape], self.dtype)
        s = self._embed(src, self.src_embed, getattr(self, "src_pos_embed", None))
        return self.transformer.encoder(s, src_key_padding_mask=mask)

    def decode(self, tgt, memory, memory_key_padding_mask=None, past_key_values=None, use_cache=None):
        """Logits (B, S, V) of decoder-input ids ``tgt`` (B, S) against ``memory`` (B, T, D).

        Without a cache the decoder runs over the whole prefix ``tgt``. With one (``use_cache=True``,
        or ``past_key_values`` from an earlier call) ``tgt`` holds only the new positions, which
        continue the cached ones: it returns ``(logits, past_key_values)``, the same logits at those
        positions as the full forward (the decoder's KV cache; inference only, call ``eval()`` first).
        """
        use_cache = resolve_use_cache(use_cache, past_key_values)
        past = 0 if past_key_values is None else past_key_values.get_seq_length(0)
        tgt = self._check_ids(tgt, "tgt", self.tgt_vocab_size)
        if not use_cache:
            t = self._embed(tgt, self.tgt_embed, getattr(self, "tgt_pos_embed", None))
            causal = Transformer.generate_square_subsequent_mask(tgt.shape[1], self.dtype)
            y = self.transformer.decoder(t, memory, tgt_mask=causal, tgt_is_causal=True,
                                         memory_key_padding_mask=memory_key_padding_mask)
            return self.head(y)
        if past + tgt.shape[1] > self.max_len:
            raise ValueError(f"tgt: {tgt.shape[1]} positions after the {past} cached ones exceed the model's "
                             f"max_len={self.max_len}")
        t = self.tgt_embed(tgt) * self.scale                                      # (B, S, D)
        if self.pos_kind == "learned":
            t = self.tgt_pos_embed(t, offset=past)                                # (B, S, D) + (S, D)
        else:
            t = t + self.pos_encoding.pe[past:past + tgt.shape[1]]                # (B, S, D) + (S, D)
        y, cache = self.transformer.decoder(self.dropout(t), memory, memory_key_padding_mask=memory_key_padding_mask,
                                            past_key_values=past_key_values, use_cache=True)
        return self.head(y), cache

    def greedy_decode(self, src, max_len, bos_token_id, eos_token_id, pad_token_id=0, src_key_padding_mask=None,
                      use_cache=True):
        """Greedy generation: ids (B, max_len), each row the argmax token at every step until it emits
        ``eos_token_id`` (kept), then ``pad_token_id``. Runs in eval mode (no dropout,
        :func:`~numpy_transformer.nn.eval_mode`): each submodule's own mode is restored afterwards. The
        memory is computed once; with ``use_cache`` (default) each step runs the decoder on
        the newest token only, through the KV cache, else over the whole prefix: the same tokens."""
        max_len = check_positive_int(max_len, "max_len")
        if max_len > self.max_len:            # the last step reads BOS + max_len - 1 tokens
            raise ValueError(f"max_len must be <= the model's max_len={self.max_len} (the longest decoder "
                             f"input), got {max_len}")
        for name, v in (("bos_token_id", bos_token_id), ("eos_token_id", eos_token_id),
                        ("pad_token_id", pad_token_id)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v < self.tgt_vocab_size:
                raise ValueError(f"{name} must be an id in [0, {self.tgt_vocab_size}), got {v!r}")
        with eval_mode(self):
            memory = self.encode(src, src_key_padding_mask)                        # (B, T, D), once
            b = memory.shape[0]
            ys = np.full((b, 1), bos_token_id, dtype=np.int64)
            done = np.zeros(b, dtype=bool)
            cache = KVCache() if use_cache else None
            for _ in range(max_len):
                if use_cache:
                    logits, cache = self.decode(ys[:, -1:], memory, src_key_padding_mask, past_key_values=cache)
                else:
                    logits = self.decode(ys, memory, src_key_padding_mask)             # (B, L, V)
                nxt = logits[:, -1].argmax(-1)                                         # (B,)
                nxt = np.where(done, pad_token_id, nxt)
                ys = np.concatenate([ys, nxt[:, None]], axis=1)
                done |= nxt == eos_token_id
                if done.all():
                    break
        out = np.full((b, max_len), pad_token_id, dtype=np.int64)
        out[:, :ys.shape[1] - 1] = ys[:, 1:]
        return out

    def extra_repr(self):
        c = self.config
        return (f"src_vocab_size={c['src_vocab_size']}, tgt_vocab_size={c['tgt_vocab_size']}, d_model={c['d_model']}, "
                f"nhead={c['nhead']}, layers={c['num_encoder_layers']}+{c['num_decoder_layers']}, dtype={c['dtype']}")
