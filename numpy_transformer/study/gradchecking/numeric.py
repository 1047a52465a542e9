"""The numeric side of a gradcheck: central differences element by element (:func:`numerical_gradient`),
along one random direction (:func:`directional_derivative`, the fast mode), and their comparison with
the analytic gradient (one :class:`~numpy_transformer.study.gradchecking.result.TensorCheck` each)."""

from __future__ import annotations

from typing import Callable

import numpy as np

from .result import TensorCheck

__all__ = ["numerical_gradient", "directional_derivative", "DEFAULT_EPS", "DEFAULT_ATOL", "DEFAULT_RTOL"]

DEFAULT_EPS = 1e-6
DEFAULT_ATOL = 1e-8
DEFAULT_RTOL = 1e-6

def is_float_array(v):
    return isinstance(v, np.ndarray) and v.dtype.kind == "f"


def as_output(result):
    """``out`` or ``(out, ..., cache)`` -> the output array."""
    return result[0] if isinstance(result, tuple) else result


def float64_output(out, where):
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


def excluded_elements(exclude, name, shape):
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


def _analytic(check, kind, array, analytic):
    """The backward's gradient as float64 (None read as zeros, with a note), kept in ``check``; None
    (and ``check`` failed, with the reason) when its shape is not the array's."""
    if analytic is None:
        analytic = np.zeros(array.shape)
        check.note = "The backward returned no gradient (None); it was compared against zero."
    analytic = np.asarray(analytic)
    if analytic.shape != array.shape:
        check.passed = False
        check.note = (f"the analytic gradient has shape {analytic.shape} but the {kind} has shape "
                      f"{array.shape}" + (" (transposed?)" if analytic.shape == array.shape[::-1] else ""))
        check.max_abs_err = check.max_rel_err = float("inf")
        return None
    check.analytic_grad = analytic.astype(np.float64)
    return check.analytic_grad


def check_tensor(name, kind, array, analytic, numeric_fn, *, atol, rtol, max_elements, rng, exclude_mask):
    """Build one TensorCheck: validate ``analytic``, take finite differences, compare."""
    check = TensorCheck(name, kind, tuple(array.shape), total=int(array.size))
    analytic = _analytic(check, kind, array, analytic)
    if analytic is None:
        return check
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
    check.atol = atol
    check.max_rel_err = (check.max_abs_err / check.scale if check.scale > 0 else
                         (0.0 if check.max_abs_err == 0 else float("inf")))
    check.n_bad = int(np.sum(err > check.allowed))
    check.passed = check.n_bad == 0
    if not check.passed and check.checked == check.total:
        hint = _diagnose(analytic, numeric, check.allowed)
        check.note = (check.note + " " if check.note else "") + hint
    return check



def directional_derivative(evaluate: Callable[[], np.ndarray], array: np.ndarray, direction: np.ndarray,
                           dout: np.ndarray, eps: float = DEFAULT_EPS):
    """Central difference of ``L = sum(dout * evaluate())`` along ``direction``: two evaluations.

    ``array`` is moved **in place** to ``x + h u`` and ``x - h u`` (``h = eps * max(1, max|x|)``) and
    restored exactly. Returns ``(numeric, step)``: the difference quotient
    ``(L(x + h u) - L(x - h u)) / (2 h)`` and ``step = ((x + h u) - (x - h u)) / (2 h)``, the direction
    the rounded perturbation actually took (``u`` up to ~1e-10), along which the analytic ``v^T J u``
    is then taken so that both sides see the same direction.
    """
    orig = array.copy()
    finite = np.isfinite(orig)
    u = np.where(finite, direction, 0.0)
    h = eps * max(1.0, float(np.max(np.abs(orig[finite]), initial=0.0)))
    xp, xm = orig + h * u, orig - h * u
    dout = np.asarray(dout, dtype=np.float64)
    try:
        array[...] = xp
        fp = np.array(evaluate(), dtype=np.float64, copy=True)
        array[...] = xm
        fm = np.array(evaluate(), dtype=np.float64, copy=True)
    finally:
        array[...] = orig
    if fp.shape != dout.shape:
        raise ValueError(f"the output's shape changed under a perturbation: {fp.shape} vs {dout.shape}")
    with np.errstate(invalid="ignore"):
        diff = np.where(fp == fm, 0.0, fp - fm)                         # equal infinities cancel too
        step = np.where(finite, xp - xm, 0.0) / (2 * h)
    return float(np.sum(dout * diff)) / (2 * h), step


def check_tensor_fast(name, kind, array, analytic, evaluate, dout, *, eps, atol, rtol, rng, exclude_mask):
    """One TensorCheck of fast mode: ``v^T J u`` (``v = dout``) analytic against two evaluations.

    The analytic side is ``sum(grad * u)``: the backward already gave ``v^T J``. The scale is
    ``max(|numeric|, |analytic|, ||grad||_2)``; ``||grad||_2`` is the standard deviation of
    ``sum(grad * u)`` for ``u ~ N(0, 1)``, so a wrong gradient ``grad + e`` moves the analytic value by
    ``~||e||``: the check passes or fails on about ``||e|| / ||grad||`` against ``rtol``, the normwise
    relative error, as full mode.
    """
    check = TensorCheck(name, kind, tuple(array.shape), total=int(array.size), direction=True)
    analytic = _analytic(check, kind, array, analytic)
    if analytic is None:
        return check
    u = rng.standard_normal(array.shape)
    if exclude_mask is not None:
        u[exclude_mask] = 0.0
    included = (u != 0) & np.isfinite(array)
    check.checked = int(included.sum())
    if check.checked == 0:
        check.note = (check.note + " " if check.note else "") + "No element was checked."
        return check
    if not np.all(np.isfinite(analytic[included])):
        check.passed = False
        check.max_abs_err = check.max_rel_err = float("inf")
        check.n_bad = int(np.sum(~np.isfinite(analytic) & included))
        check.note = "The analytic gradient is not finite (NaN or inf)."
        return check
    numeric, step = directional_derivative(evaluate, array, u, dout, eps)
    value = float(np.sum(np.where(included, analytic, 0.0) * step))
    check.analytic, check.numeric = value, numeric
    check.max_abs_err = abs(value - numeric)
    check.scale = max(abs(numeric), abs(value), float(np.linalg.norm(np.where(included, analytic, 0.0))))
    check.allowed = atol + rtol * check.scale
    check.atol = atol
    check.max_rel_err = (check.max_abs_err / check.scale if check.scale > 0 else
                         (0.0 if check.max_abs_err == 0 else float("inf")))
    check.passed = check.max_abs_err <= check.allowed
    check.n_bad = 0 if check.passed else 1
    if not check.passed and not np.any(analytic):
        check.note = (check.note + " " if check.note else "") + \
            "Hint: the analytic gradient is all zero (not computed, or not accumulated?)."
    return check
