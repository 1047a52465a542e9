"""embedding: ``y = W[ids]`` and its scatter-add backward (``torch.nn.functional.embedding``), with
torch's options: ``max_norm`` (the looked-up rows renormalised in place first, :func:`embedding_renorm_`)
and ``scale_grad_by_freq``."""

from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

__all__ = ["EmbeddingCache", "embedding_forward", "embedding_backward", "embedding_renorm_"]


class EmbeddingCache(NamedTuple):
    ids: np.ndarray               # (N...) integer ids
    num_embeddings: int           # V
    padding_idx: Optional[int]
    scale_grad_by_freq: bool = False


def embedding_renorm_(weight, ids, max_norm, norm_type=2.0):
    """Rescale, in place, every row of ``weight`` that ``ids`` look up whose ``norm_type``-norm exceeds
    ``max_norm``: ``row *= max_norm / (norm + 1e-7)`` (torch's ``embedding_renorm_``, the 1e-7 included).

    Each referenced row is treated once however often it repeats; rows not looked up, and rows within
    the bound, are left alone. Returns ``weight``.

    Parameters
    ----------
    weight : ndarray, shape (V, D), writeable
    ids : ndarray of int, shape (...)
    max_norm : float
    norm_type : float
        The p of the p-norm (``np.inf``: the largest absolute entry).
    """
    rows = np.unique(ids)                                                  # (U,) each looked-up row once
    norms = np.linalg.norm(weight[rows], ord=norm_type, axis=1).astype(np.float64)   # (U,) in weight's dtype
    over = norms > max_norm
    scale = max_norm / (norms[over] + 1e-7)                                # (U',) in float64, as torch
    weight[rows[over]] *= scale.astype(weight.dtype)[:, None]              # (U', D)
    return weight


def embedding_forward(ids, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False):
    """Table lookup ``out[..., :] = weight[ids[...], :]``.

    **max_norm: an in-place edit, not part of the function being differentiated.** With ``max_norm``,
    torch first rescales (in place, under ``no_grad``) each looked-up row whose norm exceeds it
    (:func:`embedding_renorm_`), then looks up the rescaled rows. The rescaling is not recorded by
    autograd: it is an edit of the parameter's *value*, like an optimizer step, and the lookup is then
    an ordinary lookup of the edited table. So the gradient is the plain scatter-add, the gradient *with
    respect to the renormed table*, as if the renormed weight had been the weight all along. It is
    not the derivative of ``W -> renorm(W)[ids]`` (that one would carry the Jacobian of the
    rescaling, ``(I - u u^T) * max_norm / norm`` for the 2-norm, with ``u`` the unit row); finite
    differences through the renorm would not match it, and should not. This function does the same:
    ``weight`` is modified in place (pass a copy to keep the original), and the backward does not change.

    Parameters
    ----------
    ids : ndarray of int, shape (...)
        Values in ``[0, V)`` (the caller validates; NumPy would silently wrap negatives).
    weight : ndarray, shape (V, D)
    padding_idx : int, optional
        Rows with this id get no gradient (as ``torch.nn.Embedding``).
    max_norm : float, optional
        Renormalise each looked-up row whose norm exceeds it, in place (see above).
    norm_type : float
        The p of the p-norm for ``max_norm`` (default 2).
    scale_grad_by_freq : bool
        Divide each row's gradient by how many times its id occurs in ``ids`` (the whole batch).

    Returns
    -------
    out : ndarray, shape (..., D)
    cache : EmbeddingCache
    """
    if max_norm is not None:
        embedding_renorm_(weight, ids, max_norm, norm_type)                # in place, no gradient
    out = weight[ids]                                                      # (..., D)
    return out, EmbeddingCache(ids, weight.shape[0], padding_idx, bool(scale_grad_by_freq))


def embedding_backward(dout, cache):
    """Backward of ``out = W[ids]``.  Shapes: dout (..., D) -> dW (V, D).

    Row ``v`` of ``W`` was copied to every position where ``ids == v``, so its gradient is the *sum*
    of ``dout`` over those positions: a scatter-add. ``np.add.at`` accumulates repeated ids; a plain
    ``dW[ids] += dout`` would keep only the last write for a repeated id (a classic bug). The ids are
    not differentiable, so only ``dW`` is returned. With ``scale_grad_by_freq`` each row's sum is
    divided by its id's count in the batch (a mean instead of a sum: not a derivative, torch's option
    to damp frequent tokens). A ``max_norm`` renorm in the forward changes nothing here (see
    :func:`embedding_forward`).
    """
    ids, num_embeddings, padding_idx, scale_grad_by_freq = cache
    dweight = np.zeros((num_embeddings, dout.shape[-1]), dtype=dout.dtype)  # (V, D)
    np.add.at(dweight, ids.reshape(-1), dout.reshape(-1, dout.shape[-1]))
    if scale_grad_by_freq:
        counts = np.bincount(ids.reshape(-1), minlength=num_embeddings)    # (V,) occurrences of each id
        dweight /= np.maximum(counts, 1).astype(dout.dtype)[:, None]       # rows never looked up stay 0
    if padding_idx is not None:
        dweight[padding_idx] = 0
    return dweight
