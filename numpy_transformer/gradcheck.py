"""Finite-difference gradient checking: central differences in float64, no torch needed.

Use it on any forward/backward pair (the functional ops here, or your own) and on any module of
:mod:`numpy_transformer.nn`. The check works on the scalar

    ``L(x) = sum(dout * f(x))``

with ``dout`` a random upstream gradient (seeded): the gradient a backward returns for ``dout`` is
exactly ``dL/dx``. A random ``dout`` (never all ones) matters: with ``dout = 1`` a softmax backward
that forgets its row-sum term still passes, because the softmax rows sum to a constant.

For every checked element ``x_i`` the numeric derivative is the central difference

    ``(L(x + h e_i) - L(x - h e_i)) / (2 h)``,   ``h = eps * max(1, |x_i|)``

computed as ``sum(dout * (f(x + h e_i) - f(x - h e_i))) / (2 h)`` so that outputs that do not depend
on ``x_i`` cancel exactly instead of adding round-off. Its error is ``O(h**2)`` truncation plus
``O(u |f| / h)`` round-off (``u = 2.2e-16``): about 1e-9 relative for smooth ops at ``eps = 1e-6``.

Tolerance. A tensor passes when ``max_i |analytic_i - numeric_i| <= atol + rtol * max_i |numeric_i|``:
the error is measured against the *scale of the gradient* (elements of a gradient that are near zero
would make element-wise relative errors meaningless). The defaults, ``rtol = 1e-6`` and
``atol = 1e-8``, leave a margin of 100x to 1000x over the finite-difference noise of smooth ops, while
a real bug (a missing term, a transposed weight, a forgotten accumulation) gives an error of the order
of the gradient itself.

Examples
--------
Your own forward/backward pair (``forward(**inputs) -> out`` or ``(out, cache)``,
``backward(dout, cache) -> grads`` in the order of the inputs, ``None`` for a constant):

>>> import numpy as np
>>> from numpy_transformer import gradcheck
>>> def forward(x, w):
...     y = np.tanh(x @ w)
...     return y, (x, w, y)
>>> def backward(dout, cache):
...     x, w, y = cache
...     dz = dout * (1 - y * y)
...     return dz @ w.T, x.T @ dz
>>> rng = np.random.default_rng(0)
>>> result = gradcheck(forward, backward, {"x": rng.standard_normal((3, 4)),
...                                        "w": rng.standard_normal((4, 2))}, verbose=False)
>>> result.passed
True

A module: every input gradient and every parameter gradient is checked.

>>> import numpy_transformer as nt
>>> layer = nt.LayerNorm(5, dtype=np.float64)
>>> gradcheck_module(layer, rng.standard_normal((2, 5)), verbose=False).passed
True
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Tuple

import numpy as np

__all__ = ["gradcheck", "gradcheck_module", "GradcheckResult", "TensorCheck", "GradcheckError",
           "numerical_gradient", "DEFAULT_EPS", "DEFAULT_ATOL", "DEFAULT_RTOL"]

DEFAULT_EPS = 1e-6
DEFAULT_ATOL = 1e-8
DEFAULT_RTOL = 1e-6


class GradcheckError(AssertionError):
    """Raised by :meth:`GradcheckResult.raise_if_failed`; its message is the full report."""


# --------------------------------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------------------------------

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
        The full gradients (``numeric_grad`` is NaN where an element was not checked).
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

    @property
    def status(self):
        return "PASS" if self.passed else "FAIL"

    def describe(self):
        """One sentence: what was compared, and for a failure where and by how much."""
        what = f"gradient of {self.kind} {self.name!r} {self.shape}"
        if self.index is None:
            return f"{self.status}: {what}: {self.note}"
        at = (f"worst at index {_fmt_index(self.index)}: analytic {self.analytic:.10g} vs numeric "
              f"{self.numeric:.10g} (abs err {self.max_abs_err:.3e}, {self.max_rel_err:.3e} x the gradient "
              f"scale {self.scale:.3e}; allowed {self.allowed:.3e})")
        if self.passed:
            return f"PASS: {what}: {at}"
        msg = f"FAIL: {what} is wrong: {self.n_bad} of {self.checked} checked elements out of tolerance; {at}"
        return msg + (f". {self.note}" if self.note else "")


@dataclass
class GradcheckResult:
    """All the :class:`TensorCheck` of one gradcheck, with a printable report.

    ``result.passed`` is True when every tensor passed; ``result["x"]`` is the check of ``x``;
    ``str(result)`` is the table; :meth:`raise_if_failed` raises :class:`GradcheckError` with it.
    """

    checks: List[TensorCheck]
    eps: float
    atol: float
    rtol: float
    seed: object
    skipped: List[Tuple[str, str]] = field(default_factory=list)
    title: str = "gradcheck"

    @property
    def passed(self):
        return all(c.passed for c in self.checks)

    @property
    def failures(self):
        return [c for c in self.checks if not c.passed]

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
            idx = "-" if c.index is None else _fmt_index(c.index)
            rows.append(f"{c.name:<28} {c.kind:<9} {str(c.shape):<14} {f'{c.checked}/{c.total}':>11} "
                        f"{c.max_abs_err:>11.3e} {c.max_rel_err:>11.3e} {c.allowed:>9.2e}  {idx:<14} "
                        f"{c.analytic:>13.6g} {c.numeric:>13.6g}  {c.status}")
        return "\n".join(rows)

    def __str__(self):
        lines = [f"{self.title}: central differences in float64 of L = sum(dout * f(x)), eps={self.eps:g}, "
                 f"seed={self.seed}; a tensor passes when max|analytic - numeric| <= "
                 f"{self.atol:g} + {self.rtol:g} * max|numeric|", self.table()]
        for name, why in self.skipped:
            lines.append(f"not checked: {name} ({why})")
        for c in self.failures:
            lines.append(c.describe())
        lines.append("PASSED" if self.passed else
                     f"FAILED: {', '.join(repr(c.name) for c in self.failures)}")
        return "\n".join(lines)

    def raise_if_failed(self):
        """Raise :class:`GradcheckError` (an ``AssertionError``) with the report if any tensor failed."""
        if not self.passed:
            raise GradcheckError(str(self))
        return self


# --------------------------------------------------------------------------------------------------
# the numeric derivative
# --------------------------------------------------------------------------------------------------

def _as_output(result):
    """``out`` or ``(out, ..., cache)`` -> the output array."""
    return result[0] if isinstance(result, tuple) else result


def _float64_output(out, where):
    if not isinstance(out, np.ndarray) or out.dtype.kind != "f":
        raise TypeError(f"{where} must return a floating-point ndarray (or a tuple whose first element is "
                        f"one), got {type(out).__name__}"
                        + (f" of dtype {out.dtype}" if isinstance(out, np.ndarray) else ""))
    if out.dtype != np.float64:
        raise TypeError(f"{where} returned {out.dtype}; finite differences need float64 end to end (with "
                        "eps=1e-6 a float32 difference is mostly rounding). Give float64 inputs and weights "
                        "(modules: dtype=np.float64)")
    return out


def numerical_gradient(evaluate: Callable[[], np.ndarray], array: np.ndarray, dout: np.ndarray,
                       eps: float = DEFAULT_EPS, indices=None):
    """Central-difference gradient of ``L = sum(dout * evaluate())`` with respect to ``array``.

    ``array`` is perturbed **in place**, one element at a time, and each element is restored exactly
    (even if ``evaluate`` raises), so ``evaluate`` must read ``array`` (a parameter's ``.data``, or the
    very array passed to the forward).

    Parameters
    ----------
    evaluate : callable
        ``evaluate() -> ndarray`` of ``dout``'s shape, computed from the current contents of ``array``.
    array : ndarray of float64
    dout : ndarray
    eps : float
        Step ``h = eps * max(1, |x_i|)``.
    indices : sequence of int, optional
        Flat indices to differentiate (all by default).

    Returns
    -------
    ndarray
        Shaped like ``array``; NaN where an element was not differentiated (not in ``indices``, or not
        finite: a masked ``-inf`` score has no finite difference).
    """
    numeric = np.full(array.shape, np.nan)
    dout = np.asarray(dout, dtype=np.float64)
    flat_indices = range(array.size) if indices is None else indices
    for flat in flat_indices:
        idx = np.unravel_index(int(flat), array.shape)
        orig = array[idx]
        if not np.isfinite(orig):
            continue
        h = eps * max(1.0, abs(float(orig)))
        xp, xm = orig + h, orig - h
        try:
            array[idx] = xp
            # copies: an output may alias the input (an identity dropout returns its input), and the
            # input is changed again right after each evaluation
            fp = np.array(evaluate(), dtype=np.float64, copy=True)
            array[idx] = xm
            fm = np.array(evaluate(), dtype=np.float64, copy=True)
        finally:
            array[idx] = orig
        if fp.shape != dout.shape:
            raise ValueError(f"the output's shape changed under a perturbation: {fp.shape} vs {dout.shape}")
        with np.errstate(invalid="ignore"):
            diff = np.where(fp == fm, 0.0, fp - fm)                     # equal infinities cancel too
        numeric[idx] = np.sum(dout * diff) / (float(xp) - float(xm))
    return numeric


def _select(size, max_elements, rng, must=None):
    """Flat indices to check: all, or ``max_elements`` of them at random (always including ``must``)."""
    if max_elements is None or size <= max_elements:
        return np.arange(size)
    chosen = rng.choice(size, size=max_elements, replace=False)
    if must is not None and must not in chosen:
        chosen[0] = must
    return np.sort(chosen)


def _exclude_mask(exclude, name, shape):
    if exclude is None or name not in exclude:
        return None
    spec = exclude[name]
    mask = np.zeros(shape, dtype=bool)
    spec = np.asarray(spec)
    if spec.dtype == np.bool_:
        mask[...] = np.broadcast_to(spec, shape)
    else:
        mask[spec] = True                       # an index (e.g. a row number) or an index array
    return mask


def _diagnose(a, n, tol):
    """A hint for a failed gradient, when a simple pattern explains it."""
    if not np.any(a):
        return "Hint: the analytic gradient is all zero (not computed, or not accumulated?)."
    if np.max(np.abs(a + n)) <= tol:
        return "Hint: the analytic gradient has the wrong sign."
    if a.ndim == 2 and a.shape[0] == a.shape[1] and a.shape[0] > 1 and np.max(np.abs(a.T - n)) <= tol:
        return "Hint: the analytic gradient looks transposed."
    nn = float(np.sum(n * n))
    if nn > 0:
        c = float(np.sum(a * n)) / nn
        if np.max(np.abs(a - c * n)) <= tol:
            return f"Hint: the analytic gradient is the numeric one times {c:.6g} (a missing or extra factor)."
    return ""


def _check(name, kind, array, analytic, numeric_fn, *, atol, rtol, max_elements, rng, exclude_mask):
    """Build one TensorCheck: validate ``analytic``, take finite differences, compare."""
    check = TensorCheck(name, kind, tuple(array.shape), total=int(array.size))
    if analytic is None:
        analytic = np.zeros(array.shape)
        check.note = "The backward returned no gradient (None); it was compared against zero."
    analytic = np.asarray(analytic)
    if analytic.shape != array.shape:
        check.passed = False
        check.note = (f"the analytic gradient has shape {analytic.shape} but the {kind} has shape "
                      f"{array.shape}" + (" (transposed?)" if analytic.shape == array.shape[::-1] else ""))
        check.max_abs_err = check.max_rel_err = float("inf")
        return check
    analytic = analytic.astype(np.float64)
    check.analytic_grad = analytic
    must = int(np.argmax(np.abs(np.nan_to_num(analytic)))) if analytic.size else None
    indices = _select(array.size, max_elements, rng, must)
    if exclude_mask is not None:
        indices = indices[~exclude_mask.reshape(-1)[indices]]
    numeric = numeric_fn(indices)
    check.numeric_grad = numeric
    checked = ~np.isnan(numeric)
    check.checked = int(checked.sum())
    if check.checked == 0:
        check.note = (check.note + " " if check.note else "") + "No element was checked."
        return check
    if not np.all(np.isfinite(analytic[checked])):
        bad = np.argwhere(~np.isfinite(analytic) & checked)[0]
        check.passed = False
        check.index = tuple(int(i) for i in bad)
        check.analytic, check.numeric = float(analytic[check.index]), float(numeric[check.index])
        check.max_abs_err = check.max_rel_err = float("inf")
        check.n_bad = int(np.sum(~np.isfinite(analytic) & checked))
        check.note = "The analytic gradient is not finite (NaN or inf)."
        return check
    err = np.where(checked, np.abs(analytic - np.where(checked, numeric, 0.0)), -1.0)
    worst = np.unravel_index(int(np.argmax(err)), array.shape)
    check.index = tuple(int(i) for i in worst)
    check.analytic, check.numeric = float(analytic[worst]), float(numeric[worst])
    check.max_abs_err = float(err[worst])
    check.scale = float(np.max(np.abs(numeric[checked])))
    check.allowed = atol + rtol * check.scale
    check.max_rel_err = (check.max_abs_err / check.scale if check.scale > 0 else
                         (0.0 if check.max_abs_err == 0 else float("inf")))
    check.n_bad = int(np.sum(err > check.allowed))
    check.passed = check.n_bad == 0
    if not check.passed and check.checked == check.total:
        hint = _diagnose(analytic, numeric, check.allowed)
        check.note = (check.note + " " if check.note else "") + hint
    return check


# --------------------------------------------------------------------------------------------------
# gradcheck of a forward/backward pair
# --------------------------------------------------------------------------------------------------

def _is_float_array(v):
    return isinstance(v, np.ndarray) and v.dtype.kind == "f"


def _match_grads(grads, names, differentiable, wrt):
    """The backward's return value as ``{name: grad}``.

    A dict is taken by name. A tuple/list (or a single array) is matched, in this order of preference, to
    all the inputs, to ``wrt``, to the floating-point inputs, or (when shorter) to the leading inputs;
    surplus trailing ``None`` entries (``(dx, dw, None)`` for a forward called without bias) are ignored.
    """
    if isinstance(grads, Mapping):
        unknown = [k for k in grads if k not in names]
        if unknown:
            raise ValueError(f"backward_fn returned gradients for unknown inputs {unknown}; inputs are {names}")
        return dict(grads)
    if not isinstance(grads, (tuple, list)):
        grads = (grads,)
    grads = list(grads)
    while len(grads) > len(names) and grads[-1] is None:
        grads.pop()
    for targets in (names, wrt, differentiable):
        if targets is not None and len(grads) == len(targets):
            return dict(zip(targets, grads))
    if len(grads) < len(names):
        return dict(zip(names, grads))
    raise ValueError(f"backward_fn returned {len(grads)} gradients, but there are {len(names)} inputs {names} "
                     f"({len(differentiable)} floating-point: {differentiable}); return one per input (None "
                     "for a constant), one per floating-point input, or a dict name -> gradient")


def gradcheck(forward_fn, backward_fn, inputs, *, eps=DEFAULT_EPS, atol=DEFAULT_ATOL, rtol=DEFAULT_RTOL,
              seed=0, names=None, wrt=None, max_elements=None, exclude=None, verbose=True):
    """Check a hand-written backward against central finite differences (float64).

    Parameters
    ----------
    forward_fn : callable
        ``forward_fn(**inputs)`` (dict ``inputs``) or ``forward_fn(*inputs)`` (list) returning the output
        array, or a tuple whose first element is the output and whose last element is the cache handed
        to ``backward_fn`` (``(out, cache)`` as every op in :mod:`numpy_transformer.functional`).
    backward_fn : callable
        ``backward_fn(dout, cache)`` (``cache`` is None when the forward returned a bare array) returning
        the gradients: a tuple/list with one entry per input (or one per ``wrt`` name, or one per
        floating-point input, or one for each of the leading inputs), or a dict ``name -> gradient``, or a
        single array. ``None`` marks an input with no gradient.
    inputs : dict or list
        ``name -> value``. Floating-point arrays are copied to float64 and are the candidates for
        differentiation; anything else (integer ids, bool masks, numbers) is passed through unchanged.
    eps : float
        Relative step: ``h = eps * max(1, |x_i|)``.
    atol, rtol : float
        A tensor passes when ``max|analytic - numeric| <= atol + rtol * max|numeric|``.
    seed : int or numpy.random.Generator
        For the upstream gradient ``dout ~ N(0, 1)`` and the ``max_elements`` subset.
    names : list of str, optional
        Names of list ``inputs`` (default ``input0``, ``input1``...).
    wrt : list of str, optional
        The inputs to check. Default: every floating-point input for which ``backward_fn`` returned a
        gradient (a None one is then reported as not checked). A name listed here is always checked, a
        None gradient counting as zero, so a backward that forgets a gradient fails.
    max_elements : int, optional
        Check at most this many elements per input, drawn at random (always including the element with
        the largest analytic gradient). Default: all.
    exclude : dict, optional
        ``name -> index, index array or bool mask`` of elements not to check: where the gradient is by
        design not the derivative (an embedding's ``padding_idx`` row).
    verbose : bool
        Print the report.

    Returns
    -------
    GradcheckResult
        ``.passed``, per-input :class:`TensorCheck` (``result["x"]``), ``str(result)`` the table,
        ``.raise_if_failed()``.

    Raises
    ------
    TypeError
        The forward's output is not float64.
    ValueError
        The gradients returned cannot be matched to the inputs, or ``wrt`` names a non-float input.

    Examples
    --------
    >>> import numpy as np
    >>> from numpy_transformer import functional as F
    >>> rng = np.random.default_rng(0)
    >>> res = gradcheck(F.layer_norm_forward, F.layer_norm_backward,
    ...                 {"x": rng.standard_normal((2, 3, 5)), "weight": rng.standard_normal(5),
    ...                  "bias": rng.standard_normal(5)}, verbose=False)
    >>> res.passed, res["x"].max_rel_err < 1e-6
    (True, True)
    """
    if isinstance(inputs, Mapping):
        names = list(inputs)
        positional = False
        values = list(inputs.values())
    else:
        values = list(inputs)
        names = list(names) if names is not None else [f"input{i}" for i in range(len(values))]
        if len(names) != len(values):
            raise ValueError(f"names has {len(names)} entries but there are {len(values)} inputs")
        positional = True
    values = [np.array(v, dtype=np.float64, copy=True) if _is_float_array(v) else v for v in values]
    arrays = dict(zip(names, values))
    differentiable = [n for n in names if _is_float_array(arrays[n])]
    if wrt is not None:
        wrt = [wrt] if isinstance(wrt, str) else list(wrt)
        bad = [n for n in wrt if n not in differentiable]
        if bad:
            raise ValueError(f"wrt names {bad} that are not floating-point inputs; floating-point inputs: "
                             f"{differentiable}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)

    def call():
        return forward_fn(*values) if positional else forward_fn(**arrays)

    result = call()
    out = _float64_output(_as_output(result), "forward_fn")
    cache = result[-1] if isinstance(result, tuple) and len(result) >= 2 else None
    dout = rng.standard_normal(out.shape)
    grads = _match_grads(backward_fn(dout.copy(), cache), names, differentiable, wrt)

    def evaluate():
        return _float64_output(_as_output(call()), "forward_fn")

    checks, skipped = [], []
    targets = wrt if wrt is not None else [n for n in differentiable if grads.get(n) is not None]
    for n in names:
        if n not in targets:
            why = ("not floating point" if n not in differentiable else
                   "not in wrt" if wrt is not None else "the backward returned None")
            skipped.append((n, why))
    for n in targets:
        array = arrays[n]
        checks.append(_check(n, "input", array, grads.get(n),
                             lambda idx, a=array: numerical_gradient(evaluate, a, dout, eps, idx),
                             atol=atol, rtol=rtol, max_elements=max_elements, rng=rng,
                             exclude_mask=_exclude_mask(exclude, n, array.shape)))
    res = GradcheckResult(checks, eps, atol, rtol, seed if not isinstance(seed, np.random.Generator) else
                          "Generator", skipped, title=f"gradcheck {getattr(forward_fn, '__name__', 'forward')}")
    if verbose:
        print(res)
    return res


# --------------------------------------------------------------------------------------------------
# gradcheck of a module
# --------------------------------------------------------------------------------------------------

def _input_names(module, n):
    try:
        params = [p.name for p in inspect.signature(module.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return params[:n] if len(params) >= n else [f"input{i}" for i in range(n)]


def _active_dropouts(module):
    """Names of sub-modules that would draw a dropout mask in the module's current mode."""
    found = []
    for name, m in module.named_modules():
        if not m.training:
            continue
        p = getattr(m, "p", None) if type(m).__name__ == "Dropout" else getattr(m, "dropout", None)
        if isinstance(p, float) and p > 0:
            found.append(name or type(module).__name__)
    return found


def gradcheck_module(module, *inputs, forward_kwargs=None, input_names=None, params=True, eval_mode=True,
                     eps=DEFAULT_EPS, atol=DEFAULT_ATOL, rtol=DEFAULT_RTOL, seed=0, max_elements=None,
                     exclude=None, verbose=True):
    """Check a module's ``backward``: the gradient of every float input and of every parameter.

    ``module(*inputs, **forward_kwargs)`` is the forward (for a tuple output, as
    ``MultiheadAttention``'s ``(out, weights)``, the first element); ``module.backward(dout)`` must return
    the input gradient(s) (one array, a tuple in the order of ``inputs``, or None) and accumulate
    ``p.grad``. Parameters are perturbed in place (``p.data``) and restored exactly.

    The module is left as it was found: parameters, ``p.grad`` (cleared before the backward, since
    modules accumulate, and restored after), training flags and cached forward state.

    Parameters
    ----------
    module : numpy_transformer.nn.Module
        With float64 parameters (``dtype=np.float64``).
    *inputs : ndarray
        Float inputs are copied to float64 and checked; integer ids and other values pass unchanged.
    forward_kwargs : dict, optional
        Constant keyword arguments of the forward (masks, ``is_causal``...).
    input_names : list of str, optional
        Default: the names of ``module.forward``'s positional parameters (``x``, ``query``...).
    params : bool or list of str
        Check every parameter (True), none (False), or these ``named_parameters`` names.
    eval_mode : bool
        Run in eval mode (dropout off), the default: finite differences need a deterministic forward.
        With False, the module must have no active dropout (p = 0) or ValueError is raised.
    eps, atol, rtol, seed, max_elements, verbose : see :func:`gradcheck`
    exclude : dict, optional
        ``name -> index / index array / bool mask`` of elements not to check, by input or parameter
        name, e.g. ``{"weight": padding_idx}`` for an ``Embedding`` whose padding row is frozen.

    Returns
    -------
    GradcheckResult

    Examples
    --------
    >>> import numpy as np
    >>> import numpy_transformer as nt
    >>> layer = nt.TransformerEncoderLayer(8, 2, dim_feedforward=16, dtype=np.float64, seed=0)
    >>> x = np.random.default_rng(1).standard_normal((2, 3, 8))
    >>> res = gradcheck_module(layer, x, forward_kwargs={"is_causal": True}, verbose=False)
    >>> res.passed, len(res.checks)        # the input and the 12 parameters
    (True, 13)
    """
    forward_kwargs = dict(forward_kwargs or {})
    all_params = list(module.named_parameters())
    not64 = [(n, p.dtype) for n, p in all_params if p.dtype != np.float64]
    if not64:
        raise TypeError(f"gradcheck_module needs a float64 module (finite differences in float32 are mostly "
                        f"rounding); {not64[0][0]!r} is {not64[0][1]}. Build it with dtype=np.float64, or load "
                        "its state_dict into a float64 copy")
    if isinstance(params, bool):
        chosen = all_params if params else []
    else:
        wanted = list(params)
        known = {n for n, _ in all_params}
        unknown = [n for n in wanted if n not in known]
        if unknown:
            raise ValueError(f"params names {unknown} that the module does not have; it has {sorted(known)}")
        chosen = [(n, p) for n, p in all_params if n in wanted]
    values = [np.array(v, dtype=np.float64, copy=True) if _is_float_array(v) else v for v in inputs]
    names = list(input_names) if input_names is not None else _input_names(module, len(values))
    if len(names) != len(values):
        raise ValueError(f"input_names has {len(names)} entries but there are {len(values)} inputs")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)

    modules = list(module.modules())
    saved_flags = [(m, m.training, list(m._caches)) for m in modules]
    saved_grads = [(p, None if p.grad is None else p.grad.copy()) for _, p in all_params]
    try:
        if eval_mode:
            module.eval()
        else:
            active = _active_dropouts(module)
            if active:
                raise ValueError(f"dropout is active in {active}: finite differences need a deterministic "
                                 "forward; use eval_mode=True or dropout probability 0")

        def evaluate():
            return _float64_output(_as_output(module(*values, **forward_kwargs)), f"{type(module).__name__}")

        out = evaluate()
        dout = rng.standard_normal(out.shape)
        module.zero_grad()
        dx = module.backward(dout.copy())
        float_pos = [i for i, v in enumerate(values) if _is_float_array(v)]
        if dx is None:
            in_grads = [None] * len(values)
        elif isinstance(dx, np.ndarray):
            if len(float_pos) > 1:
                raise ValueError(f"{type(module).__name__}.backward returned one array but the forward had "
                                 f"{len(float_pos)} float inputs")
            in_grads = [None] * len(values)
            if float_pos:
                in_grads[float_pos[0]] = dx
        else:
            dx = list(dx)
            if len(dx) == len(values):
                in_grads = dx
            elif len(dx) == len(float_pos):
                in_grads = [None] * len(values)
                for i, g in zip(float_pos, dx):
                    in_grads[i] = g
            else:
                raise ValueError(f"{type(module).__name__}.backward returned {len(dx)} gradients for "
                                 f"{len(values)} inputs")
        param_grads = {n: (None if p.grad is None else p.grad.copy()) for n, p in chosen}

        checks, skipped = [], []
        for name, value, g in zip(names, values, in_grads):
            if not _is_float_array(value):
                skipped.append((name, "not floating point"))
                continue
            checks.append(_check(name, "input", value, g,
                                 lambda idx, a=value: numerical_gradient(evaluate, a, dout, eps, idx),
                                 atol=atol, rtol=rtol, max_elements=max_elements, rng=rng,
                                 exclude_mask=_exclude_mask(exclude, name, value.shape)))
        for name, p in chosen:
            check = _check(name, "parameter", p.data, param_grads[name],
                           lambda idx, a=p.data: numerical_gradient(evaluate, a, dout, eps, idx),
                           atol=atol, rtol=rtol, max_elements=max_elements, rng=rng,
                           exclude_mask=_exclude_mask(exclude, name, p.data.shape))
            if param_grads[name] is None:
                check.note = check.note.replace("The backward returned no gradient (None)",
                                                "p.grad is None after backward (never accumulated)")
            checks.append(check)
    finally:
        for m, training, caches in saved_flags:
            object.__setattr__(m, "training", training)
            m._caches[:] = caches
        for p, g in saved_grads:
            p.grad = g
    res = GradcheckResult(checks, eps, atol, rtol, seed if not isinstance(seed, np.random.Generator) else
                          "Generator", skipped, title=f"gradcheck_module {type(module).__name__}")
    if verbose:
        print(res)
    return res
