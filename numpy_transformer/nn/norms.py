"""Normalisation layers: :class:`LayerNorm` (over the last dimension, as ``torch.nn.LayerNorm``).
"""

from __future__ import annotations

import numpy as np

from .. import functional as F
from .._checks import check_float_input, check_grad, check_number, check_positive_int
from ._init import _dtype_of
from .module import Module, Parameter

__all__ = ["LayerNorm"]


class LayerNorm(Module):
    """Layer normalisation over the last dimension, as ``torch.nn.LayerNorm``.

    Parameters
    ----------
    normalized_shape : int or 1-tuple
        D (only normalisation over the last dimension is supported).
    eps : float
    elementwise_affine : bool
    bias : bool
    dtype : np.float32 or np.float64
    """

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, dtype=np.float32):
        super().__init__()
        if isinstance(normalized_shape, (tuple, list)):
            if len(normalized_shape) != 1:
                raise ValueError("normalized_shape must be an int or a 1-tuple (normalisation over the last "
                                 f"dimension only), got {tuple(normalized_shape)}")
            normalized_shape = normalized_shape[0]
        d = check_positive_int(normalized_shape, "normalized_shape")
        self.normalized_shape = (d,)
        self.eps = check_number(eps, "eps", low=0, low_open=True)
        self.elementwise_affine = elementwise_affine
        self.dtype = _dtype_of(dtype)
        self.register_parameter("weight", Parameter(np.ones(d, dtype=self.dtype)) if elementwise_affine else None)
        self.register_parameter("bias", Parameter(np.zeros(d, dtype=self.dtype))
                                if elementwise_affine and bias else None)

    def forward(self, x):
        """x (..., D) -> (..., D)."""
        x = check_float_input(x, "input", self.dtype, last_dim=self.normalized_shape[0], shape_doc="(..., D)")
        out, cache = F.layer_norm_forward(x, None if self.weight is None else self.weight.data,
                                          None if self.bias is None else self.bias.data, self.eps)
        self._save((cache, out.shape))
        return out

    def backward(self, dout):
        """dout (..., D) -> dx (..., D); accumulates weight.grad and bias.grad."""
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
