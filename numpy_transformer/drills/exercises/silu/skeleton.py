"""Drill: SiLU (Swish), y = x * sigmoid(x) (as torch.nn.functional.silu), forward and backward.

    sigmoid(x) = 1 / (1 + exp(-x))

Conventions (the grader checks them):
* forward returns (y, cache); backward returns dx (same shape as x).
* float64 throughout; do not modify the input in place.
* it must stay finite for large |x|: the grader tries x = +-1000 (no nan, no inf).

Hints:
* Never evaluate exp of a large positive number: exp(-|x|) is always in (0, 1], and
  sigmoid(x) = 1 / (1 + e) for x >= 0, e / (1 + e) for x < 0, with e = exp(-|x|).
* y = x * sigmoid(x) is a product: differentiate with the product rule.
  sigmoid'(x) = sigmoid(x) * (1 - sigmoid(x)).
"""

import numpy as np


def silu_forward(x):
    """SiLU.

    Parameters
    ----------
    x : ndarray, any shape

    Returns
    -------
    y : ndarray, same shape as x
    cache : anything your backward needs
    """
    raise NotImplementedError


def silu_backward(dy, cache):
    """dx = dy * SiLU'(x).

    Parameters
    ----------
    dy : ndarray, same shape as x
    cache : what silu_forward returned

    Returns
    -------
    dx : ndarray, same shape as x
    """
    raise NotImplementedError
