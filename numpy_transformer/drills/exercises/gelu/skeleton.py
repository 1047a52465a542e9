"""Drill: GELU, exact and tanh-approximated (as torch.nn.functional.gelu), forward and backward.

    approximate="none":  y = x * Phi(x),  Phi the standard normal CDF = (1 + erf(x / sqrt(2))) / 2
    approximate="tanh":  y = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))

Conventions (the grader checks them):
* forward returns (y, cache); backward returns dx (same shape as x). The grader tests both modes.
* float64 throughout; do not modify the input in place.

Hints:
* NumPy has no erf: `erf` below is math.erf applied elementwise (slow but fine for a drill).
* The exact GELU is a product x * Phi(x): differentiate with the product rule. Phi' is the normal
  density phi(x) = exp(-x**2 / 2) / sqrt(2 * pi).
* The tanh form has a function inside a function: chain rule all the way down.
"""

import math

import numpy as np

erf = np.vectorize(math.erf, otypes=[float])   # given: elementwise erf on arrays


def gelu_forward(x, approximate="none"):
    """GELU.

    Parameters
    ----------
    x : ndarray, any shape
    approximate : "none" (exact, with erf) or "tanh"

    Returns
    -------
    y : ndarray, same shape as x
    cache : anything your backward needs (remember which mode was used)
    """
    raise NotImplementedError


def gelu_backward(dy, cache):
    """dx = dy * GELU'(x).

    Parameters
    ----------
    dy : ndarray, same shape as x
    cache : what gelu_forward returned

    Returns
    -------
    dx : ndarray, same shape as x
    """
    raise NotImplementedError
