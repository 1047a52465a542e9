"""GELU (exact and tanh approximation), forward and backward."""

import math

import numpy as np

_erf = np.vectorize(math.erf, otypes=[float])  # NumPy has no erf; math.erf elementwise is fine here


def gelu_forward(x, approximate="none"):
    """x (any shape) -> (y, cache).

    approximate="none":  y = x * Phi(x),  Phi(x) = (1 + erf(x / sqrt(2))) / 2 (the normal CDF).
    approximate="tanh":  y = x/2 * (1 + tanh(u)),  u = sqrt(2/pi) * (x + 0.044715 x^3).
    """
    if approximate == "tanh":
        u = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)
        y = 0.5 * x * (1.0 + np.tanh(u))
    else:
        y = x * 0.5 * (1.0 + _erf(x / math.sqrt(2.0)))
    return y, (x, approximate)


def gelu_backward(dy, cache):
    """dy -> dx = dy * y'(x).

    Exact: y = x Phi(x) is a product, so y' = Phi(x) + x phi(x), phi(x) = exp(-x^2/2) / sqrt(2 pi).
    Tanh: with t = tanh(u), y' = (1 + t)/2 + x/2 * (1 - t^2) * du/dx and
          du/dx = sqrt(2/pi) * (1 + 3 * 0.044715 x^2)   (chain rule through u).
    """
    x, approximate = cache
    if approximate == "tanh":
        c = math.sqrt(2.0 / math.pi)
        t = np.tanh(c * (x + 0.044715 * x ** 3))
        slope = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3 * 0.044715 * x * x)
    else:
        cdf = 0.5 * (1.0 + _erf(x / math.sqrt(2.0)))
        pdf = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
        slope = cdf + x * pdf
    return dy * slope
