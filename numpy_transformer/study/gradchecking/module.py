"""``gradcheck_module``: every float input and every parameter of a module against finite differences."""

from __future__ import annotations

import inspect

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

__all__ = ["gradcheck_module", "module_input_grads", "default_input_names"]


def default_input_names(module, n):
    try:
        params = [p.name for p in inspect.signature(module.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return params[:n] if len(params) >= n else [f"input{i}" for i in range(n)]


def active_dropouts(module):
    """Names of sub-modules that would draw a dropout mask in the module's current mode."""
    found = []
    for name, m in module.named_modules():
        if not m.training:
            continue
        p = getattr(m, "p", None) if type(m).__name__ == "Dropout" else getattr(m, "dropout", None)
        if isinstance(p, float) and p > 0:
            found.append(name or type(module).__name__)
    return found


def module_input_grads(module, dx, values):
    """``module.backward``'s return value as one entry per input (None where there is none): None, one
    array (the one float input), or a tuple with one entry per input or per float input."""
    float_pos = [i for i, v in enumerate(values) if is_float_array(v)]
    if dx is None:
        return [None] * len(values)
    if isinstance(dx, np.ndarray):
        if len(float_pos) > 1:
            raise ValueError(f"{type(module).__name__}.backward returned one array but the forward had "
                             f"{len(float_pos)} float inputs")
        in_grads = [None] * len(values)
        if float_pos:
            in_grads[float_pos[0]] = dx
        return in_grads
    dx = list(dx)
    if len(dx) == len(values):
        return dx
    if len(dx) == len(float_pos):
        in_grads = [None] * len(values)
        for i, g in zip(float_pos, dx):
            in_grads[i] = g
        return in_grads
    raise ValueError(f"{type(module).__name__}.backward returned {len(dx)} gradients for {len(values)} inputs")


def _named(names, in_grads, param_grads):
    """Copies of the input and parameter gradients by name (parameters as ``param:<name>``)."""
    out = {n: None if g is None else np.array(g, copy=True) for n, g in zip(names, in_grads)}
    out.update({f"param:{n}": g for n, g in param_grads.items()})
    return out


def _second(module, dout, values, names, chosen, first_param_grads):
    """A second ``module.backward(dout)``; a parameter's gradient is what it added to ``p.grad``."""
    in_grads = module_input_grads(module, module.backward(dout.copy()), values)
    added = {}
    for n, p in chosen:
        before = first_param_grads[n]
        added[n] = None if p.grad is None else (p.grad.copy() if before is None else p.grad - before)
    return _named(names, in_grads, added)


def gradcheck_module(module, *inputs, forward_kwargs=None, input_names=None, params=True, eval_mode=True,
                     eps=DEFAULT_EPS, atol=DEFAULT_ATOL, rtol=DEFAULT_RTOL, seed=0, max_elements=None,
                     exclude=None, fast_mode=False, check_inplace=True, check_repeat=True, verbose=True,
                     raise_exception=False):
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
    eps, atol, rtol, seed, max_elements, fast_mode, raise_exception : see :func:`gradcheck`
    check_inplace, check_repeat, verbose : see :func:`gradcheck`
        (the in-place check covers ``dout``, the inputs, every parameter's ``data`` and every sub-module's
        saved caches; a second backward must raise, as the modules here do, or add the same gradients)
    exclude : dict, optional
        ``name -> index / index array / bool mask`` of elements not to check, by input or parameter
        name, e.g. ``{"weight": padding_idx}`` for an ``Embedding`` whose padding row is frozen.

    Returns
    -------
    GradcheckResult
        Falsy when the check failed. With ``raise_exception=True`` (default False, unlike torch's
        gradcheck) a failure raises :class:`~numpy_transformer.study.gradchecking.GradcheckError` instead.

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
    check_flag(raise_exception, "raise_exception")
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
    names = list(input_names) if input_names is not None else default_input_names(module, len(inputs))
    if len(names) != len(inputs):
        raise ValueError(f"input_names has {len(names)} entries but there are {len(inputs)} inputs")
    warn_not_float64(zip(names, inputs), "gradcheck_module")
    values = [np.array(v, dtype=np.float64, copy=True) if is_float_array(v) else v for v in inputs]
    rng = checker_rng(seed)

    modules = list(module.modules())
    saved_flags = [(m, m.training, list(m._caches)) for m in modules]
    saved_grads = [(p, None if p.grad is None else p.grad.copy()) for _, p in all_params]
    try:
        if eval_mode:
            module.eval()
        else:
            active = active_dropouts(module)
            if active:
                raise ValueError(f"dropout is active in {active}: finite differences need a deterministic "
                                 "forward; use eval_mode=True or dropout probability 0")

        def evaluate():
            return float64_output(as_output(module(*values, **forward_kwargs)), f"{type(module).__name__}")

        out = evaluate()
        dout = upstream_gradient(out.shape, rng=rng, avoid=[out, *values, *(p.data for _, p in all_params)])
        module.zero_grad()
        dout_given = dout.copy()
        snap = None
        if check_inplace:
            caches = [(f"{name or type(m).__name__}.cache", [c for _, c in m._caches])
                      for name, m in module.named_modules() if m._caches]
            snap = snapshot([("dout", dout_given), *zip(names, values),
                             *[(n, p.data) for n, p in all_params], *caches])
        in_grads = module_input_grads(module, module.backward(dout_given), values)
        param_grads = {n: (None if p.grad is None else p.grad.copy()) for n, p in chosen}
        hygiene = [inplace_check(snap, restore={*names, *(n for n, _ in all_params)})] if check_inplace else []
        if check_repeat:
            hygiene.append(repeat_check(_named(names, in_grads, param_grads),
                                        lambda: _second(module, dout, values, names, chosen, param_grads)))

        def compare(name, kind, array, g):
            mask = excluded_elements(exclude, name, array.shape)
            if fast_mode:
                return check_tensor_fast(name, kind, array, g, evaluate, dout, eps=eps, atol=atol, rtol=rtol, rng=rng,
                                   exclude_mask=mask)
            return check_tensor(name, kind, array, g, lambda idx: numerical_gradient(evaluate, array, dout, eps, idx),
                          atol=atol, rtol=rtol, max_elements=max_elements, rng=rng, exclude_mask=mask)

        checks, skipped = [], []
        for name, value, g in zip(names, values, in_grads):
            if not is_float_array(value):
                skipped.append((name, "not floating point"))
                continue
            checks.append(compare(name, "input", value, g))
        for name, p in chosen:
            check = compare(name, "parameter", p.data, param_grads[name])
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
                          "Generator", skipped, title=f"gradcheck_module {type(module).__name__}",
                          hygiene=hygiene, fast_mode=bool(fast_mode))
    return conclude(res, verbose, raise_exception)
