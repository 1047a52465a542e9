"""Per-tensor comparison with a report of the max absolute and relative error of each named tensor.

Relative error is normwise: ``max|a - b| / max|b|`` (robust where individual entries are near zero).
"""

from __future__ import annotations

import numpy as np

# float64 agreement is normally ~1e-15 to 1e-13; 1e-10 leaves room for long reductions, never for a bug.
TOL = {np.dtype(np.float64): 1e-10, np.dtype(np.float32): 1e-4}


def to_numpy(x):
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def errors(ours, ref):
    """(max absolute error, normwise relative error) of ``ours`` against ``ref``."""
    a, b = to_numpy(ours), to_numpy(ref)
    if a.shape != b.shape:
        raise AssertionError(f"shape mismatch: ours {a.shape}, reference {b.shape}")
    if a.size == 0:
        return 0.0, 0.0
    diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
    abs_err = float(np.max(diff))
    scale = float(np.max(np.abs(b)))
    return abs_err, (abs_err / scale if scale > 0 else abs_err)


def assert_close(named_pairs, tol=None, dtype=np.float64, context=""):
    """Compare ``{name: (ours, reference)}``; on failure list every tensor's errors, worst first."""
    tol = TOL[np.dtype(dtype)] if tol is None else tol
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
        ae, re = errors(np.where(nan_a, 0, a), np.where(nan_b, 0, b))
        report.append((re, name, ae))
    bad = [r for r in report if not r[0] <= tol]
    if bad:
        lines = "\n".join(f"  {name:<40} max abs {ae:.3e}  rel {re:.3e}" for re, name, ae in sorted(report, reverse=True))
        raise AssertionError(f"{context}relative error above {tol:g}:\n{lines}")
    return report
