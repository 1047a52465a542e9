"""Softmax over the last axis, forward and backward."""

import numpy as np


def softmax_forward(x):
    """x (N..., V) -> (y, cache), y = softmax(x) along the last axis.

    Softmax is unchanged by subtracting a constant from a row, so subtract the row max first: the
    largest exponent is then exp(0) = 1 and nothing overflows.
    """
    z = x - x.max(axis=-1, keepdims=True)                       # (N..., V)
    e = np.exp(z)
    y = e / e.sum(axis=-1, keepdims=True)                       # (N..., V)
    return y, y                                                 # the backward only needs y


def softmax_backward(dy, cache):
    """dy (N..., V) -> dx (N..., V).

    y_i = exp(x_i) / sum_j exp(x_j) has Jacobian dy_i/dx_k = y_i (delta_ik - y_k), so
        dx_k = sum_i dy_i y_i (delta_ik - y_k) = y_k (dy_k - sum_i dy_i y_i).
    The row sum sum_i dy_i y_i is the term a naive "y * dy" forgets.
    """
    y = cache
    return y * (dy - np.sum(dy * y, axis=-1, keepdims=True))   # (N..., V)
