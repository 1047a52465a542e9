"""softmax over one axis, numerically stable (fully masked slices give zeros), and its backward.

The forward runs :func:`_softmax_inplace` on blocks of rows in parallel
(:func:`numpy_transformer.kernels.parallel.map_rows`); the maths is the plain formula in :func:`_softmax_inplace`."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..kernels.parallel import map_rows

__all__ = ["SoftmaxCache", "softmax_forward", "softmax_backward"]


class SoftmaxCache(NamedTuple):
    y: np.ndarray                 # the probabilities, same shape as x
    axis: int


def softmax_forward(x, axis=-1, out=None):
    """Numerically stable softmax ``y = exp(x - max) / sum(exp(x - max))`` along ``axis``.

    A slice that is entirely ``-inf`` (every key masked) yields zeros, not NaN: one defined behaviour,
    the one ``torch.nn.functional.scaled_dot_product_attention`` uses.

    Parameters
    ----------
    x : ndarray
    axis : int
    out : ndarray, optional
        Where to write the result; may be ``x`` itself (in place, no new array of ``x``'s size).

    Returns
    -------
    out : ndarray, same shape as ``x``
    cache : SoftmaxCache
    """
    if out is None:
        out = np.empty_like(x)
    if out is not x:
        out[...] = x
    if axis in (-1, x.ndim - 1) and out.flags.c_contiguous:
        map_rows(_softmax_last_axis_inplace, out)               # row blocks in parallel, in cache
    else:
        _softmax_inplace(out, axis)
    return out, SoftmaxCache(out, axis)


def _softmax_inplace(y, axis=-1):
    if y.dtype == np.float16:          # mixed precision (numpy_transformer.amp): the softmax runs in float32
        y32 = y.astype(np.float32)
        _softmax_inplace(y32, axis)
        y[...] = y32                   # probabilities in [0, 1]: float16 rounds them, cannot overflow
        return
    m = np.max(y, axis=axis, keepdims=True)
    m[np.isneginf(m)] = 0                                        # all -inf row: exp(-inf) = 0 below
    with np.errstate(over="ignore"):                             # -max - max = -inf: exp gives the right 0
        y -= m
    np.exp(y, out=y)
    s = y.sum(axis=axis, keepdims=True)
    s[s == 0] = 1                                                # all-masked row stays all zero
    y /= s


def _softmax_last_axis_inplace(y):
    _softmax_inplace(y, -1)


def softmax_backward(dout, cache):
    """Backward of softmax.  Shapes: dout like y -> dx like y.

    ``y_i = exp(x_i) / sum_j exp(x_j)`` has Jacobian ``dy_i/dx_k = y_i (delta_ik - y_k)``, so
    ``dx_k = sum_i dout_i y_i (delta_ik - y_k) = y_k (dout_k - sum_i dout_i y_i)``.
    The row-sum term ``sum_i dout_i y_i`` is what a naive "``y * dout``" forgets.
    """
    y, axis = cache
    if y.dtype == np.float16:          # mixed precision: in float32, rounded back (as the forward)
        y32, d32 = y.astype(np.float32), dout.astype(np.float32)
        return (y32 * (d32 - np.sum(d32 * y32, axis=axis, keepdims=True))).astype(np.float16)
    return y * (dout - np.sum(dout * y, axis=axis, keepdims=True))
