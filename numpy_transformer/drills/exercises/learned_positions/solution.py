"""A learned position table: y = x + W[offset:offset+S], forward and backward."""

import numpy as np


def learned_positions_forward(x, W, offset=0):
    """x (B, S, D) -> (y, cache)."""
    s = x.shape[1]
    return x + W[offset:offset + s], (W.shape, offset, s)


def learned_positions_backward(dy, cache):
    """dx = dy (the add passes it through); dW[offset:offset+S] = the batch sum of dy, since
    every batch row used those same rows; the other rows were not used and get zero."""
    shape, offset, s = cache
    dW = np.zeros(shape)
    dW[offset:offset + s] = dy.sum(axis=0)
    return dy.copy(), dW
