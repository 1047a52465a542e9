"""SiLU (Swish), y = x * sigmoid(x), forward and backward."""

import numpy as np


def _sigmoid(x):
    """1 / (1 + exp(-x)) without overflow: e = exp(-|x|) is in (0, 1]."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0, e) / (1.0 + e)


def silu_forward(x):
    """x (any shape) -> (y, cache), y = x * sigmoid(x)."""
    s = _sigmoid(x)
    return x * s, (x, s)


def silu_backward(dy, cache):
    """dy -> dx = dy * y'(x).

    y = x * s is a product and s' = s (1 - s), so y' = s + x * s * (1 - s)   (product rule).
    """
    x, s = cache
    return dy * (s + x * s * (1.0 - s))
