"""A decoder-only language model, GPT-style: :class:`GPTConfig` and :class:`GPT`.

``GPT`` maps token ids (B, S) to next-token logits (B, S, V)::

    x = wte(ids) + wpe(positions)              # token and position embeddings (or the sinusoidal table)
    x = drop(x)
    x = h[i](x, is_causal=True)                # n_layer pre-LN blocks: x + sa(ln1(x)), then x + ff(ln2(x))
    logits = lm_head(ln_f(x))                  # (B, S, V); lm_head.weight is wte.weight when tied

Each block is an :class:`~numpy_transformer.nn.TransformerEncoderLayer` with ``norm_first=True`` and the
causal mask: exactly pre-LN causal self-attention, so the blocks' forward and backward are the
encoder's, already proven against ``torch.nn``. The names follow nanoGPT (``wte``, ``wpe``, ``h``,
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
(:mod:`numpy_transformer.generation`). :mod:`reference_torch.gpt` is the torch twin.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

import numpy as np

from . import functional as F
from ._checks import as_float_dtype, as_generator, check_attention_mask, check_grad, check_ids, check_number, \
    check_positive_int, check_probability
from .nn import Dropout, Embedding, LayerNorm, Linear, ModuleList, PositionalEncoding, TransformerEncoderLayer
from .model import ModelBase
from .nn.kv_cache import KVCache, cached_attention

__all__ = ["GPTConfig", "GPT", "POSITIONS", "GPT_ACTIVATIONS", "position_ids"]

POSITIONS = ("learned", "sinusoidal")
GPT_ACTIVATIONS = ("gelu", "relu", "silu")


@dataclass
class GPTConfig:
    """The GPT model's configuration (a plain dataclass: ``dataclasses.asdict`` saves it, ``GPTConfig(**d)``
    restores it).

    Parameters
    ----------
    vocab_size : int
        V.
    block_size : int
        The longest sequence (nanoGPT's name; GPT-2's ``n_positions``): the positions table's size,
        and the most tokens a prompt plus its generated continuation may hold.
    n_layer, n_head, n_embd : int
        Blocks, heads and width D (D divisible by the heads).
    n_inner : int, optional
        The feed-forward width F (default ``4 * n_embd``, as GPT-2).
    dropout : float
        On the embedding sum, the attention probabilities, both residual branches and inside the
        feed-forward block (the encoder layer's four dropouts).
    bias : bool
        Biases in the attention and feed-forward projections and the LayerNorms (nanoGPT's ``bias``);
        the head never has one.
    activation : {"gelu", "relu", "silu"}
        The feed-forward activation (exact GELU, as ``torch.nn.functional.gelu``; SiLU as
        ``torch.nn.functional.silu``).
    layer_norm_eps : float
    positions : {"learned", "sinusoidal"}
        A trained table ``wpe.weight`` (GPT-2) or the fixed sine/cosine table.
    tie_word_embeddings : bool
        The head's weight is the token embedding's (one parameter used twice; its gradient is the sum
        of both uses).
    initializer_range : float
        The token (and learned position) embeddings are drawn from N(0, initializer_range**2), as
        GPT-2; the blocks keep torch's initialisation, an untied head torch's ``Linear`` one.
    dtype : {"float32", "float64"}

    Options the next issue adds (RoPE, RMSNorm, SwiGLU, grouped-query attention) become values of
    ``positions`` ("rope"), a ``norm`` field ("layer_norm" | "rms_norm"), ``activation`` ("swiglu") and
    an ``n_kv_head`` field; each is validated in :meth:`validate` and read in :class:`GPT` only.
    """

    vocab_size: int
    block_size: int = 128
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 64
    n_inner: Optional[int] = None
    dropout: float = 0.0
    bias: bool = True
    activation: str = "gelu"
    layer_norm_eps: float = 1e-5
    positions: str = "learned"
    tie_word_embeddings: bool = True
    initializer_range: float = 0.02
    dtype: str = "float32"

    def __post_init__(self):
        self.validate()

    def validate(self):
        """Check every field (ValueError/TypeError naming it); normalise ``dtype`` to its name."""
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):
            check_positive_int(getattr(self, name), name)
        if self.n_inner is not None:
            check_positive_int(self.n_inner, "n_inner")
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd must be divisible by n_head, got n_embd={self.n_embd} and n_head={self.n_head}")
        check_probability(self.dropout)
        check_number(self.layer_norm_eps, "layer_norm_eps", low=0, low_open=True)
        check_number(self.initializer_range, "initializer_range", low=0)
        if self.activation not in GPT_ACTIVATIONS:
            raise ValueError(f"activation must be one of {GPT_ACTIVATIONS}, got {self.activation!r}")
        if self.positions not in POSITIONS:
            raise ValueError(f"positions must be one of {POSITIONS}, got {self.positions!r}")
        for name in ("bias", "tie_word_embeddings"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}")
        self.dtype = as_float_dtype(self.dtype).name

    @property
    def ffn_dim(self):
        """F: ``n_inner``, or ``4 * n_embd``."""
        return 4 * self.n_embd if self.n_inner is None else self.n_inner

    def to_dict(self):
        return dataclasses.asdict(self)


class GPT(ModelBase):
    """Decoder-only language model: ids (B, S) -> logits (B, S, V), pre-LN causal blocks.

    Parameters
    ----------
    config : GPTConfig or dict, optional
        Or pass its fields as keyword arguments: ``nt.GPT(vocab_size=16, n_layer=2, ...)``.
    seed : None, int or numpy.random.Generator
        Initialisation and every dropout mask derive from it.
    """

    model_kind = "gpt"              # what a checkpoint records (numpy_transformer.kinds)

    def __init__(self, config=None, seed=None, **kwargs):
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
        else:
            self.pos_encoding = PositionalEncoding(d, max_len=c.block_size, dtype=dt)
        self.drop = Dropout(c.dropout, seed=rng.spawn(1)[0])
        self.h = ModuleList(TransformerEncoderLayer(d, c.n_head, c.ffn_dim, c.dropout, c.activation,
                                                    layer_norm_eps=c.layer_norm_eps, batch_first=True,
                                                    norm_first=True, bias=c.bias, dtype=dt, seed=rng)
                            for _ in range(c.n_layer))
        self.ln_f = LayerNorm(d, eps=c.layer_norm_eps, bias=c.bias, dtype=dt)
        self.lm_head = Linear(d, c.vocab_size, bias=False, dtype=dt, seed=rng)
        if c.tie_word_embeddings:
            self.lm_head.weight = self.wte.weight          # one Parameter, two uses

    # ------------------------------------------------------------------------------------------
    def _check_ids(self, ids, past, real=None):
        """``ids`` checked; ``real`` (B,): each row's count of real positions so far (padding left out)."""
        if not isinstance(ids, np.ndarray):
            ids = np.asarray(ids)
        if ids.dtype.kind not in "iu":
            raise TypeError(f"ids must be an integer array of token ids (B, S), got dtype {ids.dtype}")
        if ids.ndim != 2:
            raise ValueError(f"ids must have shape (B, S), got shape {ids.shape}")
        if ids.shape[0] == 0 or ids.shape[1] == 0:
            raise ValueError(f"ids must have a non-empty batch and sequence, got shape {ids.shape}")
        if real is None and past + ids.shape[1] > self.max_len:
            where = f" after the {past} cached positions" if past else ""
            raise ValueError(f"ids: {ids.shape[1]} positions{where} exceed block_size={self.max_len} (positions "
                             f"0..{self.max_len - 1}); build the model with a larger block_size")
        if real is not None and real.max() > self.max_len:
            row = int(np.argmax(real))
            raise ValueError(f"ids: row {row} holds {int(real[row])} real positions (attention_mask's 1s, the "
                             f"cached ones included), more than block_size={self.max_len} (positions "
                             f"0..{self.max_len - 1}); build the model with a larger block_size")
        return check_ids(ids, "ids", self.vocab_size)

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
            place and returned.
        use_cache : bool, optional
            Default: True when ``past_key_values`` is given. ``use_cache=True`` alone starts a new cache.
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
        if use_cache is None:
            use_cache = past_key_values is not None
        if past_key_values is not None and not use_cache:
            raise ValueError("past_key_values given with use_cache=False: pass use_cache=True (or omit it) to "
                             "continue the cache, or past_key_values=None for a full forward")
        if past_key_values is not None and not isinstance(past_key_values, KVCache):
            raise TypeError(f"past_key_values must be an nt.KVCache (from an earlier call with use_cache=True), "
                            f"got {type(past_key_values).__name__}")
        past = 0 if past_key_values is None else past_key_values.get_seq_length(0)
        shape = np.shape(ids)
        if len(shape) != 2 or 0 in shape:
            self._check_ids(ids, past)                                           # raises: the shape is wrong
        b, s = shape
        if past_key_values is not None and past and past_key_values.batch_size != b:
            raise ValueError(f"ids has batch {b} but past_key_values holds {past_key_values.batch_size} rows")
        mask = self._padding(attention_mask, past_key_values, b, past, s)      # (B, P+S) True = real, or None
        ids = self._check_ids(ids, past, None if mask is None else mask.sum(axis=1))
        x = self.wte(ids)                                                        # (B, S, D)
        if mask is not None:            # each row counts from its first real token (padding: position 0)
            pos = position_ids(mask)[:, past:]                                   # (B, S)
            if self.config.positions == "learned":
                x = x + self.wpe(pos)                                            # (B, S, D)
            else:
                x = x + self.pos_encoding.pe[pos]                                # (B, S, D): a fixed table
        elif self.config.positions == "learned":
            x = x + self.wpe(np.arange(past, past + s))                          # (B, S, D) + (S, D)
        elif past:
            x = x + self.pos_encoding.pe[past:past + s]                          # (B, S, D) + (S, D)
        else:
            x = self.pos_encoding(x)                                             # (B, S, D)
        x = self.drop(x)
        if use_cache:
            cache = KVCache() if past_key_values is None else past_key_values
            padding = None if mask is None else ~mask                            # (B, P+S) True = padding
            for i, block in enumerate(self.h):
                x = _block_step(block, x, cache, i, padding)
            if mask is not None:
                cache.attention_mask = mask
        elif mask is None:
            for block in self.h:
                x = block(x, is_causal=True)                                     # (B, S, D)
        else:
            causal = F.causal_mask(s)                                            # (S, S) True = may not attend
            for block in self.h:
                x = block(x, src_mask=causal, src_key_padding_mask=~mask, is_causal=True)   # (B, S, D)
        logits = self.lm_head(self.ln_f(x))                                      # (B, S, V)
        self._save((use_cache, logits.shape, mask is not None))
        return (logits, cache) if use_cache else logits

    def backward(self, dlogits):
        """dlogits (B, S, V) -> None; accumulates every parameter's gradient.

        Walks the forward backwards. With tied weights ``lm_head.backward`` adds ``dlogits^T x`` into
        the shared parameter and ``wte.backward`` then adds the embedding use's scatter-add: the
        tied gradient is the sum of both (docs/derivations.md).
        """
        cached, shape, padded = self._take()
        if cached:
            raise RuntimeError("GPT.backward() after a cached forward (use_cache=True / past_key_values): incremental "
                               "decoding is inference only and keeps nothing for a backward; train with the full "
                               "forward, model(ids)")
        dlogits = check_grad(dlogits, "dlogits", shape, self.dtype)
        dx = self.ln_f.backward(self.lm_head.backward(dlogits))                  # (B, S, D)
        for block in reversed(list(self.h)):
            dx = block.backward(dx)
        dx = self.drop.backward(dx)
        if self.config.positions == "learned":
            self.wpe.backward(dx if padded else dx.sum(axis=0))                 # (B, S, D) per row, or (S, D)
        elif not padded:                                     # padded: the table was indexed, no module cache
            dx = self.pos_encoding.backward(dx)
        self.wte.backward(dx)
        return None

    def generate(self, ids, max_new_tokens, **kwargs):
        """Continue ``ids`` (B, S) by ``max_new_tokens``; see :func:`numpy_transformer.generation.generate`."""
        from .generation import generate
        return generate(self, ids, max_new_tokens, **kwargs)

    def extra_repr(self):
        c = self.config
        return (f"vocab_size={c.vocab_size}, block_size={c.block_size}, n_layer={c.n_layer}, n_head={c.n_head}, "
                f"n_embd={c.n_embd}, positions={c.positions!r}, tie_word_embeddings={c.tie_word_embeddings}, "
                f"dtype={c.dtype}")


def position_ids(attention_mask):
    """Each row's positions counted from its first real token: Hugging Face's
    ``cumsum(attention_mask) - 1``, clipped at 0 (the padding before it gets position 0).
    attention_mask (B, T) bool or 0/1 -> (B, T) int64."""
    return np.maximum(np.cumsum(attention_mask, axis=1, dtype=np.int64) - 1, 0)


def _block_step(block, x, cache, slot, key_padding_mask=None):
    """One pre-LN block on the new positions x (B, S, D), self-attention through the cache:
    ``x + dropout1(attn(norm1(x)))``, then ``+ ff(norm2(.))``, the block's own sub-modules.
    ``key_padding_mask`` (B, P+S): True = a padded position, never attended to."""
    a = cached_attention(block.self_attn, block.norm1(x), cache, slot, key_padding_mask=key_padding_mask)
    x = x + block.dropout1(a)
    return x + block._ff_block(block.norm2(x))                                   # (B, S, D)
