"""Inverted dropout ``y = x * mask / (1 - p)``, forward and backward."""

from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

from .dtypes import as_scalar

__all__ = ["DropoutCache", "dropout_forward", "dropout_backward"]


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
    out *= as_scalar(scale, x.dtype)
    return out, DropoutCache(mask, scale)


def dropout_backward(dout, cache):
    """Backward of inverted dropout: the same mask and scale, ``dx = dout * mask / (1 - p)``."""
    mask, scale = cache
    if mask is None:
        return dout
    dx = np.multiply(dout, mask)
    dx *= as_scalar(scale, dout.dtype)
    return dx
