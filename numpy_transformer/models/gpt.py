"""A decoder-only language model, GPT-style: :class:`GPT` (its configuration: :mod:`.gpt_config`).

``GPT`` maps token ids (B, S) to next-token logits (B, S, V)::

    x = wte(ids) + wpe(positions)              # token and position embeddings (or the sinusoidal table)
    x = drop(x)
    x = h[i](x, is_causal=True)                # n_layer pre-LN blocks: x + sa(ln1(x)), then x + ff(ln2(x))
    logits = lm_head(ln_f(x))                  # (B, S, V); lm_head.weight is wte.weight when tied

By default each block is an :class:`~numpy_transformer.nn.TransformerEncoderLayer` with
``norm_first=True`` and the causal mask: exactly pre-LN causal self-attention, so the blocks' forward
and backward are the encoder's, already proven against ``torch.nn``. The modern options (rotary, ALiBi
or relative positions, RMSNorm, SwiGLU, grouped-query attention; ``GPTConfig.modern``) build
:class:`~numpy_transformer.nn.TransformerBlock` s instead, keys ``h.{i}.norm1``,
``h.{i}.self_attn.{q,k,v,o}_proj``, ``h.{i}.mlp.*``, ``h.{i}.norm2`` (and ``relative_position_bias.*``,
one table for every block). The names follow nanoGPT (``wte``, ``wpe``, ``h``,
``ln_f``, ``lm_head``; ``block_size``, ``n_layer``, ``n_head``, ``n_embd``) and Hugging Face's GPT-2
(``n_inner``, ``tie_word_embeddings``, ``initializer_range``, ``past_key_values``, ``use_cache``).

``state_dict`` keys::

    wte.weight (V, D)               token embedding (also the head's weight when tied)
    wpe.weight (block_size, D)      learned positions only (the sinusoidal table is a buffer, no key)
    h.{i}.self_attn.in_proj_weight  ... torch.nn.TransformerEncoderLayer's keys for block i
    ln_f.weight, ln_f.bias          the final LayerNorm
    lm_head.weight (V, D)           the head (no bias); with tying the same array as wte.weight, listed
                                    under both names as torch lists a tied tensor

Incremental decoding: ``logits, cache = model(ids, past_key_values=cache, use_cache=True)`` runs only
the new positions through each block, attending them to the keys and values cached so far
(:mod:`numpy_transformer.nn.kv_cache`); :meth:`GPT.generate` builds on it
(:mod:`numpy_transformer.models.generation`). :mod:`reference_torch.models.gpt` is the torch twin.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .. import functional as F
from ..nn import (
    GELU,
    Dropout,
    Embedding,
    Linear,
    ModuleList,
    PositionalEncoding,
    RelativePositionBias,
    TransformerBlock,
    TransformerEncoderLayer,
)
from ..nn.block import make_norm
from ..nn.kv_cache import KVCache, resolve_use_cache
from ..nn.recompute import backward_layer, run_layer
from ..utils.checks import as_generator, check_attention_mask, check_grad, check_ids, check_token_batch
from .encoder import ModelBase
from .gpt_config import GPT_FFNS, NORMS, POSITIONS, GPTConfig, llama_config
from .score_bias import position_scores, with_padding

__all__ = ["GPTConfig", "GPT", "POSITIONS", "GPT_FFNS", "NORMS", "llama_config", "position_ids"]


class GPT(ModelBase):
    """Decoder-only language model: ids (B, S) -> logits (B, S, V), pre-LN causal blocks.

    Parameters
    ----------
    config : GPTConfig or dict, optional
        Or pass its fields as keyword arguments: ``nt.GPT(vocab_size=16, n_layer=2, ...)``.
    seed : None, int or numpy.random.Generator
        Initialisation and every dropout mask derive from it.
    checkpoint : bool
        Activation checkpointing of the blocks (keyword only; not a config field, it changes no
        result; see :attr:`~numpy_transformer.models.encoder.ModelBase.checkpoint`): each block keeps only its
        input and recomputes its forward in the backward; same gradients bit for bit. The cached
        (incremental) forward is unaffected.
    """

    model_kind = "gpt"              # what a checkpoint records (numpy_transformer.training.kinds)

    def __init__(self, config=None, seed=None, *, checkpoint=False, **kwargs):
        super().__init__()
        if config is None:
            config = GPTConfig(**kwargs)
        elif kwargs:
            raise TypeError(f"pass either config or its fields as keyword arguments, not both (got {sorted(kwargs)})")
        elif isinstance(config, dict):
            config = GPTConfig(**config)
        elif not isinstance(config, GPTConfig):
            raise TypeError(f"config must be an nt.GPTConfig or a dict, got {type(config).__name__}")
        else:
            config = dataclasses.replace(config)          # a validated copy the model owns
        self.config = c = config
        self.dtype = dt = np.dtype(c.dtype)
        self.vocab_size, self.max_len = c.vocab_size, c.block_size
        rng = as_generator(seed)
        d = c.n_embd

        self.wte = Embedding(c.vocab_size, d, dtype=dt, seed=rng)
        self.wte.weight.data[...] = rng.normal(0.0, c.initializer_range, self.wte.weight.shape)
        if c.positions == "learned":
            self.wpe = Embedding(c.block_size, d, dtype=dt, seed=rng)
            self.wpe.weight.data[...] = rng.normal(0.0, c.initializer_range, self.wpe.weight.shape)
        elif c.positions == "sinusoidal":
            self.pos_encoding = PositionalEncoding(d, max_len=c.block_size, dtype=dt)
        elif c.positions == "relative":           # one table for every block (T5 shares it across layers)
            self.relative_position_bias = RelativePositionBias(
                c.n_head, num_buckets=c.relative_attention_num_buckets,
                max_distance=c.relative_attention_max_distance, bidirectional=False, dtype=dt, seed=rng)
        self.drop = Dropout(c.dropout, seed=rng.spawn(1)[0])
        tanh_gelu = c.ffn == "gelu_new"                 # GPT-2's GELU: the tanh approximation
        if c.modern:
            self.h = ModuleList(TransformerBlock(d, c.n_head, c.ffn_dim, num_kv_heads=c.num_kv_heads, dropout=c.dropout,
                                                 ffn="gelu" if tanh_gelu else c.ffn, norm=c.norm, norm_first=True,
                                                 bias=c.bias, layer_norm_eps=c.layer_norm_eps,
                                                 rope=c.positions == "rope", rope_base=c.rope_base, dtype=dt, seed=rng)
                                for _ in range(c.n_layer))
            for block in self.h if tanh_gelu else ():
                block.mlp.activation = GELU(approximate="tanh")
        else:
            self.h = ModuleList(TransformerEncoderLayer(d, c.n_head, c.ffn_dim, c.dropout,
                                                        GELU(approximate="tanh") if tanh_gelu else c.ffn,
                                                        layer_norm_eps=c.layer_norm_eps, batch_first=True,
                                                        norm_first=True, bias=c.bias, dtype=dt, seed=rng)
                                for _ in range(c.n_layer))
        self.ln_f = make_norm(c.norm, d, eps=c.layer_norm_eps, bias=c.bias, dtype=dt)
        self.lm_head = Linear(d, c.vocab_size, bias=False, dtype=dt, seed=rng)
        if c.tie_word_embeddings:
            self.lm_head.weight = self.wte.weight          # one Parameter, two uses
        self.checkpoint = checkpoint

    # ------------------------------------------------------------------------------------------
    def _check_ids(self, ids, past, real=None):
        """``ids`` checked; ``real`` (B,): each row's count of real positions so far (padding left out)."""
        ids = check_token_batch(ids, "ids")
        if real is None and past + ids.shape[1] > self.max_len:
            where = f" after the {past} cached positions" if past else ""
            raise ValueError(f"ids: {ids.shape[1]} positions{where} exceed block_size={self.max_len} (positions "
                             f"0..{self.max_len - 1}); build the model with a larger block_size")
        if real is not None and real.max() > self.max_len:
            row = int(np.argmax(real))
            raise ValueError(f"ids: row {row} holds {int(real[row])} real positions (attention_mask's 1s, the "
                             f"cached ones included), more than block_size={self.max_len} (positions "
                             f"0..{self.max_len - 1}); build the model with a larger block_size")
        return check_ids(ids, "ids", self.vocab_size)       # the range last: a too-long input is named first

    def _padding(self, attention_mask, cache, b, past, s):
        """The whole (B, P+S) bool mask (True = real) of a padded call, or None when nothing is padded."""
        stored = None if cache is None else cache.attention_mask
        if attention_mask is None:
            if stored is None:
                return None
            return np.concatenate([stored, np.ones((b, s), dtype=bool)], axis=1)  # new tokens are real
        mask = check_attention_mask(attention_mask, (b, past + s))
        before = np.ones((b, past), dtype=bool) if stored is None else stored
        if not np.array_equal(mask[:, :past], before):
            raise ValueError(f"attention_mask's first {past} columns (the cached positions) differ from the mask "
                             "the cache was built with: pass the whole mask, the cached positions' part unchanged")
        return None if stored is None and mask.all() else mask

    def forward(self, ids, past_key_values=None, use_cache=None, attention_mask=None):
        """ids (B, S) integer in [0, V) -> logits (B, S, V); with the cache, ``(logits, past_key_values)``.

        Parameters
        ----------
        ids : ndarray (B, S)
            Without a cache: the whole sequence. With one: the new positions only (the prompt at the
            first call, then one token per step), which continue the cached positions.
        past_key_values : KVCache, optional
            The keys and values of the positions so far (from an earlier cached call). Changed in
            place and returned. A cache this model cannot have built (another number of layers, other
            heads or head width, another dtype) raises ValueError / TypeError.
        use_cache : bool, optional
            Default: True when ``past_key_values`` is given. ``use_cache=True`` alone starts a new cache.
            Anything but True, False or None raises TypeError.
        attention_mask : ndarray (B, P + S) of 0/1, optional
            Hugging Face's mask over the cached (P) and new (S) positions: 1 = a real token, 0 =
            padding, which must be on the left (a 0 after a 1 raises ValueError). Padded keys are never
            attended to, and each row's positions count from its first real token (Hugging Face's
            ``position_ids = cumsum(attention_mask) - 1``, clipped at 0), so the real positions of a
            left-padded row get exactly the logits of that row run alone; the logits at padded
            positions mean nothing. The cache keeps the mask: later cached calls may pass the whole
            mask again or omit it (the new tokens are then real). With a mask, the limit
            ``block_size`` applies to each row's real positions, not to the padded width. Backward
            works through it (padded keys get no gradient).

        The cached forward is **inference only**: its logits equal the full forward's at those
        positions, but it keeps nothing for a backward (``backward`` after it raises RuntimeError).
        """
        use_cache = resolve_use_cache(use_cache, past_key_values)
        past = self._check_cache(past_key_values, ids)
        b, s = np.shape(ids)
        mask = self._padding(attention_mask, past_key_values, b, past, s)      # (B, P+S) True = real, or None
        ids = self._check_ids(ids, past, None if mask is None else mask.sum(axis=1))
        # each row counts from its first real token (padding: position 0); unpadded: past .. past+S-1
        pos = None if mask is None else position_ids(mask)[:, past:]             # (B, S)
        x = self.drop(self._embed(ids, past, pos))                               # (B, S, D)
        kw, has_bias = self._attention_extras(s, past, mask, pos, cached=use_cache)
        cache, saved = None, None
        if use_cache:
            cache = KVCache() if past_key_values is None else past_key_values
            for i, block in enumerate(self.h):
                x = block.forward_cached(x, cache, i, **kw)                      # (B, S, D)
            if mask is not None:
                cache.attention_mask = mask
        else:
            saved = []
            for block in self.h:                       # checkpoint: each block keeps only its input
                x, kept = run_layer(block, self.checkpoint, x, is_causal=True, **kw)   # (B, S, D)
                saved.append(kept)
        logits = self.lm_head(self.ln_f(x))                                      # (B, S, V)
        self._save((use_cache, logits.shape, mask is not None, has_bias, saved))
        return (logits, cache) if use_cache else logits

    def _check_cache(self, past_key_values, ids):
        """The number of cached positions P; refuses a cache this model cannot have built and ids whose
        shape is wrong (before any position arithmetic) or whose batch is not the cache's."""
        if past_key_values is not None:                  # another model's cache would be read silently
            attn = self.h[0].self_attn
            heads = attn.num_kv_heads if self.config.modern else attn.num_heads
            past_key_values.check_layers(range(len(self.h)), heads, self.config.n_embd // self.config.n_head,
                                         self.dtype)
        past = 0 if past_key_values is None else past_key_values.get_seq_length(0)
        shape = np.shape(ids)
        if len(shape) != 2 or 0 in shape:
            self._check_ids(ids, past)                                           # raises: the shape is wrong
        if past and past_key_values.batch_size != shape[0]:
            raise ValueError(f"ids has batch {shape[0]} but past_key_values holds {past_key_values.batch_size} rows")
        return past

    def _embed(self, ids, past, pos):
        """Token embeddings plus the position table's rows of positions ``past .. past+S-1`` (or of the
        padded batch's ``pos`` (B, S)); the schemes on the scores or in q/k add nothing here."""
        x = self.wte(ids)                                                        # (B, S, D)
        s, kind = ids.shape[1], self.config.positions
        if kind == "learned":
            return x + self.wpe(np.arange(past, past + s) if pos is None else pos)   # + (S, D) or (B, S, D)
        if kind == "sinusoidal" and (past or pos is not None):
            return x + self.pos_encoding.pe[np.arange(past, past + s) if pos is None else pos]   # a fixed table
        if kind == "sinusoidal":
            return self.pos_encoding(x)                                          # (B, S, D)
        return x

    def _attention_extras(self, s, past, mask, pos, cached):
        """The keyword arguments every block's attention gets, and whether they hold a learned bias
        (whose gradient goes back to its table). TransformerBlocks: the scheme's score bias
        (:func:`~numpy_transformer.models.score_bias.position_scores`), the padding as -inf on padded
        keys, the rotary positions ``pos``; encoder layers: the padding as a key padding mask (and,
        in the full forward, the explicit causal mask it goes with)."""
        if self.config.modern:
            c = self.config
            bias, const = position_scores(c.positions, c.n_head, s, past, is_causal=True,
                                          relative=getattr(self, "relative_position_bias", None), dtype=self.dtype)
            const = with_padding(const, mask, self.dtype)        # (H, S, P+S), (B, 1, 1, P+S) or None
            return dict(attn_bias=bias, attn_mask=const, positions=pos), bias is not None
        if mask is None:
            return {}, False
        if cached:
            return dict(src_key_padding_mask=~mask), False                       # (B, P+S) True = padding
        return dict(src_mask=F.causal_mask(s), src_key_padding_mask=~mask), False

    def backward(self, dlogits):
        """dlogits (B, S, V) -> None; accumulates every parameter's gradient.

        Walks the forward backwards. With tied weights ``lm_head.backward`` adds ``dlogits^T x`` into
        the shared parameter and ``wte.backward`` then adds the embedding use's scatter-add: the
        tied gradient is the sum of both (docs/derivations.md).
        """
        cached, shape, padded, has_bias, saved = self._take()
        if cached:
            raise RuntimeError("GPT.backward() after a cached forward (use_cache=True / past_key_values): incremental "
                               "decoding is inference only and keeps nothing for a backward; train with the full "
                               "forward, model(ids)")
        dlogits = check_grad(dlogits, "dlogits", shape, self.dtype)
        dx = self.ln_f.backward(self.lm_head.backward(dlogits))                  # (B, S, D)
        dbias = 0
        for block, kept in reversed(list(zip(self.h, saved))):
            if has_bias:                  # the relative bias table feeds every block: its gradients add
                dx, db = backward_layer(block, kept, dx)
                dbias = dbias + db                                               # (H, S, S)
            else:
                dx = backward_layer(block, kept, dx)
        dx = self.drop.backward(dx)
        if has_bias:
            self.relative_position_bias.backward(dbias)
        if self.config.positions == "learned":
            self.wpe.backward(dx if padded else dx.sum(axis=0))                 # (B, S, D) per row, or (S, D)
        elif self.config.positions == "sinusoidal" and not padded:    # padded: the table was indexed
            dx = self.pos_encoding.backward(dx)
        self.wte.backward(dx)
        return None

    @classmethod
    def from_pretrained(cls, path, dtype="float32"):
        """A GPT-2 or Llama from a local Hugging Face folder (no torch, no pickle).

        Parameters
        ----------
        path : str or os.PathLike
            ``config.json`` (``model_type`` ``"gpt2"`` or ``"llama"``) and ``model.safetensors`` or its
            shards (``model.safetensors.index.json``).
        dtype : {"float32", "float64"}
            The model's dtype (the file's tensors are cast to it).

        Returns
        -------
        GPT
            In eval mode, ``dropout=0.0``. What does not map exactly raises ``nt.PretrainedFolderError``;
            ``safetensors`` must be installed (``pip install numpy-transformer[hf]``). See
            :func:`numpy_transformer.models.pretrained.load_pretrained`.
        """
        from .pretrained import load_pretrained
        return load_pretrained(cls, path, dtype)

    def save_pretrained(self, path, overwrite=False):
        """Write this model as a Hugging Face GPT-2 or Llama folder (``config.json``, ``model.safetensors``)
        that ``transformers.AutoModelForCausalLM.from_pretrained`` loads to the same logits.

        Parameters
        ----------
        path : str or os.PathLike
            The folder (created if needed). A model neither architecture expresses raises
            ``nt.PretrainedFolderError`` naming its fields, before anything is written. See
            :func:`numpy_transformer.models.pretrained.save_pretrained`.
        overwrite : bool
            A folder that is not empty is refused (FileExistsError, nothing written: the folder a
            model was loaded from is never replaced by mistake); True writes into it.
        """
        from .pretrained import save_pretrained
        save_pretrained(self, path, overwrite=overwrite)

    def generate(self, ids=None, max_new_tokens=None, **kwargs):
        """Continue ``ids`` (B, S) by ``max_new_tokens``; see :func:`numpy_transformer.models.generation.generate`."""
        from .generation import generate
        return generate(self, ids, max_new_tokens, **kwargs)

    def extra_repr(self):
        c = self.config
        return (f"vocab_size={c.vocab_size}, block_size={c.block_size}, n_layer={c.n_layer}, n_head={c.n_head}, "
                f"n_embd={c.n_embd}, positions={c.positions!r}, norm={c.norm!r}, ffn={c.ffn!r}, "
                f"num_kv_heads={c.num_kv_heads}, tie_word_embeddings={c.tie_word_embeddings}, "
                f"dtype={c.dtype}")



def position_ids(attention_mask):
    """Each row's positions counted from its first real token: Hugging Face's
    ``cumsum(attention_mask) - 1``, clipped at 0 (the padding before it gets position 0).
    attention_mask (B, T) bool or 0/1 -> (B, T) int64."""
    return np.maximum(np.cumsum(attention_mask, axis=1, dtype=np.int64) - 1, 0)

