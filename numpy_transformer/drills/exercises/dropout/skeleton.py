"""Drill: inverted dropout (as torch.nn.functional.dropout), forward and backward.

In training, each element is kept with probability 1 - p and the kept ones are scaled by
1 / (1 - p), so that the expected output equals the input; at evaluation (training=False) dropout
is the identity.

    y = x * keep / (1 - p)          keep = rng.random(x.shape) >= p

Conventions (the grader checks them):
* draw the keep-mask with exactly ONE call, keep = rng.random(x.shape) >= p, in the forward:
  the grader gives you a numpy.random.Generator and replays the same draw in its reference;
* training=False: y = x (draw nothing); p = 0 keeps everything; p = 1 drops everything: y = 0,
  dx = 0 (not NaN: there is no 1 / (1 - p) to take);
* forward returns (y, cache); backward returns dx (same shape as x).
* float64 throughout; do not modify the inputs in place.

Hints:
* The backward of y = x * c (c a constant array) is dx = dy * c. What was c here?
* Which random numbers does the backward need?
"""

import numpy as np


def dropout_forward(x, p, rng, training=True):
    """Inverted dropout.

    Parameters
    ----------
    x : ndarray, any shape
    p : float in [0, 1], the probability of dropping an element
    rng : numpy.random.Generator
    training : bool

    Returns
    -------
    y : ndarray, same shape as x
    cache : anything your backward needs
    """
    raise NotImplementedError


def dropout_backward(dy, cache):
    """dx given dy = dL/dy.

    Parameters
    ----------
    dy : ndarray, same shape as x
    cache : what dropout_forward returned

    Returns
    -------
    dx : ndarray, same shape as x
    """
    raise NotImplementedError
