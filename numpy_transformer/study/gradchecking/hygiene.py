"""Checks of the backward itself, beside its numbers: the float64 warning, in-place edits, a second call.

* :class:`GradcheckPrecisionWarning` — a floating-point input that is not float64. gradcheck converts
  it (finite differences in float32 are mostly rounding: with ``eps = 1e-6`` a float32 step is ~10
  units of the last place), so the check runs your code in float64 and says nothing of the float32
  path; ``torch.autograd.gradcheck`` warns in the same case.
* **in-place** — the backward must leave ``dout``, the forward's inputs, the module's parameters and
  the cache bit for bit as it found them: a backward that overwrites its cache (``x -= mean`` on a
  saved array, ``dout *= mask``) gives a wrong answer the next time the cache or the array is used.
  Every ndarray reachable from them (through tuples, NamedTuples, lists, dicts and dataclasses) is
  copied before the backward and compared after; the report names each array that changed.
* **second backward** — a second call with the same cache must either be refused (raise: the modules
  here consume their cache and raise ``RuntimeError``) or return the same gradients bit for bit (the
  functional pairs are pure). A different answer means the backward consumed or edited state.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np

from .result import HygieneCheck

__all__ = ["GradcheckPrecisionWarning", "warn_not_float64", "snapshot", "inplace_check", "repeat_check"]

_MAX_DEPTH = 8


class GradcheckPrecisionWarning(UserWarning):
    """A floating-point input (or weight) that is not float64: gradcheck converted it to float64."""


def warn_not_float64(named, where):
    """Warn (:class:`GradcheckPrecisionWarning`) about the float arrays of ``named`` that are not float64."""
    low = [(n, v.dtype) for n, v in named if isinstance(v, np.ndarray) and v.dtype.kind == "f"
           and v.dtype != np.float64]
    if low:
        listed = ", ".join(f"{n!r} ({d})" for n, d in low)
        warnings.warn(f"{where}: {listed} not float64; converted to float64 for the check (finite differences in "
                      "float32 are mostly rounding), so your code ran in float64, not in the dtype you gave. Pass "
                      "float64 arrays to silence this; compare float32 code with nt.check_against_torch(..., "
                      "dtype=np.float32) instead", GradcheckPrecisionWarning, stacklevel=3)


def _leaves(obj, path, seen, depth=0):
    """``(path, ndarray)`` for every array reachable from ``obj``."""
    if isinstance(obj, np.ndarray):
        if obj.dtype != object:
            yield path, obj
        return
    if depth >= _MAX_DEPTH or id(obj) in seen:
        return
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):              # a NamedTuple cache
        seen.add(id(obj))
        for name, v in zip(obj._fields, obj):
            yield from _leaves(v, f"{path}.{name}", seen, depth + 1)
    elif isinstance(obj, (tuple, list)):
        seen.add(id(obj))
        for i, v in enumerate(obj):
            yield from _leaves(v, f"{path}[{i}]", seen, depth + 1)
    elif isinstance(obj, dict):
        seen.add(id(obj))
        for k, v in obj.items():
            yield from _leaves(v, f"{path}[{k!r}]", seen, depth + 1)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        seen.add(id(obj))
        for f in dataclasses.fields(obj):
            yield from _leaves(getattr(obj, f.name), f"{path}.{f.name}", seen, depth + 1)


def snapshot(named):
    """``[(label, path, array, copy)]`` for every array reachable from the ``(label, object)`` pairs."""
    seen = set()
    return [(label, path, a, a.copy()) for label, obj in named for path, a in _leaves(obj, label, seen)]


def _value(x):
    return f"{float(x):.6g}" if np.asarray(x).dtype.kind in "fiub" else repr(x)


def _describe_change(path, now, before):
    if now.shape != before.shape:
        return f"{path} changed shape in place: {before.shape} -> {now.shape}"
    differs = (now != before) & ~((now != now) & (before != before)) if now.dtype.kind in "fc" else now != before
    n = int(np.count_nonzero(differs))
    where = tuple(int(i) for i in np.argwhere(differs)[0]) if now.ndim and n else ()
    msg = f"{path} {now.shape} was modified in place ({n} of {now.size} elements"
    if now.dtype.kind in "fc" and n:
        with np.errstate(invalid="ignore"):
            change = float(np.nanmax(np.abs(now.astype(np.float64) - before.astype(np.float64))))
        msg += f", by up to {change:.3e}"
    if where:
        msg += f"; first at {where}: {_value(before[where])} -> {_value(now[where])}"
    return msg + ")"


def inplace_check(snap, restore=()):
    """The :class:`HygieneCheck` "in-place" of a :func:`snapshot` taken before the backward.

    The changed arrays under the labels in ``restore`` get their old contents back (the finite
    differences that follow must see the original inputs and weights); a changed cache is left as the
    backward made it, so that a second backward sees what it would see.
    """
    moved = [(label, path, a, before) for label, path, a, before in snap
             if a.shape != before.shape or a.tobytes() != before.tobytes()]
    changed = [_describe_change(path, a, before) for _, path, a, before in moved]
    for label, _, a, before in moved:                       # after: one array may be reachable twice
        if label in restore and a.shape == before.shape:
            a[...] = before
    if not changed:
        return HygieneCheck("in-place", True, f"the backward left all {len(snap)} arrays it could reach (dout, "
                                              "inputs, parameters, cache) unchanged")
    return HygieneCheck("in-place", False, "; ".join(changed) + ". A backward must not write into its inputs or "
                        "cache (copy first: x = x - mean, not x -= mean)")


def repeat_check(first, second_call):
    """The :class:`HygieneCheck` "second backward": ``second_call()`` must raise, or return ``{name:
    grad}`` equal bit for bit to ``first`` (copies of the first call's gradients)."""
    try:
        second = second_call()
    except Exception as exc:                                     # refused: the cache was consumed
        return HygieneCheck("second backward", True, f"refused, as a consumed cache should be "
                                                     f"({type(exc).__name__}: {str(exc)[:120]})")
    diffs = []
    for name in sorted(set(first) | set(second), key=str):
        a, b = first.get(name), second.get(name)
        if a is None and b is None:
            continue
        if a is None or b is None:
            diffs.append(f"{name!r}: {'no gradient' if a is None else 'a gradient'} the first time, "
                         f"{'none' if b is None else 'one'} the second")
            continue
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            diffs.append(f"{name!r}: shape {a.shape} then {b.shape}")
        elif a.tobytes() != b.tobytes():
            with np.errstate(invalid="ignore"):
                d = float(np.nanmax(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.size else 0.0
            diffs.append(f"{name!r} differs by up to {d:.3e}")
    if diffs:
        return HygieneCheck("second backward", False, "a second backward with the same cache gave a different "
                            "answer: " + "; ".join(diffs) + " (the backward consumed or edited its cache: "
                            "refuse the second call, or leave the cache unchanged)")
    return HygieneCheck("second backward", True, "a second backward with the same cache gave the same "
                                                 "gradients bit for bit")
