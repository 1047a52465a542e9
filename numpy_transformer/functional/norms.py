"""Normalisation layers, forward and backward: LayerNorm ``y = (x - mean) / sqrt(var + eps) * w + b`` and
RMSNorm ``y = x / sqrt(mean(x**2) + eps) * w``, both over the trailing ``normalized_shape`` dimensions
(the last one by default), as torch."""

from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

from .dtypes import as_scalar

__all__ = ["LayerNormCache", "layer_norm_forward", "layer_norm_backward", "RMSNormCache", "rms_norm_forward",
           "rms_norm_backward"]


def _trailing_shape(normalized_shape, x, *params):
    """``normalized_shape`` as a tuple; default: the shape of the first parameter given, else ``(D,)``."""
    if normalized_shape is None:
        given = [p for p in params if p is not None]
        normalized_shape = given[0].shape if given else x.shape[-1:]
    elif isinstance(normalized_shape, (int, np.integer)):
        normalized_shape = (int(normalized_shape),)
    return tuple(int(n) for n in normalized_shape)       # the raw maths: shapes are not checked


def _rescaled(x, axes, eps, xhat, rstd, var, centre):
    """``(xhat, rstd)`` with the blocks whose variance (or mean of squares) overflowed recomputed exactly.

    The squares of float32 numbers above ~1.8e19 (float64: ~1.3e154) overflow, so ``var`` becomes inf
    and ``rstd = 0``: a block around 1e30 would normalise to 0 instead of to ~±1. Normalisation does not
    change when x is scaled: with ``y = x / s``, ``xhat(x) = (y - mean(y)) / sqrt(var(y) + eps / s**2)``
    and ``rstd(x) = rstd(y) / s``. Taking ``s`` a power of two near each block's largest ``|x|``
    keeps the division exact and ``y`` in [-2, 2], whose squares cannot overflow. Only the overflowed
    blocks are recomputed (the plain path pays one ``isfinite`` over the (..., 1) variances); a
    block holding an inf or NaN keeps its NaN (as torch).

    float16 (only inside :mod:`numpy_transformer.amp`, whose study runs norms in float16 on purpose) is
    left as float16 arithmetic gives it: squares above 65504 overflow there, the cliff that
    docs/mixed-precision.md measures and the reason mixed precision keeps the norms in float32.
    """
    if x.dtype == np.float16:
        return xhat, rstd
    finite_x = np.isfinite(x).all(axis=axes, keepdims=True)                  # (..., 1, ..., 1)
    bad = ~np.isfinite(var) & finite_x                                        # the overflowed blocks
    if not bad.any():
        return xhat, rstd
    big = np.where(bad, np.abs(x).max(axis=axes, keepdims=True), 1)          # (..., 1, ..., 1)
    inv_s = np.ldexp(np.ones((), x.dtype), 1 - np.frexp(big)[1]).astype(x.dtype)   # 1 / s, a power of 2
    y = x * inv_s                                                             # (..., *ns) in [-2, 2]
    if centre:
        y = y - y.mean(axis=axes, keepdims=True)
        y -= y.mean(axis=axes, keepdims=True)
    var_y = np.mean(y * y, axis=axes, keepdims=True)                          # (..., 1, ..., 1)
    rstd_y = 1 / np.sqrt(var_y + as_scalar(eps, x.dtype) * inv_s * inv_s)       # (..., 1, ..., 1)
    return np.where(bad, y * rstd_y, xhat), np.where(bad, rstd_y * inv_s, rstd)


class LayerNormCache(NamedTuple):
    xhat: np.ndarray              # (..., *normalized_shape) normalised input
    rstd: np.ndarray              # (..., 1, ..., 1) 1 / sqrt(var + eps), one per normalised block
    weight: Optional[np.ndarray]  # normalized_shape
    has_bias: bool
    ndim: int                     # how many trailing axes were normalised


def layer_norm_forward(x, weight=None, bias=None, eps=1e-5, normalized_shape=None):
    """Layer normalisation over the trailing axes, as ``torch.nn.functional.layer_norm``.

    Biased variance (divide by the n = prod(normalized_shape) elements of each block) and ``eps``
    inside the square root. ``LayerNorm(D)`` normalises each position's D features; ``LayerNorm((S, D))``
    each sequence's S * D numbers together. A block whose squares overflow (float32 values beyond
    ~1e19, e.g. a row around ±1e30) is recomputed scaled by a power of two, so it still normalises to
    ~±1 with the exact gradient (:func:`_rescaled`).

    Parameters
    ----------
    x : ndarray, shape (..., *normalized_shape)
    weight, bias : ndarray, shape normalized_shape, optional
    eps : float
    normalized_shape : int or tuple of int, optional
        The trailing shape to normalise over. Default: the shape of ``weight`` (or of ``bias``), or
        ``(x.shape[-1],)`` when there is neither (so several axes can be normalised without them).

    Returns
    -------
    out : ndarray, shape of x
    cache : LayerNormCache
    """
    k = len(_trailing_shape(normalized_shape, x, weight, bias))
    axes = tuple(range(x.ndim - k, x.ndim))
    with np.errstate(over="ignore", invalid="ignore"):           # |x| above ~1e19 (float32): _rescaled
        mean = x.mean(axis=axes, keepdims=True)                  # (..., 1, ..., 1)
        xc = x - mean                                            # (..., *ns)
        # Centre twice: the float mean of n equal values can miss them by an ulp, and on a constant
        # block that residue, divided by sqrt(eps), would become noise instead of the exact 0 torch gives.
        xc -= xc.mean(axis=axes, keepdims=True)
        var = np.mean(xc * xc, axis=axes, keepdims=True)         # (..., 1, ..., 1) biased
    rstd = 1 / np.sqrt(var + as_scalar(eps, x.dtype))              # (..., 1, ..., 1)
    xhat = xc * rstd                                             # (..., *ns)
    if not np.isfinite(var).all():           # a block whose squares overflowed (or an inf/NaN input)
        xhat, rstd = _rescaled(x, axes, eps, xhat, rstd, var, centre=True)
    out = xhat * weight if weight is not None else xhat.copy()   # (..., *ns)
    if bias is not None:
        out += bias
    return out, LayerNormCache(xhat, rstd, weight, bias is not None, k)


def layer_norm_backward(dout, cache):
    """Backward of LayerNorm.  Shapes: dout (..., *ns) -> dx (..., *ns), dw ns, db ns (None when absent).

    Forward: ``xhat = (x - mu) * rstd``, ``y = xhat * w + b`` with ``mu = mean(x)``,
    ``rstd = (mean((x - mu)**2) + eps)**-1/2``, the means over the D = prod(ns) elements of each
    normalised block (D features for ``LayerNorm(D)``).

    * ``db = sum(dout)`` and ``dw = sum(dout * xhat)`` over every leading position.
    * ``dxhat = dout * w``. Each ``x_j`` reaches the loss through ``xhat_j`` directly, through ``mu``
      and through ``rstd``. With ``d mu / d x_j = 1/D`` and ``d rstd / d x_j = -rstd**3 (x_j - mu) / D``,
      collecting the three paths gives the well-known compact form::

          dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))

      (the mean term removes the component along the all-ones direction, the last one removes the
      component along ``xhat``: exactly the two directions the normalisation projects out).
    """
    xhat, rstd, weight, has_bias, k = cache
    axes = tuple(range(xhat.ndim - k, xhat.ndim))                             # the normalised block
    lead = tuple(range(xhat.ndim - k))                                        # every leading position
    d = int(np.prod(xhat.shape[xhat.ndim - k:]))
    dweight = (dout * xhat).sum(axis=lead) if weight is not None else None   # ns
    dbias = dout.sum(axis=lead) if has_bias else None                         # ns
    dxhat = dout * weight if weight is not None else dout                     # (..., *ns)
    mean_dxhat = dxhat.mean(axis=axes, keepdims=True)                         # (..., 1, ..., 1)
    mean_dxhat_xhat = np.sum(dxhat * xhat, axis=axes, keepdims=True) / as_scalar(d, xhat.dtype)  # (..., 1, ..., 1)
    dx = (dxhat - mean_dxhat - xhat * mean_dxhat_xhat) * rstd                  # (..., *ns)
    return dx, dweight, dbias


class RMSNormCache(NamedTuple):
    xhat: np.ndarray              # (..., *normalized_shape) normalised input x * rstd
    rstd: np.ndarray              # (..., 1, ..., 1) 1 / sqrt(mean(x**2) + eps), one per normalised block
    weight: Optional[np.ndarray]  # normalized_shape
    ndim: int                     # how many trailing axes were normalised


def rms_norm_forward(x, weight=None, eps=None, normalized_shape=None):
    """Root-mean-square normalisation over the trailing axes, as ``torch.nn.functional.rms_norm``.

    ``y = x / sqrt(mean(x**2) + eps) * weight``: no mean is subtracted and there is no bias; the mean of
    squares is taken over the last ``len(normalized_shape)`` axes, and ``eps`` sits inside the root.
    A block whose squares overflow is recomputed scaled by a power of two (:func:`_rescaled`).

    Parameters
    ----------
    x : ndarray, shape (..., *normalized_shape)
    weight : ndarray, shape normalized_shape, optional
        Elementwise scale (torch's ``weight``).
    eps : float, optional
        Added to the mean of squares; ``None`` (torch's default) means ``np.finfo(x.dtype).eps``.
    normalized_shape : int or tuple of int, optional
        The trailing shape to normalise over. Default: ``weight.shape``, or ``(x.shape[-1],)`` when there
        is no weight (so several axes can be normalised without a weight).

    Returns
    -------
    out : ndarray, shape of x
    cache : RMSNormCache
    """
    k = len(_trailing_shape(normalized_shape, x, weight))
    if eps is None:
        eps = np.finfo(x.dtype).eps
    axes = tuple(range(x.ndim - k, x.ndim))
    with np.errstate(over="ignore"):                              # |x| above ~1e19 (float32): _rescaled
        ms = np.mean(x * x, axis=axes, keepdims=True)             # (..., 1, ..., 1) mean of squares
    rstd = 1 / np.sqrt(ms + as_scalar(eps, x.dtype))                # (..., 1, ..., 1)
    xhat = x * rstd                                               # (..., *normalized_shape)
    if not np.isfinite(ms).all():            # a block whose squares overflowed (or an inf/NaN input)
        xhat, rstd = _rescaled(x, axes, eps, xhat, rstd, ms, centre=False)
    out = xhat * weight if weight is not None else xhat.copy()    # (..., *normalized_shape)
    return out, RMSNormCache(xhat, rstd, weight, k)


def rms_norm_backward(dout, cache):
    """Backward of RMSNorm.  Shapes: dout (..., *ns) -> dx (..., *ns), dweight ns (None without a weight).

    Forward: ``xhat = x * rstd``, ``y = xhat * w`` with ``rstd = (mean(x**2) + eps)**-1/2``, the mean
    over the n = prod(ns) normalised elements of each block.

    * ``dweight = sum(dout * xhat)`` over every leading position (w is broadcast over them).
    * ``dxhat = dout * w``. Each ``x_j`` reaches the loss through ``xhat_j`` directly and through
      ``rstd``. With ``d rstd / d x_j = -rstd**3 x_j / n = -rstd**2 xhat_j / n``, the two paths give::

          dx = rstd * (dxhat - xhat * mean(dxhat * xhat))

      (the projection term removes the component along ``xhat``, the one direction the normalisation
      projects out: rescaling x leaves xhat unchanged. There is no ``-mean(dxhat)`` term as in
      LayerNorm, because no mean is subtracted: adding a constant to x does change y.)
    """
    xhat, rstd, weight, k = cache
    axes = tuple(range(xhat.ndim - k, xhat.ndim))
    lead = tuple(range(xhat.ndim - k))
    n = int(np.prod(xhat.shape[xhat.ndim - k:]))
    dweight = (dout * xhat).sum(axis=lead) if weight is not None else None         # normalized_shape
    dxhat = dout * weight if weight is not None else dout                           # (..., *ns)
    mean_dxhat_xhat = np.sum(dxhat * xhat, axis=axes, keepdims=True) / as_scalar(n, xhat.dtype)  # (..., 1, ..., 1)
    dx = (dxhat - xhat * mean_dxhat_xhat) * rstd                                    # (..., *ns)
    return dx, dweight
