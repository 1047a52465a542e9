"""Drill: softmax over the last axis, forward and backward.

Shape letters: N... any leading dimensions, V the axis being normalised (e.g. the vocabulary).

Conventions (the grader checks them):
* forward returns (y, cache); backward takes (dy, cache) and returns dx. Put in the cache whatever
  your backward needs.
* everything is float64; do not modify the input arrays in place.
* the grader uses huge logits (around +-1000) on some cases: exp must not overflow.

Hints:
* softmax(x) == softmax(x - c) for any constant c per row.
* The Jacobian of y = softmax(x) is dy_i/dx_k = y_i (delta_ik - y_k). You never need to build it:
  write dx_k = sum_i dy_i * dy_i/dx_k and simplify.
"""

import numpy as np


def softmax_forward(x):
    """Softmax along the last axis.

    Parameters
    ----------
    x : ndarray, shape (N..., V)

    Returns
    -------
    y : ndarray, shape (N..., V), each row (last axis) sums to 1
    cache : anything your backward needs
    """
    raise NotImplementedError


def softmax_backward(dy, cache):
    """Gradient of the loss with respect to x, given dy = dL/dy.

    Parameters
    ----------
    dy : ndarray, shape (N..., V)
    cache : what softmax_forward returned

    Returns
    -------
    dx : ndarray, shape (N..., V)
    """
    raise NotImplementedError
