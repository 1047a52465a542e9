"""Per-tensor comparison with a report of the max absolute and relative error of each named tensor.

Relative error is normwise: ``max|a - b| / max|b|`` (robust where individual entries are near zero).

The scale ``max|b|`` has a floor: by default 1e-4 times the largest scale among the tensors
compared in the same call (they come from one computation on O(1) inputs). A gradient that is
exactly zero in exact arithmetic (every query of a causal row seeing only key 0 gives dq = dk = 0)
comes out as rounding noise, ~1e-17; divided by its own noise scale it would read as a relative
error of O(1), bug or no bug. With the floor such a tensor is judged against its siblings'
magnitude, so 1e-10 still means "within rounding"; a tensor within 1e4 of its siblings is judged
on its own scale as before (an exact zero computed in a few dozen float64 operations on O(1)
numbers carries ~1e-16 of noise: 1e-12 against the floor). Pass ``floor=`` to set the absolute floor explicitly.
"""

from __future__ import annotations

import numpy as np

# float64 agreement is normally ~1e-15 to 1e-13; 1e-10 leaves room for long reductions, never for a bug.
TOL = {np.dtype(np.float64): 1e-10, np.dtype(np.float32): 1e-4}


def to_numpy(x):
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    return np.asarray(x)


SCALE_FLOOR = 1e-4             # relative to the largest tensor of the same comparison


def errors(ours, ref, floor=0.0):
    """(max absolute error, normwise relative error) of ``ours`` against ``ref``; the relative error
    divides by ``max(max|ref|, floor)``."""
    a, b = to_numpy(ours), to_numpy(ref)
    if a.shape != b.shape:
        raise AssertionError(f"shape mismatch: ours {a.shape}, reference {b.shape}")
    if a.size == 0:
        return 0.0, 0.0
    diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
    abs_err = float(np.max(diff))
    scale = max(float(np.max(np.abs(b))), floor)
    return abs_err, (abs_err / scale if scale > 0 else abs_err)


def _scale(x):
    x = to_numpy(x)
    return float(np.max(np.abs(np.nan_to_num(x.astype(np.float64), posinf=0, neginf=0)))) if x.size else 0.0


def assert_close(named_pairs, tol=None, dtype=np.float64, context="", floor=None):
    """Compare ``{name: (ours, reference)}``; on failure list every tensor's errors, worst first.

    ``floor``: the smallest scale a relative error divides by (default :data:`SCALE_FLOOR` times the
    largest reference in ``named_pairs``; see the module docstring).
    """
    tol = TOL[np.dtype(dtype)] if tol is None else tol
    if floor is None:
        floor = SCALE_FLOOR * max([_scale(ref) for ours, ref in named_pairs.values() if ref is not None] + [0.0])
    report = []
    for name, (ours, ref) in named_pairs.items():
        if ref is None and ours is None:
            continue
        if (ref is None) != (ours is None):
            raise AssertionError(f"{context}{name}: one side is None (ours {type(ours)}, ref {type(ref)})")
        a, b = to_numpy(ours), to_numpy(ref)
        nan_a, nan_b = np.isnan(a), np.isnan(b)
        if not np.array_equal(nan_a, nan_b):
            raise AssertionError(f"{context}{name}: NaN positions differ ({nan_a.sum()} ours, {nan_b.sum()} ref)")
        ae, re = errors(np.where(nan_a, 0, a), np.where(nan_b, 0, b), floor)
        report.append((re, name, ae))
    bad = [r for r in report if not r[0] <= tol]
    if bad:
        lines = "\n".join(f"  {name:<40} max abs {ae:.3e}  rel {re:.3e}"
                          for re, name, ae in sorted(report, reverse=True))
        raise AssertionError(f"{context}relative error above {tol:g}:\n{lines}")
    return report
