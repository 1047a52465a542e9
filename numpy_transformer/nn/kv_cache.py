"""Incremental decoding: :class:`KVCache` (each attention layer's keys and values of the positions seen
so far) and :func:`cached_attention` (attend new positions to them through a ``MultiheadAttention``'s
own weights).

A decoder's self-attention at position t reads the keys and values of positions 0..t. Computed from
scratch, step t re-projects all t + 1 positions; with a cache it projects only the new position,
appends its key and value, and attends its one query to all of them: the same numbers (a position's
key depends only on that position's input, which causality keeps fixed once it is written), so the
logits are equal to a full forward over the whole prefix (``tests/models/test_gpt.py``, float64, 1e-12).

The API, for any model built from :class:`~numpy_transformer.nn.MultiheadAttention` (the GPT model uses
it; a Transformer decoder can use it the same way)::

    cache = KVCache()
    out = cached_attention(attn, x_new, cache, slot=i)                 # self-attention, causal
    out = cached_attention(attn, x_new, cache, slot=("cross", i), memory=memory)   # cross-attention

* ``slot`` names the layer (any hashable: an int for layer i's self-attention, ``("cross", i)`` for
  its cross-attention). A self-attention slot grows by the new positions at every call; a ``memory``
  slot is filled once, from ``memory``, on its first call (the encoder's output does not change while
  decoding) and reused afterwards.
* ``x_new`` (B, S, D) holds the S >= 1 new positions (the whole prompt on the first call, one token
  per decode step after it). New query i sits at absolute position P + i (P = the slot's cached
  length) and attends keys 0..P+i: causal, aligned at the bottom right.
* Inference only: nothing is saved for a backward (no module cache is pushed). Training uses the
  ordinary forward, whose backward is the hand-written one; a model refuses ``backward`` after a
  cached forward (see :class:`numpy_transformer.GPT`).
* Beam search reorders the batch rows of every slot with :meth:`KVCache.reorder_cache`.
"""

from __future__ import annotations

import numpy as np

from .. import functional as F
from ..utils.checks import check_float_input
from .attention import MultiheadAttention

__all__ = ["KVCache", "cached_attention", "resolve_use_cache"]


def resolve_use_cache(use_cache, past_key_values):
    """``use_cache`` as every cached forward reads it (Hugging Face's rule): True, False or None, the
    default None meaning True exactly when ``past_key_values`` is given; checked.

    Raises TypeError for a ``use_cache`` that is not True, False or None, or a ``past_key_values``
    that is not a :class:`KVCache`, and ValueError for ``past_key_values`` with ``use_cache=False``.
    """
    if use_cache is not None and not isinstance(use_cache, (bool, np.bool_)):
        raise TypeError(f"use_cache must be True, False or None (the default: True when past_key_values is "
                        f"given), got {use_cache!r} ({type(use_cache).__name__})")
    if use_cache is None:
        use_cache = past_key_values is not None
    if past_key_values is not None and not use_cache:
        raise ValueError("past_key_values given with use_cache=False: pass use_cache=True (or omit it) to "
                         "continue the cache, or past_key_values=None for a full forward")
    if past_key_values is not None and not isinstance(past_key_values, KVCache):
        raise TypeError(f"past_key_values must be an nt.KVCache (from an earlier call with use_cache=True), "
                        f"got {type(past_key_values).__name__}")
    return bool(use_cache)


class KVCache:
    """Keys and values per attention layer ("slot"), each (B, H, T, Dh), as Hugging Face's ``DynamicCache``.

    Built empty (``KVCache()``); :func:`cached_attention` fills it. The cache is changed in place
    and returned by the models' cached forward (``logits, cache = model(ids, past_key_values=cache,
    use_cache=True)``), so one object follows a whole generation.
    """

    def __init__(self):
        self.keys = {}          # slot -> (B, H, T, Dh)
        self.values = {}        # slot -> (B, H, T, Dh)
        self.static = set()     # slots filled once from a memory (cross-attention)
        self.attention_mask = None  # (B, T) bool, True = real token: set by a model given a padded prompt

    def __len__(self):
        return len(self.keys)

    def __contains__(self, slot):
        return slot in self.keys

    def get_seq_length(self, slot=0):
        """T, the number of positions cached in ``slot`` (0 when the slot is empty); HF's name."""
        return 0 if slot not in self.keys else self.keys[slot].shape[-2]

    @property
    def batch_size(self):
        """B of the cached rows (None while empty)."""
        return None if not self.keys else next(iter(self.keys.values())).shape[0]

    def update(self, slot, key, value):
        """Append ``key``/``value`` (B, H, S, Dh) to ``slot``; return the slot's whole (B, H, T+S, Dh) pair."""
        if slot in self.static:
            raise ValueError(f"slot {slot!r} holds a memory's keys and values (cross-attention); it is not "
                             "appended to")
        if slot in self.keys:
            key = np.concatenate([self.keys[slot], key], axis=-2)                # (B, H, T+S, Dh)
            value = np.concatenate([self.values[slot], value], axis=-2)          # (B, H, T+S, Dh)
        self.keys[slot], self.values[slot] = key, value
        return key, value

    def check_layers(self, slots, heads, head_dim, dtype, name="past_key_values"):
        """Refuse a cache that another model built: a non-empty cache must hold exactly the self-attention
        ``slots`` (one per layer), each (B, ``heads``, T, ``head_dim``) of ``dtype`` with one B and T.

        Raises ValueError (TypeError for the dtype) naming ``name``, what the cache holds and what the
        model expects; an empty cache passes (the first call fills it)."""
        if not self.keys:
            return
        slots = list(slots)
        if set(self.keys) != set(slots) or self.static:
            raise ValueError(f"{name} holds the layers {sorted(self.keys, key=repr)} but this model has "
                             f"{len(slots)} (slots {slots}): pass the cache this model returned, or None to start one")
        b, t = self.batch_size, self.get_seq_length(slots[0])
        for slot in slots:
            for what, a in (("keys", self.keys[slot]), ("values", self.values[slot])):
                if a.ndim != 4 or a.shape[0] != b or a.shape[1] != heads or a.shape[2] != t or a.shape[3] != head_dim:
                    raise ValueError(f"{name}: layer {slot!r}'s {what} have shape {a.shape}, but this model caches "
                                     f"(B, {heads}, T, {head_dim}) per layer, with one B ({b}) and T ({t}) in every "
                                     "layer: pass the cache this model returned, or None to start one")
                if a.dtype != dtype:
                    raise TypeError(f"{name}: layer {slot!r}'s {what} have dtype {a.dtype}, but this model is {dtype}")

    def set_static(self, slot, key, value):
        """Store a memory's keys and values (B, H, T, Dh) in ``slot`` once (cross-attention)."""
        self.keys[slot], self.values[slot] = key, value
        self.static.add(slot)
        return key, value

    def reorder_cache(self, beam_idx):
        """Keep batch rows ``beam_idx`` (B',) of every slot (and of ``attention_mask``), in that order (beam
        search; HF's name)."""
        beam_idx = np.asarray(beam_idx)
        if self.attention_mask is not None:
            self.attention_mask = self.attention_mask[beam_idx]
        for slot in self.keys:
            self.keys[slot] = self.keys[slot][beam_idx]
            self.values[slot] = self.values[slot][beam_idx]
        return self

    def __repr__(self):
        lengths = {slot: self.get_seq_length(slot) for slot in self.keys}
        return f"KVCache(slots={len(self)}, lengths={lengths})"


def _project(attn, x, which):
    """Rows ``which`` (0: q, 1: k, 2: v) of the input projection applied to x (B, S, Din) -> (B, S, D)."""
    d = attn.embed_dim
    if attn.in_proj_weight is not None:
        w = attn.in_proj_weight.data[which * d:(which + 1) * d]
    else:
        w = (attn.q_proj_weight, attn.k_proj_weight, attn.v_proj_weight)[which].data
    b = None if attn.in_proj_bias is None else attn.in_proj_bias.data[which * d:(which + 1) * d]
    return F.linear_forward(x, w, b)[0]


def cached_attention(attn, query, cache, slot=0, memory=None, key_padding_mask=None):
    """``attn``'s attention of the new positions ``query`` over the cached ones (inference only).

    Parameters
    ----------
    attn : MultiheadAttention
        Batch-first, without ``add_bias_kv``/``add_zero_attn``; its weights are used, nothing is saved.
    query : ndarray, shape (B, S, D)
        The new positions (S >= 1).
    cache : KVCache
    slot : hashable
        This layer's entry in ``cache``.
    memory : ndarray, shape (B, T, kdim), optional
        Cross-attention: the keys and values come from ``memory``, projected on the slot's first call
        and reused after it; no causal mask.
    key_padding_mask : ndarray (B, T), optional
        Bool True = that key position is padding, or float added to the scores (the modules'
        convention). Cross-attention: T is the memory's length. Self-attention: T = P + S, the cached
        and the new positions (a left-padded prompt), combined with the causal mask.

    Returns
    -------
    out : ndarray, shape (B, S, D)
        What ``attn(query_all, key_all, value_all, attn_mask=causal)`` gives at these positions.
    """
    if not isinstance(attn, MultiheadAttention):
        raise TypeError(f"attn must be an nt.MultiheadAttention, got {type(attn).__name__}")
    if attn.bias_k is not None or attn.add_zero_attn or not attn.batch_first:
        raise ValueError("cached_attention supports batch-first attention without add_bias_kv/add_zero_attn")
    if not isinstance(cache, KVCache):
        raise TypeError(f"cache must be an nt.KVCache, got {type(cache).__name__}")
    query = check_float_input(query, "query", attn.dtype, ndim=3, last_dim=attn.embed_dim, shape_doc="(B, S, D)")
    b, s, _ = query.shape
    h = attn.num_heads
    if s == 0 or b == 0:
        raise ValueError(f"query must hold at least one new position, got shape {query.shape}")
    if cache.batch_size is not None and cache.batch_size != b:
        raise ValueError(f"query has batch {b} but the cache holds {cache.batch_size} rows")

    def heads(x):
        return F.split_heads(x, h)                                              # (B, H, ., Dh)

    q = heads(_project(attn, query, 0))                                          # (B, H, S, Dh)
    mask = None
    kpm = None if key_padding_mask is None else F.module_to_sdpa_mask(np.asarray(key_padding_mask))
    if memory is None:
        past = cache.get_seq_length(slot)
        if kpm is not None and kpm.shape != (b, past + s):
            raise ValueError(f"key_padding_mask must have shape {(b, past + s)} (the {past} cached and {s} new "
                             f"positions), got {kpm.shape}")
        k, v = cache.update(slot, heads(_project(attn, query, 1)), heads(_project(attn, query, 2)))
        if s > 1:          # new query i (absolute P + i) may attend keys j <= P + i: True = takes part
            mask = ~np.triu(np.ones((s, past + s), dtype=bool), k=past + 1)      # (S, P+S)
        if kpm is not None:                     # padded keys take no part either
            kpm = kpm[:, None, None, :]                                          # (B, 1, 1, P+S)
            if mask is None:
                mask = kpm
            elif kpm.dtype == np.bool_:
                mask = mask & kpm                                                # (B, 1, S, P+S)
            else:
                mask = np.where(mask, kpm, -np.inf).astype(kpm.dtype)            # (B, 1, S, P+S)
    else:
        if slot not in cache:
            memory = check_float_input(memory, "memory", attn.dtype, ndim=3, last_dim=attn.kdim,
                                       shape_doc="(B, T, kdim)")
            cache.set_static(slot, heads(_project(attn, memory, 1)), heads(_project(attn, memory, 2)))
        k, v = cache.keys[slot], cache.values[slot]                              # (B, H, T, Dh)
        if kpm is not None:                # bool: True = padding (-> takes no part); float: added, as is
            mask = kpm[:, None, None, :]                                         # (B, 1, 1, T)
    ctx, _ = F.scaled_dot_product_attention_forward(q, k, v, attn_mask=mask, dropout_p=attn.dropout,
                                                    training=attn.training, rng=attn.rng)  # (B, H, S, Dh)
    out, _ = F.linear_forward(F.merge_heads(ctx), attn.out_proj.weight.data,
                              None if attn.out_proj.bias is None else attn.out_proj.bias.data)
    return out                                                                   # (B, S, D)
