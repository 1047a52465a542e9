"""Tiled ("flash") attention: the same maths as :mod:`.attention` in memory linear in S, never
holding the (S, T) matrix; forward and backward."""

from __future__ import annotations

import math
from typing import NamedTuple, Optional

import numpy as np

from .attention import check_heads, check_sdpa_mask, check_sdpa_options, into, sum_to
from .dtypes import as_scalar
from .masks import additive_mask

__all__ = ["FlashAttentionCache", "flash_attention_forward", "flash_attention_backward"]


class FlashAttentionCache(NamedTuple):
    q: np.ndarray                 # (..., S, Dh)
    k: np.ndarray                 # (..., T, Dh)
    v: np.ndarray                 # (..., T, Dv)
    out: np.ndarray               # (..., S, Dv)
    lse: np.ndarray               # (..., S) log-sum-exp of each score row (-inf for a fully masked row)
    mask: Optional[np.ndarray]    # additive mask broadcastable to (..., S, T), or None
    is_causal: bool
    scale: float
    block_q: int
    block_k: int
    dropout: Optional[tuple]      # (p, seed or None, full keep-mask or None) when attention dropout is on
    kv_shapes: Optional[tuple] = None  # with enable_gqa: key's and value's own shapes (q, k, v grouped)


def _mask_block(mask, r0, r1, c0, c1):
    """The (rows r0:r1, cols c0:c1) tile of a mask that may be broadcast (size 1) along either axis."""
    rows = slice(r0, r1) if mask.shape[-2] != 1 else slice(None)
    cols = slice(c0, c1) if mask.shape[-1] != 1 else slice(None)
    return mask[..., rows, cols]


def _score_block(q_scaled, k_blk, mask, is_causal, r0, r1, c0, c1):
    """Scores of one tile: ``(q * scale) k_blk^T + mask``, causal entries set to -inf.  (..., bq, bk)"""
    s = q_scaled @ np.swapaxes(k_blk, -1, -2)                                          # (..., bq, bk)
    if mask is not None:
        s += _mask_block(mask, r0, r1, c0, c1)
    if is_causal and c1 - 1 > r0:                     # some column of the tile lies above the diagonal
        np.copyto(s, -np.inf, where=np.arange(r0, r1)[:, None] < np.arange(c0, c1)[None, :])
    return s


def _grouped(x, h, heads_axis_of_kv=False):
    """Grouped-query attention as broadcasting: a query-side array (..., Hq, S, X) as (..., h, G, S, X),
    key or value (..., h, T, X) as (..., h, 1, T, X), so that query head i meets head i // G. A mask of
    fewer than 3 dimensions broadcasts as it is; one with heads of size 1 keeps broadcasting."""
    if x is None or np.ndim(x) < 3:
        return x
    x = np.asarray(x)
    if heads_axis_of_kv:
        return x[..., None, :, :]
    n = x.shape[-3]
    return x.reshape(x.shape[:-3] + ((h, n // h) if n != 1 else (1, 1)) + x.shape[-2:])


def _tile_dropout(dropout, gen, r0, r1, c0, c1, shape):
    """Keep-mask of one tile: sliced from a given full mask, or drawn from the replayable generator."""
    p, _, full = dropout
    if full is not None:
        return full[..., r0:r1, c0:c1]
    return gen.random(shape, dtype=np.float32) >= p


def flash_attention_forward(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                            enable_gqa=False, *, block_q=128, block_k=128, training=True, rng=None,
                            dropout_mask=None, out=None):
    """Attention by tiles with an online softmax: memory O(S) instead of O(S*T).

    Same result as :func:`scaled_dot_product_attention_forward` (without dropout). For each block of
    ``block_q`` queries it walks the keys ``block_k`` at a time, keeping for every query row the running
    maximum ``m``, the running normaliser ``l = sum exp(s - m)`` and the running un-normalised output
    ``acc = sum exp(s - m) v``. When a new tile raises the maximum to ``m'``, the old sums are rescaled
    by ``exp(m - m')``, so at the end ``out = acc / l`` is exactly ``softmax(s) v``. Only the output and
    the per-row log-sum-exp ``lse = m + log l`` are kept for the backward.

    The arguments, their order and the mask convention are those of
    :func:`scaled_dot_product_attention_forward` (torch's function), with one extension: ``attn_mask``
    and ``is_causal=True`` may be given together (both apply; the tiles above the diagonal are skipped),
    which is how multi-head attention's tiled path combines causality with a key-padding mask.

    Parameters
    ----------
    query : ndarray, shape (..., S, Dh)
    key : ndarray, shape (..., T, Dh)
    value : ndarray, shape (..., T, Dv)
    attn_mask : ndarray, optional
        bool (True = takes part in attention, as torch's function) or additive float, broadcastable
        to (..., S, T).
    dropout_p : float
    is_causal : bool
        Mask key j > query i (top-left aligned); may be combined with ``attn_mask``.
    scale : float, optional
        Default 1/sqrt(Dh).
    enable_gqa : bool
        Grouped-query attention as :func:`scaled_dot_product_attention_forward`, with one restriction:
        key and value must have the same number of heads (torch also takes different ones; refused here
        with a ValueError). Query head ``h`` uses key/value head ``h // (Hq // Hkv)``: the heads are
        viewed as (Hkv, G) and the tiles broadcast against the shared head (no copy of key and value).
    block_q, block_k : int, keyword-only
        Tile sizes (any positive value; they need not divide S or T).
    training, rng : keyword-only, the attention dropout
        Each tile's keep-mask is drawn from a generator seeded from ``rng`` and *replayed* by the
        backward (same tiles, same order), so no (S, T) mask is ever stored.
    dropout_mask : ndarray of bool, optional
        A full (..., S, T) keep-mask to slice tiles from instead (for tests against the standard path).
    out : ndarray, shape (..., S, Dv), optional
        Where to write the output (e.g. a head-transposed view of the merged-heads buffer).

    Returns
    -------
    out : ndarray, shape (..., S, Dv)
    cache : FlashAttentionCache
    """
    if block_q <= 0 or block_k <= 0:
        raise ValueError(f"block_q and block_k must be positive, got {block_q} and {block_k}")
    check_sdpa_options(None, is_causal, enable_gqa, dropout_p, training, rng, dropout_mask,
                        "flash_attention_forward")
    hk, hv = check_heads(query, key, value, enable_gqa, "flash_attention_forward")
    check_sdpa_mask(attn_mask, query, key, "flash_attention_forward", grouped=hk is not None)
    q, k, v = query, key, value
    kv_shapes = None
    if hk is not None:                               # (..., Hkv, G, S, Dh) against (..., Hkv, 1, T, Dh)
        if hk != hv:
            raise ValueError(f"flash_attention_forward: enable_gqa=True needs key and value with the same "
                             f"number of heads here, got {hk} and {hv}; use scaled_dot_product_attention_forward")
        kv_shapes, hq = (k.shape, v.shape), q.shape[-3]
        q, k, v = _grouped(q, hk), _grouped(k, hk, True), _grouped(v, hk, True)
        attn_mask, dropout_mask = _grouped(attn_mask, hk), _grouped(dropout_mask, hk)
        result, out = out, None                      # the caller's buffer has the (..., Hq, S, Dv) layout
    s_len, t_len = q.shape[-2], k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    mask = None if attn_mask is None else additive_mask(attn_mask, q.dtype)
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    if out is None:
        out = np.empty(lead + (s_len, v.shape[-1]), dtype=q.dtype)                      # (..., S, Dv)
    lse = np.empty(lead + (s_len,), dtype=q.dtype)                                      # (..., S)
    dropout, gen = None, None
    if training and dropout_p > 0.0:
        seed = None if dropout_mask is not None else int(rng.integers(2**63))
        dropout = (float(dropout_p), seed, dropout_mask)
        gen = None if seed is None else np.random.default_rng(seed)
        keep_scale = as_scalar(1.0 / (1.0 - dropout_p) if dropout_p < 1 else 0.0, q.dtype)
    for r0 in range(0, s_len, block_q):
        r1 = min(r0 + block_q, s_len)
        q_scaled = q[..., r0:r1, :] * as_scalar(scale, q.dtype)                            # (..., bq, Dh)
        m = np.full(lead + (r1 - r0, 1), -np.inf, dtype=q.dtype)                         # running max
        l = np.zeros(lead + (r1 - r0, 1), dtype=q.dtype)                                 # running sum
        acc = np.zeros(lead + (r1 - r0, v.shape[-1]), dtype=q.dtype)                     # running output
        for c0 in range(0, t_len if not is_causal else min(t_len, r1), block_k):
            c1 = min(c0 + block_k, t_len)
            p = _score_block(q_scaled, k[..., c0:c1, :], mask, is_causal, r0, r1, c0, c1)  # (..., bq, bk)
            m_new = np.maximum(m, p.max(axis=-1, keepdims=True))                         # (..., bq, 1)
            m_safe = np.where(np.isneginf(m_new), as_scalar(0, q.dtype), m_new)            # all -inf so far
            p -= m_safe
            np.exp(p, out=p)                                                             # exp(s - m')
            correction = np.exp(m - m_safe)                                              # (..., bq, 1)
            l *= correction
            l += p.sum(axis=-1, keepdims=True)                                           # undropped sum
            if dropout is not None:
                p *= _tile_dropout(dropout, gen, r0, r1, c0, c1, p.shape) * keep_scale
            acc *= correction
            acc += p @ v[..., c0:c1, :]                                                  # (..., bq, Dv)
            m = m_new
        empty = l == 0                                                                   # every key masked
        out[..., r0:r1, :] = np.where(empty, as_scalar(0, q.dtype), acc / np.where(empty, 1, l))
        lse[..., r0:r1] = np.where(empty, -np.inf, m + np.log(np.where(empty, 1, l)))[..., 0]
    cache = FlashAttentionCache(q, k, v, out, lse, mask, is_causal, scale, block_q, block_k, dropout, kv_shapes)
    if kv_shapes is not None:
        out = into(out.reshape(out.shape[:-4] + (hq,) + out.shape[-2:]), result)       # (..., Hq, S, Dv)
    return out, cache


def flash_attention_backward(dout, cache, out=None):
    """Backward of tiled attention, recomputing each probability tile from the saved log-sum-exp.

    With ``P = exp(s - lse)`` (exact softmax probabilities, recomputed tile by tile) the standard
    gradients are ``dv = P^T dout``, ``dP = dout v^T``, ``ds = P * (dP - rowsum(dP * P))`` and
    ``dq = c ds k``, ``dk = c ds^T q``. The row sum needs the whole row, but
    ``rowsum(dP * P) = rowsum(dout v^T * P) = rowsum(dout * (P v)) = rowsum(dout * out)``: it is computed
    once from the saved output, so every tile's contribution can be accumulated independently.
    With attention dropout (``Pd = P * keep / (1-p)``, ``out = Pd v``) the same identity holds with
    ``dv = Pd^T dout`` and ``dP = (dout v^T) * keep / (1-p)``; the tiles' keep-masks are replayed from
    the forward's seed in the forward's order.
    Shapes: dout (..., S, Dv) -> dq (..., S, Dh), dk (..., T, Dh), dv (..., T, Dv).
    ``out``, optional, gives three arrays to accumulate ``(dq, dk, dv)`` into (they are zeroed first).

    Grouped-query attention: the forward broadcast each key/value head (..., Hkv, 1, T, Dh) over its G
    query heads (..., Hkv, G, S, Dh); the backward of a broadcast is a sum, so ``dk`` and ``dv`` are
    accumulated per query head and summed over G (see :func:`scaled_dot_product_attention_backward`).
    """
    q, k, v = cache.q, cache.k, cache.v                     # the other fields are read by name below
    if cache.kv_shapes is not None:
        q_shape = q.shape[:-4] + (q.shape[-4] * q.shape[-3],) + q.shape[-2:]            # (..., Hq, S, Dh)
        dq, dk, dv = flash_attention_backward(_grouped(dout, q.shape[-4]), cache._replace(kv_shapes=None))
        dq = dq.reshape(dq.shape[:-4] + q_shape[-3:])                                    # (..., Hq, S, Dh)
        dk, dv = dk.sum(axis=-3), dv.sum(axis=-3)                  # (..., Hkv, T, D): summed over G
        grads = sum_to(dq, q_shape), sum_to(dk, cache.kv_shapes[0]), sum_to(dv, cache.kv_shapes[1])
        return grads if out is None else tuple(into(g, o) for g, o in zip(grads, out))
    dropout, is_causal = cache.dropout, cache.is_causal
    gen = None
    if dropout is not None:
        gen = None if dropout[1] is None else np.random.default_rng(dropout[1])
        keep_scale = as_scalar(1.0 / (1.0 - dropout[0]) if dropout[0] < 1 else 0.0, q.dtype)
    s_len, t_len = q.shape[-2], k.shape[-2]
    c = as_scalar(cache.scale, q.dtype)
    o, lse = cache.out, cache.lse                                                        # (..., S, Dv), (..., S)
    delta = np.sum(dout * o, axis=-1, keepdims=True)                                     # (..., S, 1)
    lse_safe = np.where(np.isneginf(lse), as_scalar(np.inf, q.dtype), lse)[..., None]      # masked row: P = 0
    if out is None:
        dq = np.zeros(np.broadcast_shapes(q.shape, dout.shape[:-1] + (q.shape[-1],)), dtype=q.dtype)
        dk = np.zeros(dq.shape[:-2] + k.shape[-2:], dtype=q.dtype)
        dv = np.zeros(dq.shape[:-2] + v.shape[-2:], dtype=q.dtype)
    else:
        dq, dk, dv = out
        for g in out:
            g[...] = 0
    for r0 in range(0, s_len, cache.block_q):
        r1 = min(r0 + cache.block_q, s_len)
        q_blk, do_blk = q[..., r0:r1, :], dout[..., r0:r1, :]
        q_scaled = q_blk * c                                                             # (..., bq, Dh)
        for c0 in range(0, t_len if not is_causal else min(t_len, r1), cache.block_k):
            c1 = min(c0 + cache.block_k, t_len)
            k_blk, v_blk = k[..., c0:c1, :], v[..., c0:c1, :]
            p = _score_block(q_scaled, k_blk, cache.mask, is_causal, r0, r1, c0, c1)     # (..., bq, bk)
            p -= lse_safe[..., r0:r1, :]
            np.exp(p, out=p)                                                             # exact probabilities
            ds = do_blk @ np.swapaxes(v_blk, -1, -2)                                     # (..., bq, bk) = dPd
            if dropout is None:
                dv[..., c0:c1, :] += np.swapaxes(p, -1, -2) @ do_blk                     # (..., bk, Dv)
            else:
                keep = _tile_dropout(dropout, gen, r0, r1, c0, c1, p.shape) * keep_scale
                dv[..., c0:c1, :] += np.swapaxes(p * keep, -1, -2) @ do_blk
                ds *= keep
            ds -= delta[..., r0:r1, :]
            ds *= p
            ds *= c                                                                      # c dA
            dq[..., r0:r1, :] += ds @ k_blk                                              # (..., bq, Dh)
            dk[..., c0:c1, :] += np.swapaxes(ds, -1, -2) @ q_blk                         # (..., bk, Dh)
    if out is None:                                  # an input broadcast on a leading dimension: summed back
        return sum_to(dq, q.shape), sum_to(dk, k.shape), sum_to(dv, v.shape)
    return dq, dk, dv
