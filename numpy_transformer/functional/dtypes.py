"""``as_scalar``: Python numbers as NumPy scalars of an array's dtype, so float32 stays float32."""

from __future__ import annotations

import numpy as np

__all__ = ["as_scalar"]


def as_scalar(x, dtype):
    """A Python number as a NumPy scalar of ``dtype`` (a float64 scalar would promote float32)."""
    return np.dtype(dtype).type(x)
