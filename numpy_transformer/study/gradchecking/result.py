"""The report of a gradcheck: one :class:`TensorCheck` per tensor, the backward's hygiene checks
(:class:`HygieneCheck`: no in-place edits, a repeatable backward), and :class:`GradcheckResult`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Tuple

import numpy as np

__all__ = ["GradcheckError", "TensorCheck", "HygieneCheck", "GradcheckResult"]


class GradcheckError(AssertionError, RuntimeError):
    """A failed check: raised by ``raise_exception=True`` and by ``result.raise_if_failed()``.

    Its message is the full report. It is a ``RuntimeError``, as torch's
    ``torch.autograd.gradcheck.GradcheckError``, so ``except RuntimeError`` written for torch catches it,
    and an ``AssertionError``, so a failed check inside a test reads as a failed assertion. (The torch
    checker's ``TorchCheckError`` is a subclass: ``except nt.GradcheckError`` catches every checker's.)
    """


def check_flag(value, arg):
    """Refuse a non-bool flag (``raise_exception="no"`` would otherwise read as True)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{arg} must be True or False, got {value!r}")


def _fmt_index(index):
    return "(" + ", ".join(str(int(i)) for i in index) + ("," if len(index) == 1 else "") + ")"


@dataclass
class TensorCheck:
    """The comparison of one tensor's analytic gradient against its finite differences.

    Attributes
    ----------
    name : str
        The input's name, or the parameter's ``state_dict`` name.
    kind : {"input", "parameter"}
    shape : tuple
    checked, total : int
        Elements compared, out of the tensor's size (fewer with ``max_elements`` or ``exclude``, or
        when some entries are not finite).
    max_abs_err : float
        ``max |analytic - numeric|`` over the checked elements.
    max_rel_err : float
        ``max_abs_err / scale``: the error relative to the gradient's scale.
    scale : float
        ``max |numeric|`` over the checked elements.
    allowed : float
        ``atol + rtol * scale``: the largest absolute error that passes.
    index : tuple or None
        Index of the worst element.
    analytic, numeric : float
        The two values at ``index``.
    passed : bool
    n_bad : int
        Elements whose error exceeds ``allowed``.
    note : str
        Why the check failed when it is not a plain mismatch (wrong shape, None gradient, NaN) and a
        diagnosis hint when one fits (sign flipped, transposed, constant factor, all zero).
    analytic_grad, numeric_grad : ndarray
        The full gradients (``numeric_grad`` is NaN where an element was not checked; None in fast mode).
    direction : bool
        Fast mode: ``analytic`` and ``numeric`` are the two values of ``v^T J u`` (one random direction
        ``u``; ``index`` is None), ``scale`` is ``max(|numeric|, |analytic|, ||analytic gradient||)``.
    atol : float
        The absolute tolerance it was held to. When ``scale <= atol`` (:attr:`zero_gradient`: a gradient
        zero in exact arithmetic, as a key bias's) there is nothing to be relative to, and the check is
        in effect ``max_abs_err <= allowed ~ atol``; the report says so instead of a relative error.
    """

    name: str
    kind: str
    shape: tuple
    checked: int = 0
    total: int = 0
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    scale: float = 0.0
    allowed: float = 0.0
    index: Optional[tuple] = None
    analytic: float = float("nan")
    numeric: float = float("nan")
    passed: bool = True
    n_bad: int = 0
    note: str = ""
    analytic_grad: Optional[np.ndarray] = field(default=None, repr=False)
    numeric_grad: Optional[np.ndarray] = field(default=None, repr=False)
    direction: bool = False
    atol: float = 0.0

    @property
    def status(self):
        return "PASS" if self.passed else "FAIL"

    @property
    def zero_gradient(self):
        """True when the gradient is zero to within ``atol`` (``scale <= atol``): an absolute check."""
        return bool(self.checked) and self.scale <= self.atol

    def _errors(self, scale_name):
        if self.zero_gradient:
            return (f"abs err {self.max_abs_err:.3e}; the gradient is zero to within atol ({scale_name} "
                    f"{self.scale:.3e} <= {self.atol:g}), so the error is absolute: allowed {self.allowed:.3e}")
        return (f"abs err {self.max_abs_err:.3e}, {self.max_rel_err:.3e} x the {scale_name} {self.scale:.3e}; "
                f"allowed {self.allowed:.3e}")

    def describe(self):
        """One sentence: what was compared, and for a failure where and by how much."""
        what = f"gradient of {self.kind} {self.name!r} {self.shape}"
        if self.direction and self.checked:
            at = (f"v^T J u along a random u: analytic {self.analytic:.10g} vs numeric {self.numeric:.10g} "
                  f"({self._errors('scale')})")
            if self.passed:
                return f"PASS: {what}: {at}"
            return f"FAIL: {what} is wrong (fast mode: rerun with fast_mode=False for the worst element): {at}" + (
                f". {self.note}" if self.note else "")
        if self.index is None:
            return f"{self.status}: {what}: {self.note}"
        at = (f"worst at index {_fmt_index(self.index)}: analytic {self.analytic:.10g} vs numeric "
              f"{self.numeric:.10g} ({self._errors('gradient scale')})")
        if self.passed:
            return f"PASS: {what}: {at}"
        msg = f"FAIL: {what} is wrong: {self.n_bad} of {self.checked} checked elements out of tolerance; {at}"
        return msg + (f". {self.note}" if self.note else "")


@dataclass
class HygieneCheck:
    """A property of the backward itself, not of one gradient's values.

    ``name`` is ``"in-place"`` (the backward left its inputs, ``dout``, the forward's inputs and the cache
    as they were) or ``"second backward"`` (a second call with the same cache raised, or returned the
    same gradients bit for bit); ``detail`` says what was found (which array changed, and by how much).
    """

    name: str
    passed: bool
    detail: str

    @property
    def status(self):
        return "PASS" if self.passed else "FAIL"

    def describe(self):
        return f"{self.status}: {self.name}: {self.detail}"


@dataclass
class GradcheckResult:
    """All the :class:`TensorCheck` of one gradcheck, with a printable report.

    ``result.passed`` is True when every tensor passed, and the result itself is truthy exactly then
    (``assert gradcheck(...)``, ``if result:``); ``result["x"]`` is the check of ``x``;
    ``str(result)`` is the table; :meth:`raise_if_failed` raises :class:`GradcheckError` with it.
    ``result.hygiene`` holds the :class:`HygieneCheck` of the backward (in-place edits, second backward);
    they count towards ``passed``. ``fast_mode`` says which comparison ran.
    """

    checks: List[TensorCheck]
    eps: float
    atol: float
    rtol: float
    seed: object
    skipped: List[Tuple[str, str]] = field(default_factory=list)
    title: str = "gradcheck"
    hygiene: List[HygieneCheck] = field(default_factory=list)
    fast_mode: bool = False

    @property
    def passed(self):
        return all(c.passed for c in self.checks) and all(h.passed for h in self.hygiene)

    def __bool__(self):
        """``result.passed``: a failed check is falsy, so ``assert gradcheck(...)`` fails when it should."""
        return self.passed

    @property
    def failures(self):
        """The failed :class:`TensorCheck` (a failed hygiene check is in ``hygiene_failures``)."""
        return [c for c in self.checks if not c.passed]

    @property
    def hygiene_failures(self):
        return [h for h in self.hygiene if not h.passed]

    def __getitem__(self, name):
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(f"no gradient named {name!r} was checked; checked: {[c.name for c in self.checks]}")

    def __contains__(self, name):
        return any(c.name == name for c in self.checks)

    def table(self):
        head = (f"{'tensor':<28} {'kind':<9} {'shape':<14} {'checked':>11} {'max abs err':>11} "
                f"{'max rel err':>11} {'allowed':>9}  {'worst index':<14} {'analytic':>13} {'numeric':>13}  status")
        rows = [head, "-" * len(head)]
        for c in self.checks:
            idx = "v^T J u" if c.direction else "-" if c.index is None else _fmt_index(c.index)
            rows.append(f"{c.name:<28} {c.kind:<9} {str(c.shape):<14} {f'{c.checked}/{c.total}':>11} "
                        f"{c.max_abs_err:>11.3e} {c.max_rel_err:>11.3e} {c.allowed:>9.2e}  {idx:<14} "
                        f"{c.analytic:>13.6g} {c.numeric:>13.6g}  {c.status}")
        return "\n".join(rows)

    def __str__(self):
        if self.fast_mode:
            how = (f"fast mode: v^T J u along one random direction u per tensor, central differences in float64 "
                   f"of L = sum(dout * f(x)), eps={self.eps:g}, seed={self.seed}; a tensor passes when "
                   f"|analytic - numeric| <= {self.atol:g} + {self.rtol:g} * scale")
        else:
            how = (f"central differences in float64 of L = sum(dout * f(x)), eps={self.eps:g}, "
                   f"seed={self.seed}; a tensor passes when max|analytic - numeric| <= "
                   f"{self.atol:g} + {self.rtol:g} * max|numeric|")
        lines = [f"{self.title}: {how}", self.table()]
        for name, why in self.skipped:
            lines.append(f"not checked: {name} ({why})")
        for h in self.hygiene:
            lines.append(h.describe())
        for c in self.failures:
            lines.append(c.describe())
        bad = [repr(c.name) for c in self.failures] + [h.name for h in self.hygiene_failures]
        lines.append("PASSED" if self.passed else f"FAILED: {', '.join(bad)}")
        return "\n".join(lines)

    def raise_if_failed(self):
        """Raise :class:`GradcheckError` (an ``AssertionError``) with the report if any tensor failed."""
        if not self.passed:
            raise GradcheckError(str(self))
        return self


def conclude(res, verbose, raise_exception):
    """A checker's last step: print the report when ``verbose``, raise :class:`GradcheckError` with it when
    ``raise_exception`` and the check failed, else return it."""
    if verbose:
        print(res)
    if raise_exception and not res.passed:
        raise GradcheckError(str(res))
    return res
