"""embedding: ``y = W[ids]`` and its scatter-add backward (``torch.nn.functional.embedding``)."""

from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np


class EmbeddingCache(NamedTuple):
    ids: np.ndarray               # (N...) integer ids
    num_embeddings: int           # V
    padding_idx: Optional[int]


def embedding_forward(ids, weight, padding_idx=None):
    """Table lookup ``out[..., :] = weight[ids[...], :]``.

    Parameters
    ----------
    ids : ndarray of int, shape (...)
        Values in ``[0, V)`` (the caller validates; NumPy would silently wrap negatives).
    weight : ndarray, shape (V, D)
    padding_idx : int, optional
        Rows with this id get no gradient (as ``torch.nn.Embedding``).

    Returns
    -------
    out : ndarray, shape (..., D)
    cache : EmbeddingCache
    """
    out = weight[ids]                                            # (..., D)
    return out, EmbeddingCache(ids, weight.shape[0], padding_idx)


def embedding_backward(dout, cache):
    """Backward of ``out = W[ids]``.  Shapes: dout (..., D) -> dW (V, D).

    Row ``v`` of ``W`` was copied to every position where ``ids == v``, so its gradient is the *sum*
    of ``dout`` over those positions: a scatter-add. ``np.add.at`` accumulates repeated ids; a plain
    ``dW[ids] += dout`` would keep only the last write for a repeated id (a classic bug). The ids are
    not differentiable, so only ``dW`` is returned.
    """
    ids, num_embeddings, padding_idx = cache
    dweight = np.zeros((num_embeddings, dout.shape[-1]), dtype=dout.dtype)  # (V, D)
    np.add.at(dweight, ids.reshape(-1), dout.reshape(-1, dout.shape[-1]))
    if padding_idx is not None:
        dweight[padding_idx] = 0
    return dweight
