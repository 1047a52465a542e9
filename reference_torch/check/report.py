"""The report of ``nt.check_against_torch``: one :class:`Comparison` per tensor, :class:`TorchCheckResult`.

Errors are normwise: a tensor passes when ``max|ours - torch| <= atol + rtol * scale`` with ``scale =
max(max|torch|, floor)``. The floor is :data:`SCALE_FLOOR` (1e-4) times the largest ``max|torch|`` of the
whole check: a gradient that is zero in exact arithmetic comes out as rounding noise (~1e-17) on both
sides, and divided by its own noise it would read as an O(1) relative error, bug or no bug; against the
floor it is judged on the scale of its siblings (as ``tests/_compare.py`` does).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

import numpy as np

from numpy_transformer.study.gradchecking import GradcheckError
from numpy_transformer.utils.text import fit

__all__ = ["TOL", "SCALE_FLOOR", "Comparison", "TorchCheckResult", "TorchCheckError", "compare"]

# Normwise relative tolerance per dtype (why these values: reference_torch.check.user's docstring).
TOL = {np.dtype(np.float64): 1e-10, np.dtype(np.float32): 1e-4}
SCALE_FLOOR = 1e-4


class TorchCheckError(GradcheckError):
    """A failed check against torch: raised by ``raise_exception=True`` and by
    :meth:`TorchCheckResult.raise_if_failed`; its message is the full report. A
    :class:`~numpy_transformer.study.gradchecking.GradcheckError` (so an ``AssertionError`` and a ``RuntimeError``):
    ``except nt.GradcheckError`` catches every checker's failure."""


def _fmt_index(index):
    return "(" + ", ".join(str(int(i)) for i in index) + ("," if len(index) == 1 else "") + ")"


@dataclass
class Comparison:
    """Ours against torch's for one tensor: the output (``kind="output"``), an input's gradient
    (``"input"``) or a parameter's gradient (``"parameter"``).

    ``max_abs_err`` is ``max|ours - torch|``, ``rel_err`` that over ``scale`` (``max(max|torch|,
    floor)``), ``allowed`` is ``atol + rtol * scale``; ``index``, ``ours``, ``torch`` are the worst
    element and its two values; ``note`` says why a failure is not a plain mismatch (shape, dtype,
    None, NaN) and gives a hint when a simple pattern explains it (sign, transpose, factor, offset).
    """

    name: str
    kind: str
    shape: tuple
    max_abs_err: float = 0.0
    rel_err: float = 0.0
    scale: float = 0.0
    allowed: float = 0.0
    index: Optional[tuple] = None
    ours: float = float("nan")
    torch: float = float("nan")
    passed: bool = True
    note: str = ""

    @property
    def status(self):
        return "PASS" if self.passed else "FAIL"

    @property
    def what(self):
        return "output" if self.kind == "output" else f"gradient of {self.kind} {self.name!r}"

    def describe(self):
        what = f"{self.what} {self.shape}"
        if self.index is None:
            return f"{self.status}: {what}: {self.note}"
        at = (f"worst at {_fmt_index(self.index)}: ours {self.ours:.10g} vs torch {self.torch:.10g} (abs err "
              f"{self.max_abs_err:.3e}, relative {self.rel_err:.3e}; allowed {self.allowed:.3e})")
        return f"{self.status}: {what}{' is wrong' if not self.passed else ''}: {at}" + (
            f". {self.note}" if self.note else "")


def _hint(a, b, tol):
    """Why ``a`` (ours) differs from ``b`` (torch's), when a simple pattern explains it."""
    if not np.any(a) and np.any(b):
        return "Hint: ours is all zero (not computed, or not accumulated?)."
    if np.max(np.abs(a + b)) <= tol:
        return "Hint: ours has the wrong sign."
    if a.ndim == 2 and a.shape[0] == a.shape[1] > 1 and np.max(np.abs(a.T - b)) <= tol:
        return "Hint: ours looks transposed."
    d = a - b
    if d.size > 1 and np.ptp(d) <= tol:
        return f"Hint: ours - torch is the constant {float(np.mean(d)):.6g} everywhere (an offset)."
    bb = float(np.sum(b * b))
    if bb > 0:
        c = float(np.sum(a * b)) / bb
        if np.max(np.abs(a - c * b)) <= tol:
            return f"Hint: ours is torch's times {c:.6g} (a missing or extra factor)."
    return ""


def compare(name, kind, ours, ref, *, dtype, rtol, atol, floor):
    """One :class:`Comparison` of the arrays ``ours`` and ``ref`` (either may be None: no gradient)."""
    notes = []
    shape = tuple(np.shape(ref if ref is not None else ours))
    if ours is None:
        ours = np.zeros(shape)
        notes.append("ours: no gradient (None); compared as zero.")
    if ref is None:
        ref = np.zeros(np.shape(ours))
        notes.append("torch: no gradient (the input does not reach its output); compared as zero.")
    ours, ref = np.asarray(ours), np.asarray(ref)
    c = Comparison(name, kind, tuple(ref.shape))
    if ours.shape != ref.shape:
        c.passed, c.max_abs_err, c.rel_err = False, float("inf"), float("inf")
        c.note = (f"ours has shape {ours.shape}, torch's {ref.shape}"
                  + (" (transposed?)" if ours.shape == ref.shape[::-1] else ""))
        return c
    if ours.dtype.kind == "f" and ours.dtype != dtype and not any("no gradient" in n for n in notes):
        c.passed = False
        notes.append(f"ours has dtype {ours.dtype}, expected {np.dtype(dtype)} (a {np.dtype(dtype)} computation "
                     "must stay in that dtype).")
    a, b = ours.astype(np.float64), ref.astype(np.float64)
    fa, fb = np.isfinite(a), np.isfinite(b)
    same_nonfinite = ~fa & ~fb & ((a == b) | (np.isnan(a) & np.isnan(b)))
    if np.any((~fa | ~fb) & ~same_nonfinite):
        bad = tuple(int(i) for i in np.argwhere((~fa | ~fb) & ~same_nonfinite)[0])
        c.passed, c.max_abs_err, c.rel_err = False, float("inf"), float("inf")
        c.index, c.ours, c.torch = bad, float(a[bad]), float(b[bad])
        c.note = " ".join(notes + ["NaN/inf where the other side is finite (or a different one)."])
        return c
    both = fa & fb
    if not np.any(both):
        c.note = " ".join(notes + ["no finite element to compare."])
        return c
    diff = np.where(both, np.abs(a - np.where(both, b, 0.0)), -1.0)
    worst = np.unravel_index(int(np.argmax(diff)), a.shape)
    c.index = tuple(int(i) for i in worst)
    c.ours, c.torch = float(a[worst]), float(b[worst])
    c.max_abs_err = float(diff[worst])
    c.scale = max(float(np.max(np.abs(b[both]))), floor)
    c.allowed = atol + rtol * c.scale
    c.rel_err = c.max_abs_err / c.scale if c.scale > 0 else (0.0 if c.max_abs_err == 0 else float("inf"))
    if c.max_abs_err > c.allowed:
        c.passed = False
        if np.all(both):
            notes.append(_hint(a, b, c.allowed))
    c.note = " ".join(n for n in notes if n)
    return c


@dataclass
class TorchCheckResult:
    """Every :class:`Comparison` of one check against torch, with a verdict and a printable report.

    ``result.ok`` (also ``result.passed``) is True when every tensor passed, and the result itself is
    truthy exactly then (``assert nt.check_against_torch(...)``, ``if result:``); ``result["dx"]`` is one
    tensor's comparison; ``str(result)`` is the table (a notebook shows it as the cell's value);
    :meth:`raise_if_failed` raises :class:`TorchCheckError` with it.
    """

    checks: List[Comparison]
    dtype: np.dtype
    rtol: float
    atol: float
    seed: object
    title: str = "check_against_torch"
    torch_version: str = ""
    notes: List[str] = field(default_factory=list)

    @property
    def ok(self):
        return bool(self.checks) and all(c.passed for c in self.checks)

    passed = ok

    def __bool__(self):
        """``result.ok``: a failed check is falsy, so ``assert check_against_torch(...)`` fails when it should."""
        return self.ok

    @property
    def failures(self):
        return [c for c in self.checks if not c.passed]

    def __getitem__(self, name):
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(f"no tensor named {name!r} was compared; compared: {[c.name for c in self.checks]}")

    def __contains__(self, name):
        return any(c.name == name for c in self.checks)

    def table(self):
        """One row per tensor, 100 columns (a name longer than its column gets a line of its own)."""
        head = (f"{'tensor':<24} {'shape':<13} {'abs err':>9} {'rel err':>8}  {'worst at':<11} {'ours':>10} "
                f"{'torch':>10}  status")
        rows = [head, "-" * len(head)]
        for c in self.checks:
            idx = "-" if c.index is None else _fmt_index(c.index)
            name = c.name
            if len(name) > 24:
                rows.append(name)
                name = ""
            rows.append(f"{name:<24} {str(c.shape):<13} {c.max_abs_err:>9.2e} {c.rel_err:>8.1e}  {idx:<11} "
                        f"{c.ours:>10.4g} {c.torch:>10.4g}  {c.status}")
        return "\n".join(rows)

    def __str__(self):
        lines = [fit(f"{self.title}: ours against torch {self.torch_version} autograd in {self.dtype}, the same "
                     f"random upstream gradient (seed {self.seed}); a tensor passes when max|ours - torch| <= "
                     f"{self.atol:g} + {self.rtol:g} * max|torch|"), self.table()]
        lines += [fit(n) for n in self.notes]
        lines += [fit(c.describe()) for c in self.failures]
        lines.append("PASSED" if self.ok else
                     fit("FAILED: " + (", ".join(c.what for c in self.failures) or "nothing was compared")))
        return "\n".join(lines)

    def __repr__(self):
        worst = max(self.checks, key=lambda c: c.rel_err, default=None)
        tail = f", worst relative error {worst.rel_err:.2e} ({worst.name})" if worst is not None else ""
        return (f"<TorchCheckResult {self.title}: {'ok' if self.ok else 'FAILED'}, {len(self.checks)} tensors in "
                f"{self.dtype}{tail}>")

    def _repr_pretty_(self, p, cycle):                 # IPython / Jupyter: the full report as the cell's value
        p.text(repr(self) if cycle else str(self))

    def raise_if_failed(self):
        """Raise :class:`TorchCheckError` (an ``AssertionError``) with the report if any tensor failed."""
        if not self.ok:
            raise TorchCheckError(str(self))
        return self
