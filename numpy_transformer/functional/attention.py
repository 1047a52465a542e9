"""Scaled dot-product attention ``softmax(q k^T / sqrt(Dh) + mask) v``, forward and backward, as
``torch.nn.functional.scaled_dot_product_attention`` (its arguments and its mask convention)."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..kernels.parallel import map_rows
from ._dtypes import _scalar
from .dropout import DropoutCache, dropout_forward
from .masks import _additive, causal_mask
from .softmax import softmax_forward


class AttentionCache(NamedTuple):
    q: np.ndarray                 # (..., S, Dh)
    k: np.ndarray                 # (..., T, Dh)
    v: np.ndarray                 # (..., T, Dv)
    probs: np.ndarray             # (..., S, T) softmax output, before dropout
    dropout: DropoutCache         # attention dropout on the probabilities
    scale: float
    out: np.ndarray               # (..., S, Dv) the forward's output (gives the softmax row sums cheaply)


def _check_sdpa_options(attn_mask, is_causal, enable_gqa, dropout_p, training, rng, dropout_mask, name):
    """torch's refusals, with messages naming the argument."""
    if enable_gqa:
        raise NotImplementedError(f"{name}: enable_gqa=True (grouped-query attention, key/value with fewer "
                                  "heads than query) is not implemented yet; pass enable_gqa=False with "
                                  "key and value repeated to the query's heads")
    if is_causal and attn_mask is not None:
        raise ValueError(f"{name}: attn_mask and is_causal=True were both given; as torch's "
                         "scaled_dot_product_attention, give one: is_causal=True alone for the causal mask, "
                         "or an attn_mask that includes causality (e.g. mask & ~causal_mask(S, T))")
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"{name}: dropout_p must be in [0, 1], got {dropout_p}")
    if training and dropout_p > 0.0 and rng is None and dropout_mask is None:
        raise ValueError(f"{name}: dropout_p={dropout_p} needs rng (a numpy.random.Generator) or dropout_mask "
                         "(a bool keep-mask) to draw the attention dropout from")


def _check_sdpa_mask(attn_mask, query, key, name):
    """``attn_mask`` bool or float (torch refuses an integer mask: 0/1 added to the scores is a trap) and
    broadcastable to the scores' shape (..., S, T) without enlarging it."""
    if attn_mask is None:
        return
    mask = np.asarray(attn_mask)
    if mask.dtype != np.bool_ and not np.issubdtype(mask.dtype, np.floating):
        raise TypeError(f"{name}: attn_mask must be bool (True = takes part in attention) or float (added to "
                        f"the scores), got dtype {mask.dtype}; for a 0/1 mask pass mask.astype(bool)")
    scores = np.broadcast_shapes(query.shape[:-2], key.shape[:-2]) + (query.shape[-2], key.shape[-2])
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
    ``tests/test_numerics.py``), while ``torch.nn.MultiheadAttention`` gives NaN there.

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
        Must be False: grouped-query attention is not implemented yet (True raises NotImplementedError).
    training, rng, dropout_mask : keyword-only, the attention dropout (see :func:`dropout_forward`)
    out : ndarray, shape (..., S, Dv), optional, keyword-only
        Where to write the output (e.g. a head-transposed view of the merged-heads buffer, so merging
        heads later costs no copy).

    Returns
    -------
    out : ndarray, shape (..., S, Dv)
    cache : AttentionCache
    """
    _check_sdpa_options(attn_mask, is_causal, enable_gqa, dropout_p, training, rng, dropout_mask,
                        "scaled_dot_product_attention_forward")
    _check_sdpa_mask(attn_mask, query, key, "scaled_dot_product_attention_forward")
    q, k, v = query, key, value
    s, t = q.shape[-2], k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    # Scaling q (S*Dh numbers) is cheaper than scaling the scores (S*T numbers).
    scores = (q * _scalar(scale, q.dtype)) @ np.swapaxes(k, -1, -2)             # (..., S, T)
    if attn_mask is not None:
        scores += _additive(attn_mask, q.dtype)
    if is_causal:
        scores[..., causal_mask(s, t)] = -np.inf
    probs, _ = softmax_forward(scores, axis=-1, out=scores)                      # (..., S, T) in place
    dropped, dcache = dropout_forward(probs, dropout_p, training, rng, dropout_mask)
    out = np.matmul(dropped, v, out=out)                                         # (..., S, Dv)
    return out, AttentionCache(q, k, v, probs, dcache, scale, out)


def scaled_dot_product_attention_backward(dout, cache, out=None):
    """Backward of attention.  Shapes: dout (..., S, Dv) -> dq (..., S, Dh), dk (..., T, Dh), dv (..., T, Dv).

    Forward, step by step: ``A = q k^T * c`` (c the scale), ``P = softmax(A + mask)``,
    ``Pd = dropout(P)``, ``out = Pd v``.

    * ``out = Pd v`` is a matmul: ``dPd = dout v^T`` (..., S, T) and ``dv = Pd^T dout`` (..., T, Dv).
    * dropout: ``dP = dPd * mask / (1-p)``.
    * softmax: ``dA = P * (dP - rowsum(dP * P))``; a masked entry has ``P = 0`` so gets 0 gradient
      (the additive mask is a constant). The row sum is computed without forming ``dP * P``:
      ``rowsum(dP * P) = rowsum(dPd * Pd) = rowsum(dout v^T * Pd) = rowsum(dout * (Pd v)) = rowsum(dout * out)``,
      an (S, Dv) product instead of an (S, T) one (the identity flash attention relies on).
    * ``A = c q k^T``: ``dq = c dA k`` and ``dk = c dA^T q``.

    Parameters
    ----------
    dout : ndarray, shape (..., S, Dv)
    cache : AttentionCache
    out : tuple of three ndarrays, optional
        Where to write ``(dq, dk, dv)`` (views into a fused buffer, so no copy is needed later).
    """
    q, k, v, probs, dcache, scale, o = cache
    dq_out, dk_out, dv_out = (None, None, None) if out is None else out
    keep = None if dcache.mask is None else dcache.mask * _scalar(dcache.scale, probs.dtype)
    dropped = probs if keep is None else probs * keep                            # (..., S, T)
    dv = np.matmul(np.swapaxes(dropped, -1, -2), dout, out=dv_out)               # (..., T, Dv)
    del dropped
    dscores = dout @ np.swapaxes(v, -1, -2)                                      # (..., S, T) = dPd
    if keep is not None:
        dscores *= keep                                                          # dP
    delta = np.sum(dout * o, axis=-1, keepdims=True)                             # rowsum(dP * P)
    map_rows(_softmax_grad_rows, dscores, delta, probs)                          # dA = P (dP - delta)
    # dq = c dA k and dk = c dA^T q: the scale goes on the small (.., T, Dh) operands, not on dA.
    dq = np.matmul(dscores, k * _scalar(scale, k.dtype), out=dq_out)             # (..., S, Dh)
    dk = np.matmul(np.swapaxes(dscores, -1, -2), q * _scalar(scale, q.dtype), out=dk_out)  # (..., T, Dh)
    return dq, dk, dv


def _softmax_grad_rows(dp, delta, probs):
    """In place on row blocks: ``dp <- probs * (dp - delta)``, the softmax backward with its row sum."""
    dp -= delta
    dp *= probs
