"""Drill: an embedding table lookup (as torch.nn.Embedding), forward and backward.

Shape letters: B batch, S sequence length, V vocabulary size, D embedding width.

Conventions (the grader checks them):
* forward returns (out, cache); backward returns dW only (ids are integers: no gradient).
* ids repeat (the same token twice in a sentence); float64 throughout; do not modify inputs in
  place.

Hints:
* The forward is one line of fancy indexing.
* Row v of W was copied to every position holding id v: what happens to its gradient when v
  appears twice? Check what NumPy does with `a[idx] += b` when idx has duplicates.
"""

import numpy as np


def embedding_forward(ids, W):
    """out[b, s] = W[ids[b, s]].

    Parameters
    ----------
    ids : ndarray of int, shape (B, S), values in [0, V)
    W : ndarray, shape (V, D)

    Returns
    -------
    out : ndarray, shape (B, S, D)
    cache : anything your backward needs
    """
    raise NotImplementedError


def embedding_backward(dout, cache):
    """dL/dW given dout = dL/dout.

    Parameters
    ----------
    dout : ndarray, shape (B, S, D)
    cache : what embedding_forward returned

    Returns
    -------
    dW : ndarray, shape (V, D)
    """
    raise NotImplementedError
