"""The activation modules :class:`ReLU`, :class:`GELU` and :class:`SiLU`, and :func:`activation_module`,
which turns a layer's ``activation`` argument (``"relu"``, ``"gelu"``, ``"silu"`` or one of these
modules) into a module.
"""

from __future__ import annotations

import numpy as np

from .. import functional as F
from ..utils.checks import check_float_array, check_grad
from .module import Module

__all__ = ["ReLU", "GELU", "SiLU", "activation_module", "ACTIVATIONS", "ACTIVATION_NAMES"]


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


class SiLU(Module):
    """SiLU (Swish), ``x * sigmoid(x)``, as ``torch.nn.SiLU`` (what ``activation="silu"`` builds).

    Parameters
    ----------
    inplace : bool
        As torch: the result is also written into the input array, which is returned. The cache keeps
        its own copy of the input for the backward, so (unlike torch) no memory is saved; accepted so
        that code written for torch runs unchanged.
    """

    def __init__(self, inplace=False):
        super().__init__()
        if not isinstance(inplace, (bool, np.bool_)):
            raise TypeError(f"inplace must be a bool, got {inplace!r}")
        self.inplace = bool(inplace)

    def forward(self, x):
        x = check_float_array(x, "input")
        if self.inplace and not x.flags.writeable:
            raise ValueError("input is read-only and SiLU(inplace=True) writes into it; pass a writeable "
                             "array or use inplace=False")
        out, cache = F.silu_forward(x.copy() if self.inplace else x)
        if self.inplace:
            x[...] = out
            out = x
        self._save((cache, out.shape, out.dtype))
        return out

    def backward(self, dout):
        cache, shape, dtype = self._take()
        return F.silu_backward(check_grad(dout, "dout", shape, dtype), cache)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


#: the activations by name: the one vocabulary of ``activation=`` (the layers, the models, the CLI)
ACTIVATIONS = {"relu": ReLU, "gelu": GELU, "silu": SiLU}
ACTIVATION_NAMES = tuple(ACTIVATIONS)          # the strings an ``activation`` argument accepts


def activation_module(activation):
    """``"relu"`` / ``"gelu"`` / ``"silu"`` -> a new module; an nt.ReLU/nt.GELU/nt.SiLU module as it is."""
    if isinstance(activation, tuple(ACTIVATIONS.values())):
        return activation
    if isinstance(activation, str) and activation in ACTIVATIONS:
        return ACTIVATIONS[activation]()
    *first, last = map(repr, ACTIVATION_NAMES)
    raise ValueError(f"activation must be {', '.join(first)} or {last} (or an nt.ReLU/nt.GELU/nt.SiLU module), "
                     f"got {activation!r}")
