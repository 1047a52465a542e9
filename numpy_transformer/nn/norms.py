"""Normalisation layers, both over the trailing ``normalized_shape`` dimensions as torch:
:class:`LayerNorm` (``torch.nn.LayerNorm``) and :class:`RMSNorm` (``torch.nn.RMSNorm``).
"""

from __future__ import annotations

import numpy as np

from .. import functional as F
from ..utils.checks import check_float_input, check_grad, check_number, check_positive_int
from ._init import dtype_of
from .module import Module, Parameter

__all__ = ["LayerNorm", "RMSNorm"]


def _normalized_shape(normalized_shape):
    """An int or a non-empty tuple of positive ints -> the tuple (torch's ``normalized_shape``)."""
    if isinstance(normalized_shape, (tuple, list)):
        shape = tuple(normalized_shape)
        if not shape or not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n > 0
                                for n in shape):
            raise ValueError("normalized_shape must be a positive int or a non-empty tuple of positive ints, "
                             f"got {shape!r}")
        return tuple(int(n) for n in shape)
    return (check_positive_int(normalized_shape, "normalized_shape"),)


def _check_normalized_input(x, normalized_shape, dtype):
    """The input, validated: floating point of ``dtype``, ending in the dimensions ``normalized_shape``."""
    shape_doc = "(..., " + ", ".join(str(n) for n in normalized_shape) + ")"
    k = len(normalized_shape)
    x = check_float_input(x, "input", dtype, last_dim=normalized_shape[0] if k == 1 else None, shape_doc=shape_doc)
    if x.ndim < k or tuple(x.shape[x.ndim - k:]) != normalized_shape:
        raise ValueError(f"input must have trailing dimensions {normalized_shape} (normalized_shape) "
                         f"{shape_doc}, got shape {x.shape}")
    return x


class LayerNorm(Module):
    """Layer normalisation over the trailing dimensions, as ``torch.nn.LayerNorm``.

    ``y = (x - mean) / sqrt(var + eps) * weight + bias``, the (biased) mean and variance over the last
    ``len(normalized_shape)`` dimensions: ``LayerNorm(D)`` normalises each position's features,
    ``LayerNorm((S, D))`` each sequence as one block.

    Parameters
    ----------
    normalized_shape : int or tuple of int
        The trailing shape of the input to normalise over (e.g. D, or (S, D)).
    eps : float
        Added to the variance inside the square root.
    elementwise_affine : bool
        Learn ``weight`` (ones) and, with ``bias``, ``bias`` (zeros), both of shape normalized_shape.
    bias : bool
    dtype : np.float32 or np.float64
    """

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, dtype=np.float32):
        super().__init__()
        shape = _normalized_shape(normalized_shape)
        self.normalized_shape = shape
        self.eps = check_number(eps, "eps", low=0, low_open=True)
        self.elementwise_affine = elementwise_affine
        self.dtype = dtype_of(dtype)
        self.register_parameter("weight", Parameter(np.ones(shape, dtype=self.dtype)) if elementwise_affine else None)
        self.register_parameter("bias", Parameter(np.zeros(shape, dtype=self.dtype))
                                if elementwise_affine and bias else None)

    def forward(self, x):
        """x (..., *normalized_shape) -> same shape."""
        x = _check_normalized_input(x, self.normalized_shape, self.dtype)
        out, cache = F.layer_norm_forward(x, None if self.weight is None else self.weight.data,
                                          None if self.bias is None else self.bias.data, self.eps,
                                          normalized_shape=self.normalized_shape)
        self._save((cache, out.shape))
        return out

    def backward(self, dout):
        """dout (..., *normalized_shape) -> dx (same shape); accumulates weight.grad and bias.grad."""
        cache, shape = self._take()
        dout = check_grad(dout, "dout", shape, self.dtype)
        dx, dw, db = F.layer_norm_backward(dout, cache)
        if self.weight is not None:
            self.weight.accumulate(dw, owned=True)
        if self.bias is not None:
            self.bias.accumulate(db, owned=True)
        return dx

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class RMSNorm(Module):
    """Root-mean-square normalisation over the trailing dimensions, as ``torch.nn.RMSNorm``.

    ``y = x / sqrt(mean(x**2) + eps) * weight``, the mean over the last ``len(normalized_shape)``
    dimensions; no mean is subtracted and there is no bias.

    Parameters
    ----------
    normalized_shape : int or tuple of int
        The trailing shape of the input to normalise over (e.g. D, or (S, D)).
    eps : float, optional
        Added to the mean of squares inside the square root; ``None`` (torch's default) means the
        machine epsilon of the input's dtype, ``np.finfo(dtype).eps``.
    elementwise_affine : bool
        Learn ``weight`` (shape normalized_shape, initialised to ones).
    dtype : np.float32 or np.float64
    """

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, dtype=np.float32):
        super().__init__()
        shape = _normalized_shape(normalized_shape)
        self.normalized_shape = shape
        self.eps = None if eps is None else check_number(eps, "eps", low=0, low_open=True)
        self.elementwise_affine = bool(elementwise_affine)
        self.dtype = dtype_of(dtype)
        self.register_parameter("weight", Parameter(np.ones(shape, dtype=self.dtype)) if elementwise_affine else None)

    def forward(self, x):
        """x (..., *normalized_shape) -> same shape."""
        x = _check_normalized_input(x, self.normalized_shape, self.dtype)
        out, cache = F.rms_norm_forward(x, None if self.weight is None else self.weight.data, self.eps,
                                        normalized_shape=self.normalized_shape)
        self._save((cache, out.shape))
        return out

    def backward(self, dout):
        """dout (..., *normalized_shape) -> dx (same shape); accumulates weight.grad."""
        cache, shape = self._take()
        dout = check_grad(dout, "dout", shape, self.dtype)
        dx, dw = F.rms_norm_backward(dout, cache)
        if self.weight is not None:
            self.weight.accumulate(dw, owned=True)
        return dx

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
