"""Drill: a learned position table (GPT-2's wpe), as nt.LearnedPositionalEmbedding.

    y[b, s] = x[b, s] + W[offset + s]

Conventions (the grader checks them):
* forward returns (y, cache); backward returns (dx, dW), dW with W's shape (max_len, D).
* float64 throughout; do not modify the inputs in place.

Hints:
* W[offset:offset+S] is shared by every batch row: what is the gradient of a parameter used B times?
* Only the rows that were used get a gradient.
"""

import numpy as np


def learned_positions_forward(x, W, offset=0):
    """Add the positions offset .. offset+S-1.

    Parameters
    ----------
    x : ndarray, shape (B, S, D)
    W : ndarray, shape (max_len, D), offset + S <= max_len
    offset : int

    Returns
    -------
    y : ndarray, shape (B, S, D)
    cache : anything your backward needs
    """
    raise NotImplementedError


def learned_positions_backward(dy, cache):
    """Gradients of y = x + W[offset:offset+S].

    Parameters
    ----------
    dy : ndarray, shape (B, S, D)
    cache : what learned_positions_forward returned

    Returns
    -------
    dx : ndarray, shape (B, S, D)
    dW : ndarray, shape (max_len, D)
    """
    raise NotImplementedError
