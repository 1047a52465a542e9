"""Embedding lookup, forward and backward."""

import numpy as np


def embedding_forward(ids, W):
    """ids (B, S) int in [0, V), W (V, D) -> (out (B, S, D), cache)."""
    return W[ids], (ids, W.shape)


def embedding_backward(dout, cache):
    """dout (B, S, D) -> dW (V, D).

    Row v of W was copied to every position where ids == v, so its gradient is the *sum* of dout
    over those positions: a scatter-add. np.add.at accumulates repeated ids; dW[ids] += dout would
    not (NumPy's buffered fancy-index assignment writes each repeated index once).
    """
    ids, (V, D) = cache
    dW = np.zeros((V, D), dtype=dout.dtype)
    np.add.at(dW, ids.reshape(-1), dout.reshape(-1, D))
    return dW
