"""Activations: ReLU ``max(x, 0)``, GELU (exact ``x * Phi(x)`` or the tanh approximation) and SiLU
``x * sigmoid(x)``, forward and backward, as ``torch.nn.functional.relu`` / ``gelu`` / ``silu``.

GELU's elementwise maths runs in chunks on a thread pool; the chunk kernels and the plain
one-line formulas they are tested against live in :mod:`numpy_transformer.kernels.gelu`."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..kernels.gelu import gelu_exact_chunk, gelu_exact_grad_chunk, gelu_tanh_chunk, gelu_tanh_grad_chunk
from ..kernels.parallel import map_chunks
from .dtypes import as_scalar

__all__ = ["ReluCache", "relu_forward", "relu_backward", "GeluCache", "gelu_forward", "gelu_backward",
           "SiluCache", "sigmoid", "silu_forward", "silu_backward"]


class ReluCache(NamedTuple):
    out: np.ndarray               # the output max(x, 0): positive exactly where x > 0


def relu_forward(x):
    """``y = max(x, 0)``. Returns ``(out, ReluCache)``; the cache is the output itself (the next layer
    keeps it anyway), not a separate mask."""
    out = np.maximum(x, as_scalar(0, x.dtype))
    return out, ReluCache(out)


def relu_backward(dout, cache):
    """Backward of ReLU: the slope is 1 where ``x > 0`` and 0 elsewhere (0 at ``x == 0``, as torch);
    ``x > 0`` exactly where the output is ``> 0``."""
    return dout * (cache.out > 0)


class GeluCache(NamedTuple):
    x: np.ndarray
    approximate: str


def gelu_forward(x, approximate="none"):
    """Gaussian Error Linear Unit, as ``torch.nn.functional.gelu``.

    ``approximate="none"``: ``y = x * Phi(x)`` with ``Phi(x) = erfc(-x / sqrt(2)) / 2`` the standard
    normal CDF (``erfc`` keeps full relative accuracy for very negative x, where ``1 + erf`` cancels).
    ``approximate="tanh"``: ``y = x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x**3)))``.

    The work is done in cache-sized chunks on a small thread pool (:mod:`numpy_transformer.kernels.parallel`):
    the erf evaluation takes many elementwise passes, and NumPy runs each on one core.

    Returns
    -------
    out : ndarray, same shape and dtype as ``x``
    cache : GeluCache
    """
    if approximate not in ("none", "tanh"):
        raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    x = np.ascontiguousarray(x)
    out = np.empty_like(x)
    map_chunks(gelu_exact_chunk if approximate == "none" else gelu_tanh_chunk, out, x)
    return out, GeluCache(x, approximate)


def gelu_backward(dout, cache):
    """Backward of GELU: ``dx = dout * y'(x)``.

    Exact: ``y = x Phi(x)`` so ``y' = Phi(x) + x phi(x)`` with ``phi(x) = exp(-x**2/2) / sqrt(2 pi)``.
    Tanh: with ``u = sqrt(2/pi)(x + 0.044715 x**3)`` and ``t = tanh(u)``,
    ``y' = (1 + t)/2 + x/2 * (1 - t**2) * sqrt(2/pi) * (1 + 3 * 0.044715 x**2)``.
    (``Phi`` is recomputed rather than cached: one (N, F) array less to hold between the passes.)
    """
    x, approximate = cache
    dx = np.empty_like(x)
    map_chunks(gelu_exact_grad_chunk if approximate == "none" else gelu_tanh_grad_chunk,
               dx, x, np.ascontiguousarray(dout))
    return dx


def sigmoid(x):
    """``1 / (1 + exp(-x))`` without overflow: with ``e = exp(-|x|)`` (in (0, 1], never overflows),
    ``sigmoid(x) = 1 / (1 + e)`` for x >= 0 and ``e / (1 + e)`` for x < 0. Keeps the dtype of ``x``."""
    e = np.exp(-np.abs(x))                                       # (...) in (0, 1]
    return np.where(x >= 0, as_scalar(1, x.dtype), e) / (as_scalar(1, x.dtype) + e)


class SiluCache(NamedTuple):
    x: np.ndarray
    sigmoid: np.ndarray           # sigmoid(x), same shape


def silu_forward(x):
    """SiLU (Swish with beta = 1), ``y = x * sigmoid(x)``, as ``torch.nn.functional.silu``.

    The sigmoid is the overflow-free form of :func:`sigmoid` (``x = -1000`` gives ``y = -0.0``, no
    warning, in float32 and float64).

    Returns
    -------
    out : ndarray, same shape and dtype as ``x``
    cache : SiluCache
    """
    s = sigmoid(x)                                               # (...)
    return x * s, SiluCache(x, s)


def silu_backward(dout, cache):
    """Backward of SiLU: ``dx = dout * y'(x)``.

    ``y = x * s`` with ``s = sigmoid(x)`` is a product, and ``s' = s * (1 - s)``, so by the product rule
    ``y' = s + x * s * (1 - s) = s * (1 + x * (1 - s))``. (Dropping the second term, ``dx = dout * s``,
    is the classic mistake: it treats the x in front as a constant.)
    """
    x, s = cache
    return dout * (s * (as_scalar(1, x.dtype) + x * (as_scalar(1, x.dtype) - s)))
