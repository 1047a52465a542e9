"""The activation modules :class:`ReLU` and :class:`GELU`, and :func:`activation_module`, which turns a
layer's ``activation`` argument (``"relu"``, ``"gelu"`` or one of these modules) into a module.
"""

from __future__ import annotations

from .. import functional as F
from .._checks import check_float_array, check_grad
from .module import Module

__all__ = ["ReLU", "GELU", "activation_module"]


class ReLU(Module):
    """``max(x, 0)`` as a module (what ``activation="relu"`` builds)."""

    def forward(self, x):
        x = check_float_array(x, "input")
        out, cache = F.relu_forward(x)
        self._save((cache, out.shape, out.dtype))
        return out

    def backward(self, dout):
        cache, shape, dtype = self._take()
        return F.relu_backward(check_grad(dout, "dout", shape, dtype), cache)


class GELU(Module):
    """GELU as a module; ``approximate="none"`` (exact, erf) or ``"tanh"``, as ``torch.nn.GELU``."""

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x):
        x = check_float_array(x, "input")
        out, cache = F.gelu_forward(x, self.approximate)
        self._save((cache, out.shape, out.dtype))
        return out

    def backward(self, dout):
        cache, shape, dtype = self._take()
        return F.gelu_backward(check_grad(dout, "dout", shape, dtype), cache)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


def activation_module(activation):
    if isinstance(activation, (ReLU, GELU)):
        return activation
    if activation == "relu":
        return ReLU()
    if activation == "gelu":
        return GELU()
    raise ValueError(f"activation must be 'relu' or 'gelu' (or an nt.ReLU/nt.GELU module), got {activation!r}")
