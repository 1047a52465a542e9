"""The three layouts torch's sequence modules accept, and the one their maths runs in.

``torch.nn.MultiheadAttention``, ``TransformerEncoderLayer`` and ``TransformerDecoderLayer`` take a
sequence **batch-first** (B, S, D), **sequence-first** (S, B, D) (``batch_first=False``, torch's
default), or **unbatched** (S, D): one batch element, batch-first whatever ``batch_first`` says. Inside,
every module computes batch-first. :class:`BatchLayout` records which layout the caller used, brings
the inputs in and the outputs (and the upstream gradient) back out, so each module writes that
conversion once instead of once per argument and per direction.

Every conversion is a view (``x[None]``, ``x[0]``, ``np.swapaxes(x, 0, 1)``): no data is copied.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..utils.checks import check_grad

__all__ = ["BatchLayout"]


class BatchLayout(NamedTuple):
    """How a caller laid out a module's sequences, and the way in and out of batch-first.

    Attributes
    ----------
    unbatched : bool
        The inputs had no batch dimension: (S, D), worked on as (1, S, D).
    batch_first : bool
        The module's ``batch_first``: (B, S, D) when True, (S, B, D) when False (ignored when
        ``unbatched``, as torch ignores it).
    """

    unbatched: bool
    batch_first: bool

    @classmethod
    def of(cls, x: np.ndarray, batch_first: bool) -> BatchLayout:
        """The layout of ``x``, a validated (S, D) or 3-dimensional sequence of a module with
        ``batch_first``."""
        return cls(x.ndim == 2, bool(batch_first))

    def to_batch_first(self, *arrays: np.ndarray):
        """Sequences in this layout as (B, S, ...) (unbatched: B = 1).

        An array passed several times (self-attention's ``query``, ``key`` and ``value``) comes back as
        one array, so the callee still recognises it (``query is key``). Returns the array for one
        argument, a tuple for several.
        """
        done = {}
        for a in arrays:
            if id(a) not in done:
                done[id(a)] = a[None] if self.unbatched else a if self.batch_first else np.swapaxes(a, 0, 1)
        out = tuple(done[id(a)] for a in arrays)
        return out[0] if len(out) == 1 else out

    def add_batch(self, *arrays):
        """Arrays whose first dimension is the batch in every batched layout (key padding masks (B, T))
        as (B, ...): a leading axis of 1 when unbatched; None stays None. Returns one or a tuple, as
        :meth:`to_batch_first`."""
        out = tuple(a if a is None or not self.unbatched else a[None] for a in arrays)
        return out[0] if len(out) == 1 else out

    def drop_batch(self, *arrays):
        """The inverse of :meth:`add_batch` (attention weights (B, S, T) back to (S, T) when unbatched)."""
        out = tuple(a if a is None or not self.unbatched else a[0] for a in arrays)
        return out[0] if len(out) == 1 else out

    def from_batch_first(self, *arrays: np.ndarray):
        """Batch-first results (B, S, ...) back in this layout: the inverse of :meth:`to_batch_first`.
        Returns one or a tuple, as :meth:`to_batch_first`."""
        out = tuple(a[0] if self.unbatched else a if self.batch_first else np.swapaxes(a, 0, 1) for a in arrays)
        return out[0] if len(out) == 1 else out

    def grad_to_batch_first(self, dout, shape: tuple, dtype) -> np.ndarray:
        """The upstream gradient ``dout``, checked against the forward output in this layout (its
        batch-first shape is ``shape``, (B, S, D)), as (B, S, D).

        The error names ``dout`` and the shape the caller saw (the output's, in the caller's layout).
        """
        b, s = shape[0], shape[1]
        seen = shape[1:] if self.unbatched else shape if self.batch_first else (s, b) + tuple(shape[2:])
        return self.to_batch_first(check_grad(dout, "dout", seen, dtype))
