"""Readings of a wrong array that holds the right numbers in the wrong place or type, in the judge.

Each is a claim about the candidate's array ``got`` that the numbers verify exactly (to
:data:`.readings.VERIFY`) before it is made, whatever the op:

* **the results returned in the wrong order**: ``got`` has another returned array's shape and equals
  that array's expected value (``return dW, dx`` for ``return dx, dW``): the shapes differ, so the
  comparison only says "wrong shape"; this says which result it is;
* **the right values in another order along an axis**: ``got`` is the expected array reversed along
  one axis (slopes assigned to the heads back to front, a sequence read right to left);
* **a transpose-then-reshape where a reshape belongs (or the reverse)**: ``got`` is the expected
  array with its axes permuted and then reshaped back to its shape (heads merged without the
  transpose back);
* **an integer dtype**: a gradient or table allocated with an integer dtype (``np.zeros_like(ids)``)
  truncates every value it receives.
"""

from __future__ import annotations

from itertools import permutations

import numpy as np

#: the relative error below which a reading holds (the same as :data:`.readings.VERIFY`)
VERIFY = 1e-9


def _rel(a, b):
    scale = float(np.max(np.abs(b))) if b.size else 0.0
    return float(np.max(np.abs(a - b), initial=0.0)) / (scale or 1.0)


def returned_swapped(name, got, refs):
    """``got`` (of a shape other than ``name``'s) equals the expected value of another returned array
    of its shape: the reading, or None."""
    for other, r in refs.items():
        if other == name or not isinstance(r, np.ndarray) or r.dtype.kind not in "fiu":
            continue
        r = np.asarray(r, dtype=np.float64)
        if r.shape == got.shape and r.size and np.any(r) and _rel(got, r) <= VERIFY:
            return (f"swapped:{other}", f"holds what {other} should be, in {other}'s shape (verified to "
                                        f"{VERIFY:.0e}): the results are returned in the wrong order (swap "
                                        f"them in the return statement)")
    return None


def reversed_axis(got, ref):
    """``got`` is ``ref`` reversed along one axis: the reading, or None."""
    for axis, n in enumerate(ref.shape):
        if n < 2:
            continue
        flipped = np.flip(ref, axis)
        if np.array_equal(flipped, ref):
            continue                      # symmetric along this axis: reversing it changes nothing
        if _rel(got, flipped) <= VERIFY:
            return (f"reversed:{axis}", f"the right values in reverse order along axis {axis} (verified to "
                                        f"{VERIFY:.0e}): the items along that axis are assigned back to front "
                                        f"(an index reversed, [::-1] where none belongs, or its absence)")
    return None


def permuted_reshape(got, ref):
    """``got == ref.transpose(p).reshape(ref.shape)`` for a permutation ``p`` of the axes other than the
    last two's swap (the layout of a reshape where a transpose belongs; with equal lengths the reshape
    does nothing and it is an axis swap): the reading, or None."""
    if ref.ndim < 2 or ref.ndim > 4:
        return None
    same = tuple(range(ref.ndim))
    last_two = same[:-2] + same[-2:][::-1]
    for p in permutations(same):
        if p in (same, last_two):
            continue                      # the identity, and the plain transpose (its own reading)
        alt = np.transpose(ref, p).reshape(ref.shape)
        if not np.array_equal(alt, ref) and _rel(got, alt) <= VERIFY:
            return (f"layout:{p}", f"the right values in the wrong layout (verified to {VERIFY:.0e}): the "
                                   f"expected array with its axes reordered {p} and reshaped back, a "
                                   f"reshape that needed a transpose first (or a transpose too many)")
    return None


def integer_dtype(arr, ref):
    """``arr`` has an integer dtype where the expected array is floating point: the reading, or None."""
    if arr.dtype.kind in "iu" and np.asarray(ref).dtype.kind == "f":
        return ("dtype:int", f"the result has the integer dtype {arr.dtype} where float64 is expected: an "
                             f"array allocated with an integer dtype (np.zeros_like of integer ids, or "
                             f"dtype=int) truncates every value written into it")
    return None
