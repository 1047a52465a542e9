"""The rotary position embedding as a module: :class:`RotaryEmbedding` (no parameters)."""

from __future__ import annotations

import numpy as np

from .. import functional as F
from ..utils.checks import check_float_array, check_grad, check_number, check_positive_int
from .module import Module

__all__ = ["RotaryEmbedding"]


class RotaryEmbedding(Module):
    """Rotary position embedding of queries or keys (x of shape (..., S, dim)): each feature pair at
    position p turned by ``p * base ** (-2i / dim)`` (see :func:`numpy_transformer.functional.rope_forward`).

    torch.nn has no such module; the oracle is ``reference_torch.nn.rotary.RotaryEmbedding`` (Hugging Face
    Llama's rotate_half formula, Meta's complex product for ``interleaved=True``). It has no parameters
    and takes float32 or float64 input as it comes. Apply it to q and k after their projections, never
    to v.

    Parameters
    ----------
    dim : int
        Dh, the head width (even).
    base : float
        Frequency base (10000.0 in the paper; Llama 3 uses 500000.0).
    interleaved : bool
        False: pairs (i, i + dim/2) ("rotate half", GPT-NeoX / HF Llama); True: pairs (2i, 2i+1).
    """

    def __init__(self, dim, base=10000.0, interleaved=False):
        super().__init__()
        self.dim = check_positive_int(dim, "dim")
        if self.dim % 2:
            raise ValueError(f"dim must be even (rotary embeddings rotate feature pairs), got {dim!r}")
        self.base = check_number(base, "base", low=0.0, low_open=True)
        if not isinstance(interleaved, (bool, np.bool_)):
            raise TypeError(f"interleaved must be True or False, got {interleaved!r}")
        self.interleaved = bool(interleaved)

    def forward(self, x, positions=None):
        """x (..., S, dim), positions (S,) or broadcastable to x.shape[:-1] (default arange(S)) -> (..., S, dim)."""
        x = check_float_array(x, "x")
        if x.ndim < 2 or x.shape[-1] != self.dim:
            raise ValueError(f"x must have shape (..., S, {self.dim}) (dim = {self.dim}), got shape {x.shape}")
        out, cache = F.rope_forward(x, positions, self.base, self.interleaved)
        self._save((cache, out.shape, out.dtype))
        return out

    def backward(self, dout):
        """dx: dout rotated by -theta (see :func:`numpy_transformer.functional.rope_backward`)."""
        cache, shape, dtype = self._take()
        return F.rope_backward(check_grad(dout, "dout", shape, dtype), cache)

    def extra_repr(self):
        return f"dim={self.dim}, base={self.base:g}, interleaved={self.interleaved}"
