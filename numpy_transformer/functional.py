"""The functional core: every Transformer-encoder op as a forward/backward pair.

Contract (cs231n's): ``OP_forward(...) -> (out, cache)`` and ``OP_backward(dout, cache) -> grads``.
The cache is a small ``NamedTuple`` holding exactly what the backward needs. Every backward sits right
after its forward and says, in its docstring, what the forward computed and why each gradient follows.

Shape letters: B batch, S query length, T key length, D model width, H heads, Dh head width,
F feed-forward width, V vocabulary, N any leading dimensions flattened.

Everything is vectorised NumPy (no Python loop over batch, heads or positions) and keeps the dtype of
its inputs: float32 stays float32, float64 stays float64.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Optional

import numpy as np

from ._erf import _pdf_chunk, _phi_chunk, erf, erfc
from ._parallel import map_chunks, map_rows

__all__ = [
    "linear_forward", "linear_backward",
    "embedding_forward", "embedding_backward",
    "layer_norm_forward", "layer_norm_backward",
    "softmax_forward", "softmax_backward",
    "relu_forward", "relu_backward",
    "gelu_forward", "gelu_backward",
    "dropout_forward", "dropout_backward",
    "scaled_dot_product_attention_forward", "scaled_dot_product_attention_backward",
    "multi_head_attention_forward", "multi_head_attention_backward",
    "flash_attention_forward", "flash_attention_backward",
    "merge_masks", "causal_mask", "erf", "erfc",
]


def _scalar(x, dtype):
    """A Python number as a NumPy scalar of ``dtype`` (a float64 scalar would promote float32)."""
    return np.dtype(dtype).type(x)


# --------------------------------------------------------------------------------------------------
# linear: y = x W^T + b
# --------------------------------------------------------------------------------------------------

class LinearCache(NamedTuple):
    x: np.ndarray                 # (N..., Din) the input
    weight: np.ndarray            # (Dout, Din)
    has_bias: bool


def linear_forward(x, weight, bias=None):
    """Affine map ``y = x @ weight.T + bias``, as ``torch.nn.functional.linear``.

    Parameters
    ----------
    x : ndarray, shape (..., Din)
    weight : ndarray, shape (Dout, Din)
    bias : ndarray, shape (Dout,), optional

    Returns
    -------
    out : ndarray, shape (..., Dout)
    cache : LinearCache
    """
    # One 2-D GEMM over all rows: a (B, S, Din) @ (Din, Dout) matmul would loop over B small GEMMs.
    out = x.reshape(-1, x.shape[-1]) @ weight.T                  # (N, Dout)
    if bias is not None:
        out += bias                                              # in place: no second (N, Dout) array
    return out.reshape(x.shape[:-1] + (weight.shape[0],)), LinearCache(x, weight, bias is not None)


def linear_backward(dout, cache):
    """Backward of ``y = x W^T + b``.  Shapes: dout (..., Dout) -> dx (..., Din), dW (Dout, Din), db (Dout,).

    Each output ``y[n, o] = sum_i x[n, i] W[o, i] + b[o]``, so
    ``dL/dx[n, i] = sum_o dout[n, o] W[o, i]``      i.e. ``dx = dout @ W``;
    ``dL/dW[o, i] = sum_n dout[n, o] x[n, i]``      i.e. ``dW = dout^T @ x`` over all leading dims;
    ``dL/db[o]   = sum_n dout[n, o]``              (b is broadcast over every row, so its grads add).

    Returns
    -------
    dx, dweight, dbias : ndarray (dbias is None when the forward had no bias)
    """
    x, weight, has_bias = cache
    d_in = weight.shape[1]
    dout2 = dout.reshape(-1, dout.shape[-1])                     # (N, Dout)
    dx = (dout2 @ weight).reshape(x.shape)                       # (..., Din)
    dweight = dout2.T @ x.reshape(-1, d_in)                      # (Dout, Din); BLAS reads dout2.T in place
    dbias = dout2.sum(axis=0) if has_bias else None              # (Dout,)
    return dx, dweight, dbias


# --------------------------------------------------------------------------------------------------
# embedding: y = W[ids]
# --------------------------------------------------------------------------------------------------

class EmbeddingCache(NamedTuple):
    ids: np.ndarray               # (N...) integer ids
    num_embeddings: int           # V
    padding_idx: Optional[int]


def embedding_forward(ids, weight, padding_idx=None):
    """Table lookup ``out[..., :] = weight[ids[...], :]``.

    Parameters
    ----------
    ids : ndarray of int, shape (...)
        Values in ``[0, V)`` (the caller validates; NumPy would silently wrap negatives).
    weight : ndarray, shape (V, D)
    padding_idx : int, optional
        Rows with this id get no gradient (as ``torch.nn.Embedding``).

    Returns
    -------
    out : ndarray, shape (..., D)
    cache : EmbeddingCache
    """
    out = weight[ids]                                            # (..., D)
    return out, EmbeddingCache(ids, weight.shape[0], padding_idx)


def embedding_backward(dout, cache):
    """Backward of ``out = W[ids]``.  Shapes: dout (..., D) -> dW (V, D).

    Row ``v`` of ``W`` was copied to every position where ``ids == v``, so its gradient is the *sum*
    of ``dout`` over those positions: a scatter-add. ``np.add.at`` accumulates repeated ids; a plain
    ``dW[ids] += dout`` would keep only the last write for a repeated id (a classic bug). The ids are
    not differentiable, so only ``dW`` is returned.
    """
    ids, num_embeddings, padding_idx = cache
    dweight = np.zeros((num_embeddings, dout.shape[-1]), dtype=dout.dtype)  # (V, D)
    np.add.at(dweight, ids.reshape(-1), dout.reshape(-1, dout.shape[-1]))
    if padding_idx is not None:
        dweight[padding_idx] = 0
    return dweight


# --------------------------------------------------------------------------------------------------
# layer_norm: y = (x - mean) / sqrt(var + eps) * w + b over the last dimension
# --------------------------------------------------------------------------------------------------

class LayerNormCache(NamedTuple):
    xhat: np.ndarray              # (N..., D) normalised input
    rstd: np.ndarray              # (N..., 1) 1 / sqrt(var + eps)
    weight: Optional[np.ndarray]  # (D,)
    has_bias: bool


def layer_norm_forward(x, weight=None, bias=None, eps=1e-5):
    """Layer normalisation over the last axis, as ``torch.nn.LayerNorm(D)``.

    Biased variance (divide by D) and ``eps`` inside the square root.

    Parameters
    ----------
    x : ndarray, shape (..., D)
    weight, bias : ndarray, shape (D,), optional
    eps : float

    Returns
    -------
    out : ndarray, shape (..., D)
    cache : LayerNormCache
    """
    mean = x.mean(axis=-1, keepdims=True)                        # (..., 1)
    xc = x - mean                                                # (..., D)
    # Centre twice: the float mean of D equal values can miss them by an ulp, and on a constant row
    # that residue, divided by sqrt(eps), would become noise instead of the exact 0 torch gives.
    xc -= xc.mean(axis=-1, keepdims=True)
    var = np.mean(xc * xc, axis=-1, keepdims=True)               # (..., 1) biased
    rstd = 1 / np.sqrt(var + _scalar(eps, x.dtype))              # (..., 1)
    xhat = xc * rstd                                             # (..., D)
    out = xhat * weight if weight is not None else xhat.copy()   # (..., D)
    if bias is not None:
        out += bias
    return out, LayerNormCache(xhat, rstd, weight, bias is not None)


def layer_norm_backward(dout, cache):
    """Backward of LayerNorm.  Shapes: dout (..., D) -> dx (..., D), dw (D,), db (D,).

    Forward: ``xhat = (x - mu) * rstd``, ``y = xhat * w + b`` with ``mu = mean(x)``,
    ``rstd = (mean((x - mu)**2) + eps)**-1/2``.

    * ``db = sum(dout)`` and ``dw = sum(dout * xhat)`` over every leading position.
    * ``dxhat = dout * w``. Each ``x_j`` reaches the loss through ``xhat_j`` directly, through ``mu``
      and through ``rstd``. With ``d mu / d x_j = 1/D`` and ``d rstd / d x_j = -rstd**3 (x_j - mu) / D``,
      collecting the three paths gives the well-known compact form::

          dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))

      (the mean term removes the component along the all-ones direction, the last one removes the
      component along ``xhat``: exactly the two directions the normalisation projects out).
    """
    xhat, rstd, weight, has_bias = cache
    d = xhat.shape[-1]
    lead = tuple(range(dout.ndim - 1))
    dweight = (dout * xhat).sum(axis=lead) if weight is not None else None   # (D,)
    dbias = dout.sum(axis=lead) if has_bias else None                         # (D,)
    dxhat = dout * weight if weight is not None else dout                     # (..., D)
    mean_dxhat = dxhat.mean(axis=-1, keepdims=True)                           # (..., 1)
    mean_dxhat_xhat = np.sum(dxhat * xhat, axis=-1, keepdims=True) / _scalar(d, xhat.dtype)  # (..., 1)
    dx = (dxhat - mean_dxhat - xhat * mean_dxhat_xhat) * rstd                  # (..., D)
    return dx, dweight, dbias


# --------------------------------------------------------------------------------------------------
# softmax over one axis
# --------------------------------------------------------------------------------------------------

class SoftmaxCache(NamedTuple):
    y: np.ndarray                 # the probabilities, same shape as x
    axis: int


def softmax_forward(x, axis=-1, out=None):
    """Numerically stable softmax ``y = exp(x - max) / sum(exp(x - max))`` along ``axis``.

    A slice that is entirely ``-inf`` (every key masked) yields zeros, not NaN: one defined behaviour,
    the one ``torch.nn.functional.scaled_dot_product_attention`` uses.

    Parameters
    ----------
    x : ndarray
    axis : int
    out : ndarray, optional
        Where to write the result; may be ``x`` itself (in place, no new array of ``x``'s size).

    Returns
    -------
    out : ndarray, same shape as ``x``
    cache : SoftmaxCache
    """
    if out is None:
        out = np.empty_like(x)
    if out is not x:
        out[...] = x
    if axis in (-1, x.ndim - 1) and out.flags.c_contiguous:
        map_rows(_softmax_last_axis_inplace, out)               # row blocks in parallel, in cache
    else:
        _softmax_inplace(out, axis)
    return out, SoftmaxCache(out, axis)


def _softmax_inplace(y, axis=-1):
    m = np.max(y, axis=axis, keepdims=True)
    m[np.isneginf(m)] = 0                                        # all -inf row: exp(-inf) = 0 below
    with np.errstate(over="ignore"):                             # -max - max = -inf: exp gives the right 0
        y -= m
    np.exp(y, out=y)
    s = y.sum(axis=axis, keepdims=True)
    s[s == 0] = 1                                                # all-masked row stays all zero
    y /= s


def _softmax_last_axis_inplace(y):
    _softmax_inplace(y, -1)


def softmax_backward(dout, cache):
    """Backward of softmax.  Shapes: dout like y -> dx like y.

    ``y_i = exp(x_i) / sum_j exp(x_j)`` has Jacobian ``dy_i/dx_k = y_i (delta_ik - y_k)``, so
    ``dx_k = sum_i dout_i y_i (delta_ik - y_k) = y_k (dout_k - sum_i dout_i y_i)``.
    The row-sum term ``sum_i dout_i y_i`` is what a naive "``y * dout``" forgets.
    """
    y, axis = cache
    return y * (dout - np.sum(dout * y, axis=axis, keepdims=True))


# --------------------------------------------------------------------------------------------------
# relu and gelu
# --------------------------------------------------------------------------------------------------

class ReluCache(NamedTuple):
    out: np.ndarray               # the output max(x, 0): positive exactly where x > 0


def relu_forward(x):
    """``y = max(x, 0)``. Returns ``(out, ReluCache)``; the cache is the output itself (the next layer
    keeps it anyway), not a separate mask."""
    out = np.maximum(x, _scalar(0, x.dtype))
    return out, ReluCache(out)


def relu_backward(dout, cache):
    """Backward of ReLU: the slope is 1 where ``x > 0`` and 0 elsewhere (0 at ``x == 0``, as torch);
    ``x > 0`` exactly where the output is ``> 0``."""
    return dout * (cache.out > 0)


class GeluCache(NamedTuple):
    x: np.ndarray
    approximate: str


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _gelu_exact_chunk(out, x):
    with np.errstate(over="ignore"):                             # x*x of huge x: inf, correctly handled
        _phi_chunk(out, x)                                       # Phi(x)
    out *= x                                                     # x Phi(x)


def _gelu_exact_grad_chunk(out, x, dout):
    with np.errstate(over="ignore"):
        _phi_chunk(out, x)                                       # Phi(x)
        pdf = np.empty_like(x)
        _pdf_chunk(pdf, x)                                       # phi(x) = exp(-x**2/2) / sqrt(2 pi)
    pdf *= x
    out += pdf                                                   # Phi(x) + x phi(x)
    out *= dout


_TANH_SATURATED = 1e4          # |x| beyond this: tanh(u) is exactly +-1 in float32 and float64


def _gelu_tanh_chunk(out, x):
    dt = x.dtype.type
    xs = np.clip(x, dt(-_TANH_SATURATED), dt(_TANH_SATURATED))   # x**3 must not overflow; tanh is flat there
    np.multiply(xs, xs, out=out)
    out *= dt(0.044715)
    out += dt(1.0)
    out *= xs
    out *= dt(_SQRT_2_OVER_PI)                                   # u = sqrt(2/pi)(x + 0.044715 x**3)
    np.tanh(out, out=out)
    out += dt(1.0)
    out *= dt(0.5)                                               # (1 + tanh u)/2, halved before the x
    out *= x                                                     # x/2 (1 + tanh u); finite up to max


def _gelu_tanh_grad_chunk(out, x, dout):
    dt = x.dtype.type
    c, k = dt(_SQRT_2_OVER_PI), dt(0.044715)
    # Beyond the clip tanh is exactly +-1, so (1 - t**2) = 0 and the clipped x changes nothing, while
    # x**2 itself could overflow and meet that 0 as inf * 0 = NaN.
    x = np.clip(x, dt(-_TANH_SATURATED), dt(_TANH_SATURATED))
    x2 = np.multiply(x, x)
    t = x2 * k
    t += dt(1.0)
    t *= x
    t *= c
    np.tanh(t, out=t)                                            # t = tanh(u)
    np.multiply(x2, dt(3.0) * k, out=x2)
    x2 += dt(1.0)
    x2 *= c                                                      # du/dx = sqrt(2/pi)(1 + 3*0.044715 x**2)
    np.multiply(t, t, out=out)
    np.subtract(dt(1.0), out, out=out)                           # 1 - t**2
    out *= x2
    out *= x
    out += t
    out += dt(1.0)
    out *= dt(0.5)                                               # (1 + t)/2 + x/2 (1 - t**2) du/dx
    out *= dout


def gelu_forward(x, approximate="none"):
    """Gaussian Error Linear Unit, as ``torch.nn.functional.gelu``.

    ``approximate="none"``: ``y = x * Phi(x)`` with ``Phi(x) = erfc(-x / sqrt(2)) / 2`` the standard
    normal CDF (``erfc`` keeps full relative accuracy for very negative x, where ``1 + erf`` cancels).
    ``approximate="tanh"``: ``y = x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x**3)))``.

    The work is done in cache-sized chunks on a small thread pool (:mod:`numpy_transformer._parallel`):
    the erf evaluation takes many elementwise passes, and NumPy runs each on one core.

    Returns
    -------
    out : ndarray, same shape and dtype as ``x``
    cache : GeluCache
    """
    if approximate not in ("none", "tanh"):
        raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    x = np.ascontiguousarray(x)
    out = np.empty_like(x)
    map_chunks(_gelu_exact_chunk if approximate == "none" else _gelu_tanh_chunk, out, x)
    return out, GeluCache(x, approximate)


def gelu_backward(dout, cache):
    """Backward of GELU: ``dx = dout * y'(x)``.

    Exact: ``y = x Phi(x)`` so ``y' = Phi(x) + x phi(x)`` with ``phi(x) = exp(-x**2/2) / sqrt(2 pi)``.
    Tanh: with ``u = sqrt(2/pi)(x + 0.044715 x**3)`` and ``t = tanh(u)``,
    ``y' = (1 + t)/2 + x/2 * (1 - t**2) * sqrt(2/pi) * (1 + 3 * 0.044715 x**2)``.
    (``Phi`` is recomputed rather than cached: one (N, F) array less to hold between the passes.)
    """
    x, approximate = cache
    dx = np.empty_like(x)
    map_chunks(_gelu_exact_grad_chunk if approximate == "none" else _gelu_tanh_grad_chunk,
               dx, x, np.ascontiguousarray(dout))
    return dx


# --------------------------------------------------------------------------------------------------
# dropout (inverted): y = x * mask / (1 - p)
# --------------------------------------------------------------------------------------------------

class DropoutCache(NamedTuple):
    mask: Optional[np.ndarray]    # bool keep-mask, None when dropout was the identity
    scale: float                  # 1 / (1 - p)


def dropout_forward(x, p, training=True, rng=None, mask=None):
    """Inverted dropout: keep each element with probability ``1-p`` and scale it by ``1/(1-p)``.

    Parameters
    ----------
    x : ndarray
    p : float in [0, 1]
    training : bool
        When False (or ``p == 0``) this is the identity.
    rng : numpy.random.Generator, optional
        Draws the keep-mask (required when a mask must be drawn).
    mask : ndarray of bool, optional
        A keep-mask to reuse instead of drawing one (broadcastable to ``x``).

    Returns
    -------
    out : ndarray
    cache : DropoutCache
        ``cache.mask`` is the keep-mask used (so a reference implementation can replay it).
    """
    if not training or p == 0.0:
        return x, DropoutCache(None, 1.0)
    if mask is None:
        if p == 1.0:
            mask = np.zeros(x.shape, dtype=bool)
        else:
            mask = rng.random(x.shape, dtype=np.float32 if x.dtype == np.float32 else np.float64) >= p
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    out = np.multiply(x, mask)
    out *= _scalar(scale, x.dtype)
    return out, DropoutCache(mask, scale)


def dropout_backward(dout, cache):
    """Backward of inverted dropout: the same mask and scale, ``dx = dout * mask / (1 - p)``."""
    mask, scale = cache
    if mask is None:
        return dout
    dx = np.multiply(dout, mask)
    dx *= _scalar(scale, dout.dtype)
    return dx


# --------------------------------------------------------------------------------------------------
# masks
# --------------------------------------------------------------------------------------------------

def causal_mask(s, t=None):
    """Boolean (S, T) mask, True above the diagonal: position i may not attend to j > i."""
    t = s if t is None else t
    return np.triu(np.ones((s, t), dtype=bool), k=1)


def _additive(mask, dtype):
    """A bool mask (True = may not attend) as 0/-inf, or a float mask as is, in ``dtype``."""
    if mask.dtype == np.bool_:
        out = np.zeros(mask.shape, dtype=dtype)
        out[mask] = -np.inf
        return out
    return mask.astype(dtype, copy=False)


def merge_masks(attn_mask, key_padding_mask, is_causal, batch, heads, s, t, dtype):
    """Combine the attention mask, the key-padding mask and causality into one additive mask.

    Parameters
    ----------
    attn_mask : ndarray or None
        (S, T) or (B*H, S, T), bool (True = may not attend) or float (added to the scores).
    key_padding_mask : ndarray or None
        (B, T), bool (True = ignore that key) or float (added).
    is_causal : bool
        When True and ``attn_mask`` is None, a causal mask is used (with a mask given, ``is_causal``
        is only a hint, as in torch, and the mask given is used).

    Returns
    -------
    ndarray or None
        Additive float mask broadcastable to (B, H, S, T), or None when nothing is masked.
    """
    out = None
    if attn_mask is None and is_causal:
        attn_mask = causal_mask(s, t)
    if attn_mask is not None:
        am = _additive(attn_mask, dtype)
        out = am if am.ndim == 2 else am.reshape(batch, heads, s, t)        # (S, T) or (B, H, S, T)
    if key_padding_mask is not None:
        kp = _additive(key_padding_mask, dtype).reshape(batch, 1, 1, t)     # (B, 1, 1, T)
        out = kp if out is None else out + kp
    return out


# --------------------------------------------------------------------------------------------------
# scaled dot-product attention: softmax(q k^T / sqrt(Dh) + mask) v
# --------------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------------
# multi-head attention: project, split heads, attend, merge heads, project
# --------------------------------------------------------------------------------------------------

class MultiHeadAttentionCache(NamedTuple):
    in_lin: tuple                 # LinearCache of the fused (B, S, 3D) projection, or (q, k, v) LinearCaches
    attn: tuple                   # AttentionCache or FlashAttentionCache, per head on (B, H, S, Dh)
    out_lin: LinearCache          # output projection
    packed: bool                  # q, k, v weights are row-blocks of one in_proj_weight
    fused: bool                   # self-attention: one GEMM made q, k and v


def _split_heads(x, heads):
    """(B, S, D) -> (B, H, S, Dh): a strided view, no data is moved (BLAS reads it with a leading dim)."""
    b, s, d = x.shape
    return x.reshape(b, s, heads, d // heads).transpose(0, 2, 1, 3)             # (B, H, S, Dh)


def _merge_heads(x):
    """(B, H, S, Dh) -> (B, S, D): the transpose *before* the reshape keeps each position's heads together."""
    b, h, s, dh = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, s, h * dh)                        # (B, S, D)


def multi_head_attention_forward(query, key, value, num_heads, in_proj_weight=None, in_proj_bias=None,
                                 out_proj_weight=None, out_proj_bias=None, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, attn_mask=None,
                                 key_padding_mask=None, is_causal=False, dropout_p=0.0,
                                 training=True, rng=None, dropout_mask=None, attention="standard",
                                 block_size=128):
    """Multi-head attention on batch-first inputs, as ``torch.nn.MultiheadAttention``.

    ``Q = query Wq^T + bq``, ``K = key Wk^T + bk``, ``V = value Wv^T + bv`` (Wq, Wk, Wv the three
    row-blocks of ``in_proj_weight``, or the separate ``*_proj_weight`` when kdim/vdim differ), split into
    H heads of width Dh = D/H, attention per head, heads merged back, then ``out = ctx Wo^T + bo``.

    For self-attention (``query is key is value``) the three projections are one GEMM with the whole
    (3D, D) ``in_proj_weight``; the heads are strided views into its (B, S, 3, H, Dh) result, and each
    head's output is written straight into the (B, S, H, Dh) buffer the output projection reads: no
    split or merge ever copies data.

    Parameters
    ----------
    query : ndarray, shape (B, S, D)
    key : ndarray, shape (B, T, Dk)
    value : ndarray, shape (B, T, Dv)
    num_heads : int
    in_proj_weight : ndarray, shape (3D, D), optional (packed); else ``q/k/v_proj_weight``
    in_proj_bias : ndarray, shape (3D,), optional
    out_proj_weight : ndarray, shape (D, D)
    out_proj_bias : ndarray, shape (D,), optional
    attn_mask, key_padding_mask, is_causal : see :func:`merge_masks`
    dropout_p, training, rng, dropout_mask : attention dropout on the probabilities
    attention : {"standard", "tiled"}
        "tiled" uses :func:`flash_attention_forward` (memory linear in S; no weights returned).
    block_size : int
        Tile size of the tiled path.

    Returns
    -------
    out : ndarray, shape (B, S, D)
    probs : ndarray, shape (B, H, S, T), or None on the tiled path
        The attention weights after dropout (what torch returns as ``attn_output_weights``).
    cache : MultiHeadAttentionCache
    """
    b, s, d = query.shape
    t = key.shape[1]
    dh = d // num_heads
    packed = in_proj_weight is not None
    fused = packed and query is key and key is value
    if fused:
        qkv, in_lin = linear_forward(query, in_proj_weight, in_proj_bias)       # (B, S, 3D)
        qkv = qkv.reshape(b, s, 3, num_heads, dh)                               # (B, S, 3, H, Dh)
        heads = tuple(qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))     # 3 x (B, H, S, Dh) views
    else:
        if packed:
            wq, wk, wv = in_proj_weight[:d], in_proj_weight[d:2 * d], in_proj_weight[2 * d:]
        else:
            wq, wk, wv = q_proj_weight, k_proj_weight, v_proj_weight
        bq, bk, bv = (None, None, None) if in_proj_bias is None else (
            in_proj_bias[:d], in_proj_bias[d:2 * d], in_proj_bias[2 * d:])
        q, q_lin = linear_forward(query, wq, bq)                                # (B, S, D)
        k, k_lin = linear_forward(key, wk, bk)                                  # (B, T, D)
        v, v_lin = linear_forward(value, wv, bv)                                # (B, T, D)
        in_lin = (q_lin, k_lin, v_lin)
        heads = (_split_heads(q, num_heads), _split_heads(k, num_heads), _split_heads(v, num_heads))
    ctx = np.empty((b, s, num_heads, dh), dtype=query.dtype)                     # (B, S, H, Dh)
    ctx_heads = ctx.transpose(0, 2, 1, 3)                                        # (B, H, S, Dh) view
    if attention == "tiled":
        causal_only = is_causal and attn_mask is None       # let the tiles skip the upper triangle
        mask = merge_masks(None if causal_only else attn_mask, key_padding_mask, False if causal_only else is_causal,
                           b, num_heads, s, t, query.dtype)
        _, attn = flash_attention_forward(*heads, attn_mask=mask, is_causal=causal_only, block_q=block_size,
                                          block_k=block_size, dropout_p=dropout_p, training=training, rng=rng,
                                          dropout_mask=dropout_mask, out=ctx_heads)
        probs = None
    elif attention == "standard":
        mask = merge_masks(attn_mask, key_padding_mask, is_causal, b, num_heads, s, t, query.dtype)
        _, attn = scaled_dot_product_attention_forward(*heads, attn_mask=mask, dropout_p=dropout_p,
                                                       training=training, rng=rng, dropout_mask=dropout_mask,
                                                       out=ctx_heads)
        probs = attn.probs if attn.dropout.mask is None else (
            attn.probs * (attn.dropout.mask * _scalar(attn.dropout.scale, query.dtype)))  # (B, H, S, T)
    else:
        raise ValueError(f"attention must be 'standard' or 'tiled', got {attention!r}")
    out, out_lin = linear_forward(ctx.reshape(b, s, d), out_proj_weight, out_proj_bias)  # (B, S, D)
    return out, probs, MultiHeadAttentionCache(in_lin, attn, out_lin, packed, fused)


def multi_head_attention_backward(dout, cache, sum_inputs=False):
    """Backward of multi-head attention.  Shapes: dout (B, S, D) -> dquery, dkey, dvalue and weight grads.

    Walk the forward in reverse: the output projection is a linear layer; merging heads is a
    transpose + reshape, so its backward is :func:`_split_heads` (the inverse permutation); attention
    per head; splitting heads is undone by :func:`_merge_heads`; then the input projections. In the
    fused self-attention case the head gradients are written into one (B, S, 3, H, Dh) buffer, which is
    exactly the gradient of the fused (B, S, 3D) projection output, so ``d in_proj_weight`` is one GEMM.
    When query, key and value are the same array the caller adds the three input gradients: the input
    was used three times. With ``sum_inputs=True`` (self-attention only) that sum is computed directly,
    ``dx = dQKV @ W_in`` in one (N, 3D) x (3D, D) product, and returned as ``dquery`` (``dkey`` and
    ``dvalue`` are None).

    Returns
    -------
    dquery, dkey, dvalue : ndarray
    grads : dict
        ``in_proj_weight``/``in_proj_bias`` (packed) or ``q_proj_weight``... , ``out_proj.weight``,
        ``out_proj.bias`` (keys as torch's parameter names; bias entries absent without bias).
    """
    in_lin, attn, out_lin, packed, fused = cache
    b, heads, s, dh = attn.q.shape
    d = heads * dh
    dctx, dwo, dbo = linear_backward(dout, out_lin)                              # (B, S, D)
    dctx_heads = dctx.reshape(b, s, heads, dh).transpose(0, 2, 1, 3)             # (B, H, S, Dh) view
    attention_backward = (flash_attention_backward if isinstance(attn, FlashAttentionCache)
                          else scaled_dot_product_attention_backward)
    grads = {}
    if fused:
        dqkv = np.empty((b, s, 3, heads, dh), dtype=dout.dtype)                 # (B, S, 3, H, Dh)
        views = tuple(dqkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))    # 3 x (B, H, S, Dh)
        attention_backward(dctx_heads, attn, out=views)
        dqkv = dqkv.reshape(b * s, 3 * d)                                        # (N, 3D)
        x, w, has_bias = in_lin
        x2 = x.reshape(-1, x.shape[-1])                                          # (N, D)
        if sum_inputs:                                   # d(x Wq^T + x Wk^T + x Wv^T) / dx in one product
            dquery, dkey, dvalue = (dqkv @ w).reshape(x.shape), None, None                # (B, S, D)
        else:                                            # one gradient per use, through each row-block
            dquery, dkey, dvalue = ((dqkv[:, i * d:(i + 1) * d] @ w[i * d:(i + 1) * d]).reshape(x.shape)
                                    for i in range(3))
        grads["in_proj_weight"] = dqkv.T @ x2                                    # (3D, D) one GEMM
        if has_bias:
            grads["in_proj_bias"] = dqkv.sum(axis=0)                             # (3D,)
    else:
        dq, dk, dv = attention_backward(dctx_heads, attn)                       # (B, H, S, Dh)
        q_lin, k_lin, v_lin = in_lin
        dquery, dwq, dbq = linear_backward(_merge_heads(dq), q_lin)              # (B, S, D)
        dkey, dwk, dbk = linear_backward(_merge_heads(dk), k_lin)                # (B, T, Dk)
        dvalue, dwv, dbv = linear_backward(_merge_heads(dv), v_lin)              # (B, T, Dv)
        if packed:
            grads["in_proj_weight"] = np.concatenate([dwq, dwk, dwv], axis=0)    # (3D, D)
        else:
            grads.update(q_proj_weight=dwq, k_proj_weight=dwk, v_proj_weight=dwv)
        if dbq is not None:
            grads["in_proj_bias"] = np.concatenate([dbq, dbk, dbv])              # (3D,)
    grads["out_proj.weight"] = dwo
    if dbo is not None:
        grads["out_proj.bias"] = dbo
    return dquery, dkey, dvalue, grads


# --------------------------------------------------------------------------------------------------
# tiled ("flash") attention: the same maths in memory linear in S, never holding the (S, T) matrix
# --------------------------------------------------------------------------------------------------

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
        s[..., np.arange(r0, r1)[:, None] < np.arange(c0, c1)[None, :]] = -np.inf
    return s


def _tile_dropout(dropout, gen, r0, r1, c0, c1, shape):
    """Keep-mask of one tile: sliced from a given full mask, or drawn from the replayable generator."""
    p, _, full = dropout
    if full is not None:
        return full[..., r0:r1, c0:c1]
    return gen.random(shape, dtype=np.float32) >= p


def flash_attention_forward(q, k, v, attn_mask=None, is_causal=False, scale=None, block_q=128, block_k=128,
                            dropout_p=0.0, training=True, rng=None, dropout_mask=None, out=None):
    """Attention by tiles with an online softmax: memory O(S) instead of O(S*T).

    Same result as :func:`scaled_dot_product_attention_forward` (without dropout). For each block of
    ``block_q`` queries it walks the keys ``block_k`` at a time, keeping for every query row the running
    maximum ``m``, the running normaliser ``l = sum exp(s - m)`` and the running un-normalised output
    ``acc = sum exp(s - m) v``. When a new tile raises the maximum to ``m'``, the old sums are rescaled
    by ``exp(m - m')``, so at the end ``out = acc / l`` is exactly ``softmax(s) v``. Only the output and
    the per-row log-sum-exp ``lse = m + log l`` are kept for the backward.

    Parameters
    ----------
    q : ndarray, shape (..., S, Dh)
    k : ndarray, shape (..., T, Dh)
    v : ndarray, shape (..., T, Dv)
    attn_mask : ndarray, optional
        bool (True = may not attend) or additive float, broadcastable to (..., S, T).
    is_causal : bool
    scale : float, optional
        Default 1/sqrt(Dh).
    block_q, block_k : int
        Tile sizes (any positive value; they need not divide S or T).
    dropout_p, training, rng : attention dropout
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
    s_len, t_len = q.shape[-2], k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    mask = None if attn_mask is None else _additive(attn_mask, q.dtype)
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    if out is None:
        out = np.empty(lead + (s_len, v.shape[-1]), dtype=q.dtype)                      # (..., S, Dv)
    lse = np.empty(lead + (s_len,), dtype=q.dtype)                                      # (..., S)
    dropout, gen = None, None
    if training and dropout_p > 0.0:
        seed = None if dropout_mask is not None else int(rng.integers(2**63))
        dropout = (float(dropout_p), seed, dropout_mask)
        gen = None if seed is None else np.random.default_rng(seed)
        keep_scale = _scalar(1.0 / (1.0 - dropout_p) if dropout_p < 1 else 0.0, q.dtype)
    for r0 in range(0, s_len, block_q):
        r1 = min(r0 + block_q, s_len)
        q_scaled = q[..., r0:r1, :] * _scalar(scale, q.dtype)                            # (..., bq, Dh)
        m = np.full(lead + (r1 - r0, 1), -np.inf, dtype=q.dtype)                         # running max
        l = np.zeros(lead + (r1 - r0, 1), dtype=q.dtype)                                 # running sum
        acc = np.zeros(lead + (r1 - r0, v.shape[-1]), dtype=q.dtype)                     # running output
        for c0 in range(0, t_len if not is_causal else min(t_len, r1), block_k):
            c1 = min(c0 + block_k, t_len)
            p = _score_block(q_scaled, k[..., c0:c1, :], mask, is_causal, r0, r1, c0, c1)  # (..., bq, bk)
            m_new = np.maximum(m, p.max(axis=-1, keepdims=True))                         # (..., bq, 1)
            m_safe = np.where(np.isneginf(m_new), _scalar(0, q.dtype), m_new)            # all -inf so far
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
        out[..., r0:r1, :] = np.where(empty, _scalar(0, q.dtype), acc / np.where(empty, 1, l))
        lse[..., r0:r1] = np.where(empty, -np.inf, m + np.log(np.where(empty, 1, l)))[..., 0]
    return out, FlashAttentionCache(q, k, v, out, lse, mask, is_causal, scale, block_q, block_k, dropout)


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
    """
    q, k, v, o, lse, mask, is_causal, scale, block_q, block_k, dropout = cache
    gen = None
    if dropout is not None:
        gen = None if dropout[1] is None else np.random.default_rng(dropout[1])
        keep_scale = _scalar(1.0 / (1.0 - dropout[0]) if dropout[0] < 1 else 0.0, q.dtype)
    s_len, t_len = q.shape[-2], k.shape[-2]
    c = _scalar(scale, q.dtype)
    delta = np.sum(dout * o, axis=-1, keepdims=True)                                     # (..., S, 1)
    lse_safe = np.where(np.isneginf(lse), _scalar(np.inf, q.dtype), lse)[..., None]      # masked row: P = 0
    if out is None:
        dq = np.zeros(np.broadcast_shapes(q.shape, dout.shape[:-1] + (q.shape[-1],)), dtype=q.dtype)
        dk = np.zeros(dq.shape[:-2] + k.shape[-2:], dtype=q.dtype)
        dv = np.zeros(dq.shape[:-2] + v.shape[-2:], dtype=q.dtype)
    else:
        dq, dk, dv = out
        for g in out:
            g[...] = 0
    for r0 in range(0, s_len, block_q):
        r1 = min(r0 + block_q, s_len)
        q_blk, do_blk = q[..., r0:r1, :], dout[..., r0:r1, :]
        q_scaled = q_blk * c                                                             # (..., bq, Dh)
        for c0 in range(0, t_len if not is_causal else min(t_len, r1), block_k):
            c1 = min(c0 + block_k, t_len)
            k_blk, v_blk = k[..., c0:c1, :], v[..., c0:c1, :]
            p = _score_block(q_scaled, k_blk, mask, is_causal, r0, r1, c0, c1)           # (..., bq, bk)
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
    return dq, dk, dv
