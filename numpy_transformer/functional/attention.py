"""Scaled dot-product attention ``softmax(q k^T / sqrt(Dh) + mask) v``, forward and backward."""

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


def scaled_dot_product_attention_forward(q, k, v, attn_mask=None, is_causal=False, scale=None,
                                         dropout_p=0.0, training=True, rng=None, dropout_mask=None,
                                         out=None):
    """``out = dropout(softmax(q @ k^T * scale + mask)) @ v`` with ``scale = 1/sqrt(Dh)``.

    Mask convention (as ``torch.nn.MultiheadAttention``, the opposite of
    ``torch.nn.functional.scaled_dot_product_attention``'s bool masks): a **bool** mask is True where a
    query **may not** attend; a **float** mask is added to the scores. Rows with every key masked output
    zeros.

    Parameters
    ----------
    q : ndarray, shape (..., S, Dh)
    k : ndarray, shape (..., T, Dh)
    v : ndarray, shape (..., T, Dv)
    attn_mask : ndarray, optional
        Broadcastable to (..., S, T).
    is_causal : bool
        Apply a causal mask (combined with ``attn_mask`` if both are given).
    dropout_p, training, rng, dropout_mask : attention dropout (see :func:`dropout_forward`)
    out : ndarray, shape (..., S, Dv), optional
        Where to write the output (e.g. a head-transposed view of the merged-heads buffer, so merging
        heads later costs no copy).

    Returns
    -------
    out : ndarray, shape (..., S, Dv)
    cache : AttentionCache
    """
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
