"""Normalisation layers, forward and backward: LayerNorm ``y = (x - mean) / sqrt(var + eps) * w + b`` over
the last dimension, and RMSNorm ``y = x / sqrt(mean(x**2) + eps) * w`` over the trailing dimensions."""

from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

from ._dtypes import _scalar


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


class RMSNormCache(NamedTuple):
    xhat: np.ndarray              # (..., *normalized_shape) normalised input x * rstd
    rstd: np.ndarray              # (..., 1, ..., 1) 1 / sqrt(mean(x**2) + eps), one per normalised block
    weight: Optional[np.ndarray]  # normalized_shape
    ndim: int                     # how many trailing axes were normalised


def rms_norm_forward(x, weight=None, eps=None, normalized_shape=None):
    """Root-mean-square normalisation over the trailing axes, as ``torch.nn.functional.rms_norm``.

    ``y = x / sqrt(mean(x**2) + eps) * weight``: no mean is subtracted and there is no bias; the mean of
    squares is taken over the last ``len(normalized_shape)`` axes, and ``eps`` sits inside the root.

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
    if normalized_shape is None:
        normalized_shape = weight.shape if weight is not None else x.shape[-1:]
    elif isinstance(normalized_shape, (int, np.integer)):
        normalized_shape = (int(normalized_shape),)
    normalized_shape = tuple(int(n) for n in normalized_shape)
    k = len(normalized_shape)                                     # the raw maths: shapes are not checked
    if eps is None:
        eps = np.finfo(x.dtype).eps
    axes = tuple(range(x.ndim - k, x.ndim))
    ms = np.mean(x * x, axis=axes, keepdims=True)                 # (..., 1, ..., 1) mean of squares
    rstd = 1 / np.sqrt(ms + _scalar(eps, x.dtype))                # (..., 1, ..., 1)
    xhat = x * rstd                                               # (..., *normalized_shape)
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
    mean_dxhat_xhat = np.sum(dxhat * xhat, axis=axes, keepdims=True) / _scalar(n, xhat.dtype)  # (..., 1, ..., 1)
    dx = (dxhat - xhat * mean_dxhat_xhat) * rstd                                    # (..., *ns)
    return dx, dweight
