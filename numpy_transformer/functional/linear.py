"""linear: ``y = x W^T + b`` (``torch.nn.functional.linear``), forward and backward."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["LinearCache", "linear_forward", "linear_backward"]


class LinearCache(NamedTuple):
    x: np.ndarray                 # (N..., Din) the input
    weight: np.ndarray            # (Dout, Din)
    has_bias: bool


def linear_forward(x, weight, bias=None):
    """Affine map ``y = x @ weight.T + bias``, as ``torch.nn.functional.linear``.

    Parameters
    ----------
    x : ndarray, shape (..., Din)
    weight : ndarray, shape (Dout, Din)
    bias : ndarray, shape (Dout,), optional

    Returns
    -------
    out : ndarray, shape (..., Dout)
    cache : LinearCache
    """
    # One 2-D GEMM over all rows: a (B, S, Din) @ (Din, Dout) matmul would loop over B small GEMMs.
    out = x.reshape(-1, x.shape[-1]) @ weight.T                  # (N, Dout)
    if bias is not None:
        out += bias                                              # in place: no second (N, Dout) array
    return out.reshape(x.shape[:-1] + (weight.shape[0],)), LinearCache(x, weight, bias is not None)


def linear_backward(dout, cache):
    """Backward of ``y = x W^T + b``.  Shapes: dout (..., Dout) -> dx (..., Din), dW (Dout, Din), db (Dout,).

    Each output ``y[n, o] = sum_i x[n, i] W[o, i] + b[o]``, so
    ``dL/dx[n, i] = sum_o dout[n, o] W[o, i]``      i.e. ``dx = dout @ W``;
    ``dL/dW[o, i] = sum_n dout[n, o] x[n, i]``      i.e. ``dW = dout^T @ x`` over all leading dims;
    ``dL/db[o]   = sum_n dout[n, o]``              (b is broadcast over every row, so its grads add).

    Returns
    -------
    dx, dweight, dbias : ndarray (dbias is None when the forward had no bias)
    """
    x, weight, has_bias = cache
    d_in = weight.shape[1]
    dout2 = dout.reshape(-1, dout.shape[-1])                     # (N, Dout)
    dx = (dout2 @ weight).reshape(x.shape)                       # (..., Din)
    dweight = dout2.T @ x.reshape(-1, d_in)                      # (Dout, Din); BLAS reads dout2.T in place
    dbias = dout2.sum(axis=0) if has_bias else None              # (Dout,)
    return dx, dweight, dbias
