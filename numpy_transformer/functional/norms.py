"""Normalisation layers: LayerNorm ``y = (x - mean) / sqrt(var + eps) * w + b`` over the last
dimension, forward and backward."""

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
