"""``gradcheck``: a forward/backward pair against central finite differences (full or fast mode)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .hygiene import inplace_check, repeat_check, snapshot, warn_not_float64
from .numeric import (
    DEFAULT_ATOL,
    DEFAULT_EPS,
    DEFAULT_RTOL,
    as_output,
    check_tensor,
    check_tensor_fast,
    excluded_elements,
    float64_output,
    is_float_array,
    numerical_gradient,
)
from .result import GradcheckResult, check_flag, conclude
from .upstream import checker_rng, upstream_gradient

__all__ = ["gradcheck"]


def match_grads(grads, names, differentiable, wrt):
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
              seed=0, names=None, wrt=None, max_elements=None, exclude=None, fast_mode=False,
              check_inplace=True, check_repeat=True, verbose=True, raise_exception=False):
    """Check a hand-written backward against central finite differences (float64).

    Besides the gradients' values it checks the backward itself: that it modifies nothing in place
    (``dout``, the inputs, the cache) and that a second call with the same cache is refused or returns
    the same gradients (see :mod:`numpy_transformer.study.gradchecking.hygiene`). A floating-point input that is
    not float64 is converted, with a :class:`~numpy_transformer.study.gradchecking.GradcheckPrecisionWarning`.

    **Fast mode** (``fast_mode=True``, as ``torch.autograd.gradcheck(fast_mode=True)``) compares one
    number per input instead of one per element: ``v^T J u`` for the random upstream gradient ``v =
    dout`` and a random direction ``u ~ N(0, 1)`` of the input's shape. The analytic side is
    ``sum(grad * u)`` (the backward already gave ``v^T J``), the numeric side the central difference
    of ``L = sum(v * f(x))`` along ``u``: one backward and two forward evaluations per input, against
    two per *element* in full mode. Why it finds a wrong Jacobian with probability 1: if the backward
    computes ``v^T A`` with ``A != J``, the error ``v^T (A - J) u`` is a nonzero polynomial in the
    entries of ``u`` and ``v`` (bilinear), and the zero set of a nonzero polynomial has measure zero,
    so continuous random ``u``, ``v`` land on it with probability 0. For Gaussian ``u`` its size is
    ``~||v^T (A - J)||``, compared with ``rtol`` times ``||grad||`` (the spread of ``sum(grad * u)``):
    about the normwise relative error full mode tests. Fast mode says *that* a gradient is wrong,
    not *where*: rerun with ``fast_mode=False`` for the worst element.

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
        For the upstream gradient ``dout ~ N(0, 1)``, the fast mode's directions and the
        ``max_elements`` subset. An int names the checker's own stream,
        ``SeedSequence(seed, spawn_key=(UPSTREAM_SPAWN_KEY,))``
        (:func:`~numpy_transformer.study.gradchecking.upstream.upstream_gradient`), never the one of
        ``np.random.default_rng(seed)`` your inputs may come from; and a ``dout`` parallel to an input
        of the output's shape is drawn again. (Were ``dout`` equal to ``x``, a backward using ``x`` in
        place of ``dout`` would pass.)
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
    fast_mode : bool
        Compare ``v^T J u`` along one random direction per input (above) instead of every element;
        ``max_elements`` is then unused.
    check_inplace, check_repeat : bool
        Run the in-place and second-backward checks (``result.hygiene``; a failure fails the result).
    verbose : bool
        Print the report.
    raise_exception : bool
        Raise :class:`~numpy_transformer.study.gradchecking.GradcheckError` (with the report) when the check
        fails. The default is False, unlike ``torch.autograd.gradcheck`` (whose default is True and
        which returns a bare ``True``): the result is a report to read, and a failed one is falsy, so
        ``assert gradcheck(...)`` fails too.

    Returns
    -------
    GradcheckResult
        ``.passed`` (``bool(result)`` is the same), per-input :class:`TensorCheck` (``result["x"]``),
        ``str(result)`` the table, ``.raise_if_failed()``.

    Raises
    ------
    GradcheckError
        With ``raise_exception=True``, when a gradient or a hygiene check failed.
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
    check_flag(raise_exception, "raise_exception")
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
    warn_not_float64(zip(names, values), "gradcheck")
    values = [np.array(v, dtype=np.float64, copy=True) if is_float_array(v) else v for v in values]
    arrays = dict(zip(names, values))
    differentiable = [n for n in names if is_float_array(arrays[n])]
    if wrt is not None:
        wrt = [wrt] if isinstance(wrt, str) else list(wrt)
        bad = [n for n in wrt if n not in differentiable]
        if bad:
            raise ValueError(f"wrt names {bad} that are not floating-point inputs; floating-point inputs: "
                             f"{differentiable}")
    rng = checker_rng(seed)

    def call():
        return forward_fn(*values) if positional else forward_fn(**arrays)

    result = call()
    out = float64_output(as_output(result), "forward_fn")
    cache = result[-1] if isinstance(result, tuple) and len(result) >= 2 else None
    dout = upstream_gradient(out.shape, rng=rng, avoid=[out, *arrays.values()])
    dout_given = dout.copy()
    snap = snapshot([("dout", dout_given), *arrays.items(), ("cache", cache)]) if check_inplace else None
    grads = match_grads(backward_fn(dout_given, cache), names, differentiable, wrt)
    hygiene = [inplace_check(snap, restore=names)] if check_inplace else []    # the inputs restored for what follows
    if check_repeat:
        first = {n: None if g is None else np.array(g, copy=True) for n, g in grads.items()}
        hygiene.append(repeat_check(first, lambda: match_grads(backward_fn(dout.copy(), cache), names,
                                                                differentiable, wrt)))

    def evaluate():
        return float64_output(as_output(call()), "forward_fn")

    checks, skipped = [], []
    targets = wrt if wrt is not None else [n for n in differentiable if grads.get(n) is not None]
    for n in names:
        if n not in targets:
            why = ("not floating point" if n not in differentiable else
                   "not in wrt" if wrt is not None else "the backward returned None")
            skipped.append((n, why))
    for n in targets:
        array, mask = arrays[n], excluded_elements(exclude, n, arrays[n].shape)
        if fast_mode:
            checks.append(check_tensor_fast(n, "input", array, grads.get(n), evaluate, dout, eps=eps, atol=atol,
                                      rtol=rtol, rng=rng, exclude_mask=mask))
            continue
        checks.append(check_tensor(n, "input", array, grads.get(n),
                             lambda idx, a=array: numerical_gradient(evaluate, a, dout, eps, idx),
                             atol=atol, rtol=rtol, max_elements=max_elements, rng=rng, exclude_mask=mask))
    res = GradcheckResult(checks, eps, atol, rtol, seed if not isinstance(seed, np.random.Generator) else
                          "Generator", skipped, title=f"gradcheck {getattr(forward_fn, '__name__', 'forward')}",
                          hygiene=hygiene, fast_mode=bool(fast_mode))
    return conclude(res, verbose, raise_exception)
