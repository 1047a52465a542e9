"""Scaled dot-product attention ``softmax(q k^T / sqrt(Dh) + mask) v``, forward and backward, as
``torch.nn.functional.scaled_dot_product_attention`` (its arguments and its mask convention), with
grouped-query attention (``enable_gqa=True``: key and value with fewer heads than the query)."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..kernels.parallel import map_rows
from .dropout import DropoutCache, dropout_forward
from .dtypes import as_scalar
from .masks import additive_mask, causal_mask
from .softmax import softmax_forward

__all__ = ["AttentionCache", "scaled_dot_product_attention_forward", "scaled_dot_product_attention_backward"]


class AttentionCache(NamedTuple):
    q: np.ndarray                 # (..., S, Dh)
    k: np.ndarray                 # (..., T, Dh)
    v: np.ndarray                 # (..., T, Dv)
    probs: np.ndarray             # (..., S, T) softmax output, before dropout
    dropout: DropoutCache         # attention dropout on the probabilities
    scale: float
    out: np.ndarray               # (..., S, Dv) the forward's output (gives the softmax row sums cheaply)
    kv_heads: tuple = (None, None)  # (Hk, Hv) with enable_gqa (key/value heads shared by query heads)
    mask_shape: tuple = None      # a float attn_mask's shape (its gradient, with attn_mask_grad=True)


def check_sdpa_options(attn_mask, is_causal, enable_gqa, dropout_p, training, rng, dropout_mask, name):
    """torch's refusals, with messages naming the argument."""
    if is_causal and attn_mask is not None:
        raise ValueError(f"{name}: attn_mask and is_causal=True were both given; as torch's "
                         "scaled_dot_product_attention, give one: is_causal=True alone for the causal mask, "
                         "or an attn_mask that includes causality (e.g. mask & ~causal_mask(S, T))")
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"{name}: dropout_p must be in [0, 1], got {dropout_p}")
    if training and dropout_p > 0.0 and rng is None and dropout_mask is None:
        raise ValueError(f"{name}: dropout_p={dropout_p} needs rng (a numpy.random.Generator) or dropout_mask "
                         "(a bool keep-mask) to draw the attention dropout from")


def _check_qkv(query, key, value, name):
    """query (..., S, Dh), key (..., T, Dh) and value (..., T, Dv): float arrays of one dtype (torch
    refuses an integer or bool query and mixed dtypes: "Expected query, key, and value to have the same
    dtype"; NumPy would promote float32 to float64 silently), with the query's and key's head sizes
    equal and as many values as keys (NumPy's matmul would fail deep inside, naming no argument)."""
    for arg, a in (("query", query), ("key", key), ("value", value)):
        if not isinstance(a, np.ndarray):
            raise TypeError(f"{name}: {arg} must be a numpy.ndarray, got {type(a).__name__}")
        if a.dtype.kind != "f":
            raise TypeError(f"{name}: {arg} must be a floating-point array, got dtype {a.dtype} (torch refuses "
                            "integer and bool attention inputs too)")
        if a.ndim < 2:
            raise ValueError(f"{name}: {arg} must have at least 2 dimensions (..., length, features), got shape "
                             f"{a.shape}")
    if not query.dtype == key.dtype == value.dtype:
        raise TypeError(f"{name}: query, key and value must have the same dtype, got {query.dtype}, {key.dtype} "
                        f"and {value.dtype} (as torch; convert with .astype)")
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(f"{name}: query {query.shape} and key {key.shape} must have the same head size (last "
                         f"dimension Dh, their dot products are the scores), got {query.shape[-1]} and "
                         f"{key.shape[-1]}")
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(f"{name}: key {key.shape} and value {value.shape} must have the same length T (dimension "
                         f"-2, one value per key), got {key.shape[-2]} and {value.shape[-2]}")


def check_heads(query, key, value, enable_gqa, name):
    """The key and value heads ``(Hk, Hv)`` each query head group shares, or ``(None, None)`` when every
    query head has its own (no grouping: the shapes broadcast as a matmul's, as torch's).

    With ``enable_gqa=True`` (torch 2.13's rule) the heads are dimension -3, and ``Hk`` and ``Hv`` must
    each divide ``Hq``; query head ``h`` then uses key head ``h // (Hq // Hk)`` (``repeat_interleave``).
    Without it, different head counts are refused unless one is 1 (broadcast), as torch refuses them.
    The arrays themselves are checked first (:func:`_check_qkv`)."""
    _check_qkv(query, key, value, name)
    if not enable_gqa:
        try:
            np.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
        except ValueError:
            raise ValueError(f"{name}: query {query.shape}, key {key.shape} and value {value.shape} do not "
                             "broadcast in their leading dimensions (all but the last two); for key and value with "
                             "fewer heads (dimension -3) than query pass enable_gqa=True") from None
        return None, None
    if min(query.ndim, key.ndim, value.ndim) < 3:
        raise ValueError(f"{name}: enable_gqa=True needs a heads dimension (-3) on query, key and value, got "
                         f"shapes {query.shape}, {key.shape} and {value.shape}")
    hq, hk, hv = query.shape[-3], key.shape[-3], value.shape[-3]
    if hk == 0 or hv == 0 or hq % hk or hq % hv:
        raise ValueError(f"{name}: enable_gqa=True needs the key's and value's heads to divide the query's "
                         f"(dimension -3), got query {hq}, key {hk} and value {hv} heads")
    if hk == hq and hv == hq:
        return None, None                        # one key/value head per query head: nothing is shared
    return hk, hv


def _rows_per_kv_head(x, h):
    """``(..., Hq, S, X) -> (..., h, (Hq // h) * S, X)``: the rows of each group of ``Hq // h``
    consecutive query heads stacked under the one key/value head they share (query head i goes to group
    i // (Hq // h), as ``repeat_interleave``). A view of a contiguous array; identity for h = None."""
    if h is None:
        return x
    return x.reshape(x.shape[:-3] + (h, (x.shape[-3] // h) * x.shape[-2], x.shape[-1]))


def _per_query_head(x, hq):
    """The inverse of :func:`_rows_per_kv_head`: ``(..., h, G * S, X) -> (..., Hq, S, X)``."""
    return x.reshape(x.shape[:-3] + (hq, x.shape[-3] * x.shape[-2] // hq, x.shape[-1]))


def sum_to(g, shape):
    """``g`` summed over the leading dimensions an input of ``shape`` was broadcast along."""
    if g.shape == tuple(shape):
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, n in enumerate(shape) if n == 1 and g.shape[i + lead] != 1)
    return g.sum(axis=axes, keepdims=True).reshape(shape)


def into(a, out):
    """``a`` written into ``out`` when one is given (and ``a`` is not already it)."""
    if out is None or a is out:
        return a
    out[...] = a
    return out


def check_sdpa_mask(attn_mask, query, key, name, grouped=False):
    """``attn_mask`` bool, float32 or the query's float dtype, as torch 2.13 ("Expected attn_mask dtype to
    be bool or float or to match query dtype": an integer mask is refused, 0/1 added to the scores is a
    trap; a float64 mask with a float32 query too, while a float32 mask is taken by a float64 query),
    and broadcastable to the scores' shape (..., S, T) without enlarging it (``grouped``: key/value
    heads shared, the scores have the query's heads)."""
    if attn_mask is None:
        return
    mask = np.asarray(attn_mask)
    if mask.dtype != np.bool_ and not np.issubdtype(mask.dtype, np.floating):
        raise TypeError(f"{name}: attn_mask must be bool (True = takes part in attention) or float (added to "
                        f"the scores), got dtype {mask.dtype}; for a 0/1 mask pass mask.astype(bool)")
    if mask.dtype not in (np.bool_, np.float32, query.dtype):
        raise TypeError(f"{name}: a float attn_mask must be float32 or the query's dtype {query.dtype} (as "
                        f"torch), got dtype {mask.dtype}; convert it with attn_mask.astype(np.{query.dtype})")
    lead = (np.broadcast_shapes(query.shape[:-3], key.shape[:-3]) + query.shape[-3:-2] if grouped
            else np.broadcast_shapes(query.shape[:-2], key.shape[:-2]))
    scores = lead + (query.shape[-2], key.shape[-2])
    try:
        fits = np.broadcast_shapes(mask.shape, scores) == scores
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"{name}: attn_mask of shape {mask.shape} does not broadcast to the scores' shape "
                         f"{scores} (..., S, T)")


def scaled_dot_product_attention_forward(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                         scale=None, enable_gqa=False, *, training=True, rng=None,
                                         dropout_mask=None, out=None):
    """``out = dropout(softmax(query @ key^T * scale + mask)) @ value``, as
    ``torch.nn.functional.scaled_dot_product_attention`` (same arguments, order and mask convention).

    Mask convention (torch's function; the modules read a bool mask the other way round, see
    :mod:`.masks`): a **bool** mask is True where a query **takes part** in attention (may attend that
    key), False where it may not; a **float** mask is added to the scores. ``is_causal=True`` masks key
    j > query i (top-left aligned when S != T, as torch); as torch, it may not be combined with
    ``attn_mask``. A query row with every key masked outputs zeros and gets zero gradient: torch's
    function gives the same (zeros, not NaN; checked against torch 2.13's CPU kernels in
    ``tests/functional/test_numerics.py``), while ``torch.nn.MultiheadAttention`` gives NaN there.

    Parameters
    ----------
    query : ndarray, shape (..., S, Dh)
    key : ndarray, shape (..., T, Dh)
    value : ndarray, shape (..., T, Dv)
    attn_mask : ndarray, optional
        Broadcastable to (..., S, T): bool (True = takes part) or float (added). Note that
        :func:`causal_mask` is in the modules' convention (True = masked out): here pass
        ``~causal_mask(S, T)``, or ``is_causal=True``.
    dropout_p : float
        Dropout on the attention probabilities. Torch's is random; ours is drawn from ``rng`` or replays
        ``dropout_mask`` (and ``training=False`` turns it off), so a test can apply the same keep-mask
        on both sides.
    is_causal : bool
        Apply the causal mask. Refused together with ``attn_mask`` (ValueError; torch: RuntimeError).
    scale : float, optional
        Default ``1/sqrt(Dh)``.
    enable_gqa : bool
        Grouped-query attention (torch's argument, torch 2.13's rules): query (..., Hq, S, Dh), key
        (..., Hk, T, Dh) and value (..., Hv, T, Dv) with Hk and Hv dividing Hq; query head ``h`` attends
        with key head ``h // (Hq // Hk)`` and value head ``h // (Hq // Hv)``, exactly as if key and value
        were ``repeat_interleave``-d to Hq heads on dimension -3 (no copy is made: each group's queries
        are stacked as extra rows against its shared head). Hk = 1 is multi-query attention. Without it,
        different head counts broadcast only where one is 1 (ValueError otherwise, naming enable_gqa).
        ``attn_mask`` and ``dropout_mask`` are per query head, (..., Hq, S, T) as the scores.
    training, rng, dropout_mask : keyword-only, the attention dropout (see :func:`dropout_forward`)
    out : ndarray, shape (..., S, Dv), optional, keyword-only
        Where to write the output (e.g. a head-transposed view of the merged-heads buffer, so merging
        heads later costs no copy).

    Returns
    -------
    out : ndarray, shape (..., S, Dv)
    cache : AttentionCache
    """
    name = "scaled_dot_product_attention_forward"
    check_sdpa_options(attn_mask, is_causal, enable_gqa, dropout_p, training, rng, dropout_mask, name)
    hk, hv = check_heads(query, key, value, enable_gqa, name)
    check_sdpa_mask(attn_mask, query, key, name, grouped=hk is not None)
    q, k, v = query, key, value
    s, t = q.shape[-2], k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    # Scaling q (S*Dh numbers) is cheaper than scaling the scores (S*T numbers). With grouped heads the
    # G = Hq/Hk queries of a group are G*S rows against their one key head: (..., Hk, G*S, T).
    q_rows = _rows_per_kv_head(q * as_scalar(scale, q.dtype), hk)                 # (..., Hk, G*S, Dh)
    scores = q_rows @ np.swapaxes(k, -1, -2)                                     # (..., Hk, G*S, T)
    scores = scores if hk is None else _per_query_head(scores, q.shape[-3])      # (..., S, T)
    if attn_mask is not None:
        scores += additive_mask(attn_mask, q.dtype)
    if is_causal:
        # key j > query i gets -inf; copyto's broadcast `where` does it in one pass, 5x faster than
        # boolean indexing `scores[..., mask] = -inf` (which gathers the indices first)
        np.copyto(scores, -np.inf, where=causal_mask(s, t))
    probs, _ = softmax_forward(scores, axis=-1, out=scores)                      # (..., S, T) in place
    dropped, dcache = dropout_forward(probs, dropout_p, training, rng, dropout_mask)
    if hv is None:
        out = np.matmul(dropped, v, out=out)                                     # (..., S, Dv)
    else:                                                                        # (..., Hv, G*S, T) @ v
        out = into(_per_query_head(_rows_per_kv_head(dropped, hv) @ v, q.shape[-3]), out)
    mask_shape = np.shape(attn_mask) if attn_mask is not None and np.asarray(attn_mask).dtype.kind == "f" else None
    return out, AttentionCache(q=q, k=k, v=v, probs=probs, dropout=dcache, scale=scale, out=out,
                               kv_heads=(hk, hv), mask_shape=mask_shape)


def scaled_dot_product_attention_backward(dout, cache, out=None, attn_mask_grad=False, *, record=None):
    """Backward of attention.  Shapes: dout (..., S, Dv) -> dq (..., S, Dh), dk (..., T, Dh), dv (..., T, Dv).

    Forward, step by step: ``A = q k^T * c`` (c the scale), ``P = softmax(A + mask)``,
    ``Pd = dropout(P)``, ``out = Pd v``.

    * ``out = Pd v`` is a matmul: ``dPd = dout v^T`` (..., S, T) and ``dv = Pd^T dout`` (..., T, Dv).
    * dropout: ``dP = dPd * mask / (1-p)``.
    * softmax: ``dA = P * (dP - rowsum(dP * P))``; a masked entry has ``P = 0`` so gets 0 gradient
      (the additive mask is a constant). The row sum equals ``rowsum(dout * out)`` (``dP * P = dPd *
      Pd`` and ``dPd = dout v^T``), an (S, Dv) product that flash attention relies on; here it is taken
      directly on each row block, ``rowsum(dP * P)``, as torch's math kernel does: then every row of dA
      sums to zero up to the rounding of dA itself, which in float32 keeps gradients that are exactly
      zero (a key bias's) near zero instead of ~1e-4 of the others.
    * ``A = c q k^T``: ``dq = c dA k`` and ``dk = c dA^T q``.

    Grouped-query attention (``enable_gqa=True``, G = Hq/Hk query heads per key head): the forward used
    key head ``j`` in the G query heads ``h = jG .. jG+G-1``, i.e. it computed with the repeated key
    ``K_h = k_{h // G}`` (``repeat_interleave``). Each ``K_h`` gets the gradient above, and since ``k_j``
    was copied into G of them, the chain rule sums the copies: ``dk_j = sum_{h // G = j} dK_h`` (a
    broadcast in the forward is a sum in the backward; an average, or one member's, would be wrong).
    The same for ``dv_j`` over the value's groups. Stacking a group's G*S query rows against its head
    makes that sum the matmul's own contraction: ``dk_j = c dA_j^T q_j`` with ``dA_j`` (G*S, T) and
    ``q_j`` (G*S, Dh) the group's rows, so ``dk`` and ``dv`` come out with key's and value's shapes.
    An input broadcast along a leading dimension (size 1) is summed back to its shape the same way.

    A float ``attn_mask`` was added to the scores: ``A + mask``, so its gradient is ``dA`` itself,
    summed over the dimensions the mask was broadcast along (a learned bias, e.g. T5's relative one,
    trains through it; torch gives a float mask the same gradient). ``attn_mask_grad=True`` returns it.

    Parameters
    ----------
    dout : ndarray, shape (..., S, Dv)
    cache : AttentionCache
    out : tuple of three ndarrays, optional
        Where to write ``(dq, dk, dv)`` (views into a fused buffer, so no copy is needed later).
    attn_mask_grad : bool
        Also return the float ``attn_mask``'s gradient, in its shape: ``(dq, dk, dv, dmask)``.
    record : callable, optional, keyword-only
        ``record(name, array)`` is handed this backward's own intermediates as they are computed:
        ``"d probs"`` (dP, the softmax output's gradient, (..., S, T); a copy, since dA overwrites it
        in place), ``"d scores"`` (dA, the softmax input's gradient), ``"dq"``, ``"dk"``, ``"dv"``
        (per head, in q's, k's and v's shapes). :func:`numpy_transformer.trace` passes one; None (the
        default) costs nothing.
    """
    q, k, v, probs, scale = cache.q, cache.k, cache.v, cache.probs, cache.scale
    dcache, (hk, hv), mask_shape = cache.dropout, cache.kv_heads, cache.mask_shape
    if attn_mask_grad and mask_shape is None:
        raise ValueError("attn_mask_grad=True needs a float attn_mask in the forward (a bool mask or none has "
                         "no gradient)")
    dq_out, dk_out, dv_out = (None, None, None) if out is None else out
    keep = None if dcache.mask is None else dcache.mask * as_scalar(dcache.scale, probs.dtype)
    dropped = probs if keep is None else probs * keep                            # (..., S, T)
    if hv is None:
        dv = np.matmul(np.swapaxes(dropped, -1, -2), dout, out=dv_out)          # (..., T, Dv)
        dscores = dout @ np.swapaxes(v, -1, -2)                                  # (..., S, T) = dPd
    else:                                            # summed over each value head's G*S query rows
        dout_rows = _rows_per_kv_head(dout, hv)                                  # (..., Hv, G*S, Dv)
        dv = np.swapaxes(_rows_per_kv_head(dropped, hv), -1, -2) @ dout_rows     # (..., Hv, T, Dv)
        dscores = _per_query_head(dout_rows @ np.swapaxes(v, -1, -2), q.shape[-3])  # (..., Hq, S, T)
    del dropped
    if keep is not None:
        dscores *= keep                                                          # dP
    if record is not None:
        record("d probs", dscores.copy())                                        # dA overwrites dP below
    map_rows(_softmax_grad_rows, dscores, probs)                                 # dA = P (dP - rowsum(dP P))
    # dq = c dA k and dk = c dA^T q: the scale goes on the small (.., T, Dh) operands, not on dA.
    if hk is None:
        dq = np.matmul(dscores, k * as_scalar(scale, k.dtype), out=dq_out)         # (..., S, Dh)
        dk = np.matmul(np.swapaxes(dscores, -1, -2), q * as_scalar(scale, q.dtype), out=dk_out)  # (..., T, Dh)
    else:                                            # summed over each key head's G*S query rows
        da_rows = _rows_per_kv_head(dscores, hk)                                 # (..., Hk, G*S, T)
        dq = _per_query_head(da_rows @ (k * as_scalar(scale, k.dtype)), q.shape[-3])  # (..., Hq, S, Dh)
        dk = np.swapaxes(da_rows, -1, -2) @ _rows_per_kv_head(q * as_scalar(scale, q.dtype), hk)  # (..., Hk, T, Dh)
    dq, dk, dv = sum_to(dq, q.shape), sum_to(dk, k.shape), sum_to(dv, v.shape)
    if record is not None:
        for name, g in (("d scores", dscores), ("dq", dq), ("dk", dk), ("dv", dv)):
            record(name, g)
    if attn_mask_grad:                                   # d(A + mask)/d mask = 1: the mask's gradient is dA
        return into(dq, dq_out), into(dk, dk_out), into(dv, dv_out), sum_to(dscores, mask_shape)
    return into(dq, dq_out), into(dk, dk_out), into(dv, dv_out)


def _softmax_grad_rows(dp, probs):
    """In place on row blocks: ``dp <- probs * (dp - rowsum(dp * probs))``, the softmax backward.
    float16 (mixed precision only) is computed in float32 and rounded back, as the forward's softmax."""
    if dp.dtype == np.float16:
        d32 = dp.astype(np.float32)
        _softmax_grad_rows(d32, probs.astype(np.float32))
        dp[...] = d32
        return
    delta = np.einsum("...t,...t->...", dp, probs)[..., None]                   # (rows, 1) rowsum(dP * P)
    dp -= delta
    dp *= probs
