"""Comparing a returned array with the reference, and saying what a wrong one looks like.

:func:`compare` grades one array (shape, finiteness, normwise relative error, the worst element);
:func:`hints` adds generic observations about a wrong array (off by a constant factor, transposed, a
gradient not summed over the broadcast axes, only float32-accurate, ...). The mistake-specific diagnosis
(matching a known wrong variant) lives in the worker.
"""

from __future__ import annotations

import math

import numpy as np

#: Normwise relative tolerance for a PASS: every case runs in float64, where a correct implementation
#: agrees to ~1e-15; 1e-8 leaves room for any reasonable order of operations but not for a wrong eps,
#: an approximation, or float32 arithmetic.
TOL = 1e-8

#: Absolute floor: differences this small are rounding noise for O(1) inputs (they matter only where the
#: exact value is 0 and both sides hold rounding residue, e.g. a gradient that cancels exactly).
ATOL = 1e-13

#: Looser tolerance for "the user's array equals this known-wrong variant's".
MATCH_TOL = 1e-6


class Unusable:
    """A returned value that the grading child could not hand back as an array: its problem's text."""

    def __init__(self, message):
        self.message = message

    def __repr__(self):
        return f"<{self.message}>"


def as_array(value):
    """``(ndarray, None)`` or ``(None, problem message)``."""
    if isinstance(value, Unusable):
        return None, value.message
    if value is None:
        return None, "returned None (a missing `return`?)"
    try:
        arr = np.asarray(value)
    except Exception as exc:  # noqa: BLE001 - arbitrary user objects
        return None, f"is not an array ({type(value).__name__}: {exc})"
    if arr.dtype == object:
        return None, f"is not a numeric array (got {type(value).__name__} of objects)"
    if arr.dtype.kind == "c":
        return None, "is complex"
    if arr.dtype.kind not in "fiub":
        return None, f"is not numeric (dtype {arr.dtype})"
    return arr, None


def _shape_str(shape):
    return "(" + ", ".join(str(n) for n in shape) + (",)" if len(shape) == 1 else ")")


def compare(got, ref, tol=TOL):
    """Grade ``got`` against ``ref``.

    Returns a dict: ``ok``, ``problem`` (None, "type", "shape", "nonfinite", "value"), ``rel`` (normwise
    relative error ``max|got - ref| / max|ref|``), ``abs``, ``index`` (worst element), ``got``/``expected``
    at that element, shapes, and a one-line ``message``.
    """
    ref = np.asarray(ref, dtype=np.float64)
    res = {"ok": False, "problem": None, "rel": None, "abs": None, "index": None, "got": None,
           "expected": None, "shape": list(ref.shape), "got_shape": None, "dtype": None, "message": ""}
    arr, problem = as_array(got)
    if arr is None:
        res.update(problem="type", message=problem)
        return res
    res["dtype"] = str(arr.dtype)
    if arr.shape != ref.shape and arr.size == 1 and ref.size == 1:
        arr = arr.reshape(ref.shape)
    res["got_shape"] = list(arr.shape)
    if arr.shape != ref.shape:
        res.update(problem="shape", message=f"shape {_shape_str(arr.shape)}, expected {_shape_str(ref.shape)}")
        return res
    a = arr.astype(np.float64)
    if a.size == 0:
        res.update(ok=True, rel=0.0, abs=0.0)
        return res
    bad = ~np.isfinite(a) & np.isfinite(ref)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        res.update(problem="nonfinite", index=list(idx), got=float(a[idx]), expected=float(ref[idx]),
                   rel=math.inf, abs=math.inf,
                   message=f"{int(bad.sum())} non-finite value(s) (NaN/inf) where the reference is finite, "
                           f"first at {list(idx)}")
        return res
    both = np.isfinite(ref)
    diff = np.where(both, np.abs(a - np.where(both, ref, 0.0)), 0.0)
    mismatch_nonfinite = ~both & ~(a == ref) & ~(np.isnan(a) & np.isnan(ref))
    if mismatch_nonfinite.any():
        diff = np.where(mismatch_nonfinite, np.inf, diff)
    flat = int(np.argmax(diff))
    idx = tuple(int(i) for i in np.unravel_index(flat, a.shape))
    abs_err = float(diff[idx])
    scale = float(np.max(np.abs(np.where(both, ref, 0.0)))) if both.any() else 0.0
    rel = abs_err / scale if scale > 0 else abs_err
    res.update(rel=rel, abs=abs_err, index=list(idx), got=float(a[idx]), expected=float(ref[idx]))
    if rel <= tol or abs_err <= ATOL:
        res["ok"] = True
        return res
    res.update(problem="value", message=f"max relative error {rel:.2e}")
    return res


def matches(got, other, tol=MATCH_TOL):
    """True when ``got`` equals ``other`` (same shape, same NaN/inf pattern, close finite values)."""
    arr, _ = as_array(got)
    if arr is None or other is None:
        return False
    other_arr, _ = as_array(other)
    if other_arr is None:
        return False
    if arr.shape != other_arr.shape:
        if arr.size == 1 and other_arr.size == 1:
            arr = arr.reshape(other_arr.shape)
        else:
            return False
    a, b = arr.astype(np.float64), other_arr.astype(np.float64)
    fa, fb = np.isfinite(a), np.isfinite(b)
    if not np.array_equal(fa, fb):
        return False
    if not np.array_equal(np.where(fa, 0, a), np.where(fb, 0, b), equal_nan=True):
        return False
    if not fa.any():
        return True
    diff = float(np.max(np.abs(a[fa] - b[fa])))
    scale = float(np.max(np.abs(b[fb])))
    return diff <= tol * scale if scale > 0 else diff <= tol


def _close(a, b, tol=1e-7):
    scale = float(np.max(np.abs(b))) if b.size else 0.0
    return a.shape == b.shape and float(np.max(np.abs(a - b), initial=0.0)) <= tol * max(scale, 1e-300)


def _reciprocal(name):
    """The name of 1/``name``: "1/(1-p)" -> "1-p", "sqrt(Dh)" -> "1/sqrt(Dh)", "1-p" -> "1/(1-p)"."""
    if name.startswith("1/"):
        inner = name[2:]
        return inner[1:-1] if inner.startswith("(") and inner.endswith(")") else inner
    return f"1/{name}" if name.replace("_", "").isalnum() or name.endswith(")") else f"1/({name})"


def _name_factor(c, factors):
    """A readable name for the constant ``c`` (e.g. "1/sqrt(Dh) (= 0.5)"), or None."""
    cands = [(-1.0, "-1 (sign flipped)"), (2.0, "2"), (0.5, "1/2")]
    for name, v in factors.items():
        if v and v not in (1, 1.0):
            v, inv = float(v), _reciprocal(name)
            cands.append((v, f"{name} (= {v:g})"))
            cands.append((1.0 / v, f"{inv} (= {1.0 / v:g})"))
            cands.append((-v, f"-{name}"))
            cands.append((-1.0 / v, f"-{inv}"))
    for v, name in cands:
        if abs(c - v) <= 1e-6 * max(1.0, abs(v)):
            return name
    return None


def hints(got, ref, factors=None):
    """Generic observations about a wrong array: a list of ``(key, message)``.

    ``key`` is stable across cases (to count how often it happens); ``message`` is for this case.
    """
    factors = factors or {}
    out = []
    arr, problem = as_array(got)
    ref = np.asarray(ref, dtype=np.float64)
    if arr is None:
        return out
    a = arr.astype(np.float64)
    if a.shape != ref.shape:
        if a.ndim >= 2 and a.shape[:-2] + a.shape[-2:][::-1] == ref.shape:
            if _close(np.swapaxes(a, -1, -2), ref):
                out.append(("transposed", "the right values, transposed (last two axes swapped)"))
            else:
                out.append(("transposed-shape", "the shape is the expected one transposed"))
        elif a.ndim > ref.ndim and a.shape[a.ndim - ref.ndim:] == ref.shape:
            lead = tuple(range(a.ndim - ref.ndim))
            if _close(a.sum(axis=lead), ref):
                out.append(("sum-leading", "extra leading axes: summing them gives the right answer (a "
                                           "parameter's gradient sums over every axis it was broadcast along)"))
            else:
                out.append(("extra-axes", "extra leading axes: a parameter's gradient has the parameter's shape "
                                          "(sum over every broadcast axis)"))
        elif a.size == ref.size:
            if _close(a.reshape(ref.shape), ref):
                out.append(("reshape", "the right values in the wrong shape (keepdims, or a missing reshape?)"))
            else:
                out.append(("same-size", "the right number of elements in the wrong layout "
                                         "(a reshape where a transpose was needed?)"))
        return out
    if not np.all(np.isfinite(a)):
        out.append(("nonfinite", "NaN/inf appeared: an exp overflowed, a log of 0, or an all -inf softmax row "
                                 "(subtract the max; guard rows with every key masked)"))
        return out
    rr = float(np.sum(ref * ref))
    if rr > 0 and ref.size >= 3:          # a "constant factor" between 1- or 2-element arrays means nothing
        if not np.any(a):
            out.append(("zeros", "all zeros"))
            return out
        c = float(np.sum(a * ref) / rr)
        resid = float(np.max(np.abs(a - c * ref)))
        if resid <= 1e-6 * float(np.max(np.abs(ref))) and abs(c - 1.0) > 1e-6:
            name = _name_factor(c, factors)
            key = f"factor:{name.split(' (')[0] if name else 'other'}"
            out.append((key, f"off by a constant factor {c:.6g}" + (f" = {name}" if name else "")))
            return out
    if a.ndim >= 2 and a.shape[-1] == a.shape[-2] and _close(np.swapaxes(a, -1, -2), ref):
        out.append(("transposed", "the right values, transposed (last two axes swapped)"))
        return out
    err = float(np.max(np.abs(a - ref)))
    scale = float(np.max(np.abs(ref))) or 1.0
    if err <= 1e-5 * scale:
        if arr.dtype == np.float32:
            out.append(("float32", "agrees only to float32 precision: the result is float32 (keep float64)"))
        else:
            out.append(("close", f"close but not equal (rel err {err / scale:.1e}): a small term is off "
                                 "(an eps, a constant, an approximation, or float32 arithmetic somewhere)"))
    bad = np.abs(a - ref) > 1e-6 * scale
    if a.ndim >= 1 and bad.any() and not bad.all():
        frac = float(bad.mean())
        out.append(("partial", f"{frac:.0%} of the elements are wrong, the rest are right"))
    return out
