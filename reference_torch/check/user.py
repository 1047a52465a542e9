"""Your NumPy forward/backward (or module) against PyTorch's autograd, in one call.

``nt.check_against_torch`` and ``nt.check_against_torch_module`` (through :mod:`numpy_transformer.oracle`,
so that the library never imports torch) run your code and torch's on the same inputs, weights and
random upstream gradient, and compare the output and every gradient.

Tolerances, per dtype (normwise: ``max|ours - torch| / max|torch|``):

* **float64: 1e-10.** Both sides compute the same mathematics in a different order (BLAS blocking,
  reduction order, fused kernels); each rounding costs at most ``u = 1.1e-16`` relative, and for a layer
  on O(1) data the two results land within a few hundred ``u`` of each other: 1e-16 to 1e-13 in practice
  (~1e-12 after long reductions or ill-conditioned steps such as LayerNorm's ``x - mean``). 1e-10 leaves
  a margin of 100x over that, and any bug (a missing term, a transposed weight, a wrong constant) is an
  O(1) relative error, ten orders of magnitude above.
* **float32: 1e-4.** ``u`` is 6e-8, and a gradient is a chain of reductions over D, S or F terms with
  cancellations (LayerNorm's ``dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)``, the softmax's ``dP -
  sum(dP * P)``) that amplify the relative error by the condition number: 1e-7 to 1e-5 in practice,
  hence 1e-4. A real bug is still 1e-2 or more.
* **No finite differences on float32.** A central difference has truncation error ``O(h^2)`` and
  round-off ``O(u |f| / h)``. In float64 with ``h = 1e-6`` both are ~1e-10; in float32 the round-off term
  is ``6e-8 / 1e-6 = 6%`` of the gradient, and even the best step ``h ~ u^(1/3) ~ 4e-3`` leaves ~1e-5
  with a truncation error that depends on the function. Such a check cannot tell a bug of 1e-3 from
  noise; comparing with torch's float32 autograd, which rounds the same way, can.

The upstream gradient ``dout`` is drawn from ``N(0, 1)`` (``seed``), never all ones: with ``.sum()`` a
softmax backward that forgets its row-sum term still passes, because the rows sum to a constant. It
comes from the checkers' own stream (:func:`numpy_transformer.study.gradchecking.upstream_gradient`), not from
``np.random.default_rng(seed)`` whose first draws may be your inputs, and is drawn again if parallel to
an input of the output's shape: were ``dout == x``, a backward using ``x`` in place of ``dout``, or a
transposed square weight gradient, would agree with torch.

A failed result is falsy (``assert nt.check_against_torch(...)`` fails); ``raise_exception=True`` raises
:class:`TorchCheckError` (a ``GradcheckError``) instead. The default, False, returns the report
(``torch.autograd.gradcheck`` defaults to raising).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from numpy_transformer.study.gradchecking import checker_rng, default_input_names, module_input_grads, upstream_gradient
from numpy_transformer.study.gradchecking.result import check_flag

from .report import SCALE_FLOOR, TOL, Comparison, TorchCheckError, TorchCheckResult, compare

__all__ = ["check_against_torch", "check_against_torch_module", "TorchCheckResult", "TorchCheckError", "Comparison",
           "TOL"]

_TORCH_DTYPE = {np.dtype(np.float64): torch.float64, np.dtype(np.float32): torch.float32}


def _check_dtype(dtype, arg="dtype"):
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{arg} must be np.float32 or np.float64, got {dtype!r}") from None
    if dt not in TOL:
        raise TypeError(f"{arg} must be np.float32 or np.float64, got {dt}"
                        + (" (float16 is not supported)" if dt == np.float16 else ""))
    return dt


def _options(seed, rtol, atol, dtype):
    if not (seed is None or isinstance(seed, np.random.Generator) or
            (isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and seed >= 0)):
        raise TypeError(f"seed must be a non-negative int, a numpy Generator or None, got {seed!r}")
    rtol = TOL[dtype] if rtol is None else rtol
    for arg, v in (("rtol", rtol), ("atol", atol)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < float("inf"):
            raise ValueError(f"{arg} must be a finite number >= 0, got {v!r}")
    rng = checker_rng(seed)
    return rng, float(rtol), float(atol), ("Generator" if isinstance(seed, np.random.Generator) else seed)


def _is_float(v):
    return isinstance(v, np.ndarray) and v.dtype.kind == "f"


def _tensor(v, dtype, grad):
    """A float array as a leaf tensor of ``dtype`` (``requires_grad``); other arrays as they are."""
    if _is_float(v):
        return torch.tensor(np.array(v, dtype=dtype, copy=True), requires_grad=grad)
    if isinstance(v, np.ndarray):
        return torch.from_numpy(v.copy())
    return v


def _output(res):
    """``out`` or ``(out, ...)`` -> ``out``."""
    return res[0] if isinstance(res, (tuple, list)) and res else res


def _ours_output(res):
    out = _output(res)
    if not _is_float(out):
        raise TypeError(f"forward must return a floating-point ndarray, or a tuple (out, ..., cache) whose first "
                        f"element is one; got {type(out).__name__}"
                        + (f" of dtype {out.dtype}" if isinstance(out, np.ndarray) else ""))
    return out


def _torch_output(res, where):
    out = _output(res)
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"{where} must return a torch.Tensor (or a tuple whose first element is one), got "
                        f"{type(out).__name__}")
    return out


def _match_grads(grads, float_names, names):
    """``backward``'s return value as ``{float input name: grad}``: a dict by name, or a tuple/list in the
    order of the floating-point inputs (or of all the inputs, None for the others), or one array."""
    if isinstance(grads, Mapping):
        unknown = [k for k in grads if k not in float_names]
        if unknown:
            raise ValueError(f"backward returned gradients for {unknown}, which are not floating-point inputs; "
                             f"the floating-point inputs are {float_names}")
        return {n: grads.get(n) for n in float_names}
    if grads is None or isinstance(grads, np.ndarray):
        grads = (grads,)
    if not isinstance(grads, (tuple, list)):
        raise TypeError(f"backward must return a tuple of gradients (one per floating-point input, in the order "
                        f"{float_names}) or a dict name -> gradient, got {type(grads).__name__}")
    grads = list(grads)
    if len(grads) == len(float_names):
        return dict(zip(float_names, grads))
    if len(grads) == len(names):
        stray = [n for n, g in zip(names, grads) if n not in float_names and g is not None]
        if stray:
            raise ValueError(f"backward returned a gradient for {stray}, which are not floating-point inputs")
        return {n: g for n, g in zip(names, grads) if n in float_names}
    raise ValueError(f"backward returned {len(grads)} gradients; expected one per floating-point input "
                     f"({len(float_names)}: {float_names}, in that order), or a dict name -> gradient")


def _result(pairs, title, dtype, rtol, atol, seed, notes=()):
    """Compare ``[(name, kind, ours, torch's)]`` and build the result (the floor from the largest)."""
    scales = [float(np.max(np.abs(np.nan_to_num(np.asarray(r, dtype=np.float64), posinf=0, neginf=0))))
              for _, _, _, r in pairs if r is not None and np.size(r)]
    floor = SCALE_FLOOR * max(scales, default=0.0)
    checks = [compare(n, k, o, r, dtype=dtype, rtol=rtol, atol=atol, floor=floor) for n, k, o, r in pairs
              if o is not None or r is not None]
    return TorchCheckResult(checks, dtype, rtol, atol, seed, title, torch.__version__, list(notes))


def _np(t):
    return None if t is None else t.detach().cpu().numpy().copy()


def check_against_torch(forward, backward, torch_fn, inputs, dtype=np.float64, *, seed=0, rtol=None, atol=0.0,
                        verbose=False, raise_exception=False):
    """Compare your NumPy forward/backward pair with ``torch_fn`` under torch's autograd.

    Parameters
    ----------
    forward : callable
        ``forward(**inputs) -> out`` or ``-> (out, ..., cache)`` (as every ``nt.functional`` op).
    backward : callable
        ``backward(dout, cache) -> grads`` (``cache`` None when the forward returned a bare array): a
        tuple/list with one gradient per floating-point input **in the order of** ``inputs`` (or one
        per input, None for the others), a dict ``name -> gradient``, or one array; None = no gradient.
    torch_fn : callable
        ``torch_fn(**tensors)`` with the same keyword names: each float array arrives as a leaf tensor
        of ``dtype`` with ``requires_grad=True``, other arrays as tensors, anything else unchanged;
        returns a tensor (or a tuple whose first element is the output).
    inputs : dict
        ``name -> value``. Floating-point arrays are cast to ``dtype`` and differentiated.
    dtype : np.float64 or np.float32
        The precision both sides run in; it sets the default tolerance (module docstring: 1e-10 and 1e-4).
    seed : int, Generator or None
        For the upstream gradient ``dout ~ N(0, 1)``, the same on both sides (never all ones), drawn
        from the checkers' own stream for ``seed`` (never the first draws of
        ``np.random.default_rng(seed)``) and drawn again if parallel to an input of the output's shape.
    rtol, atol : float
        A tensor passes when ``max|ours - torch| <= atol + rtol * max|torch|``; ``rtol`` defaults to the
        dtype's tolerance.
    verbose : bool
        Print the report.
    raise_exception : bool
        Raise :class:`TorchCheckError` (a ``GradcheckError``, with the report) when a tensor failed.
        Default False, unlike ``torch.autograd.gradcheck`` (default True): the report is returned, falsy
        when it failed.

    Returns
    -------
    TorchCheckResult
        ``.ok`` (``bool(result)`` is the same), ``result["x"]`` (max abs and relative error, the worst
        element, ours and torch's value there), ``str(result)`` the table, ``.raise_if_failed()``.

    Raises
    ------
    TorchCheckError
        With ``raise_exception=True``, when the output or a gradient disagrees with torch's.

    Examples
    --------
    >>> import numpy as np, torch
    >>> from numpy_transformer import functional as F
    >>> rng = np.random.default_rng(0)
    >>> res = check_against_torch(F.layer_norm_forward, F.layer_norm_backward,
    ...                           lambda x, weight, bias: torch.nn.functional.layer_norm(x, (5,), weight, bias),
    ...                           {"x": rng.standard_normal((2, 5)), "weight": rng.standard_normal(5),
    ...                            "bias": rng.standard_normal(5)})
    >>> res.ok, [c.name for c in res.checks]
    (True, ['out', 'x', 'weight', 'bias'])
    """
    for arg, fn in (("forward", forward), ("backward", backward), ("torch_fn", torch_fn)):
        if not callable(fn):
            raise TypeError(f"{arg} must be callable, got {type(fn).__name__}")
    if not isinstance(inputs, Mapping):
        raise TypeError(f"inputs must be a dict name -> value (the keyword arguments of forward and torch_fn), "
                        f"got {type(inputs).__name__}")
    check_flag(raise_exception, "raise_exception")
    dtype = _check_dtype(dtype)
    rng, rtol, atol, seed_label = _options(seed, rtol, atol, dtype)
    names = list(inputs)
    float_names = [n for n in names if _is_float(inputs[n])]
    if not float_names:
        raise ValueError(f"inputs has no floating-point array to differentiate (got {names})")
    tensors = {n: _tensor(v, dtype, True) for n, v in inputs.items()}
    ours_in = {n: (np.array(v, dtype=dtype, copy=True) if _is_float(v) else v) for n, v in inputs.items()}

    res = forward(**ours_in)
    out = _ours_output(res)
    cache = res[-1] if isinstance(res, tuple) and len(res) >= 2 else None
    dout = upstream_gradient(out.shape, rng=rng, avoid=[np.asarray(out, dtype=np.float64), *(
        np.asarray(ours_in[n], dtype=np.float64) for n in float_names)])
    grads = _match_grads(backward(dout.astype(dtype), cache), float_names, names)

    t_out = _torch_output(torch_fn(**tensors), "torch_fn")
    notes = []
    pairs = [("out", "output", out, _np(t_out))]
    if tuple(t_out.shape) != out.shape:
        notes.append(f"torch_fn's output has shape {tuple(t_out.shape)}, forward's {out.shape}: gradients not "
                     "compared")
    elif t_out.dtype != _TORCH_DTYPE[dtype]:
        raise TypeError(f"torch_fn returned {t_out.dtype} for {dtype} inputs: the oracle must compute in {dtype} "
                        "(a constant of another dtype inside torch_fn?)")
    elif not t_out.requires_grad:
        notes.append("torch_fn's output does not depend on any floating-point input (requires_grad is False)")
        pairs += [(n, "input", grads[n], None) for n in float_names]
    else:
        t_out.backward(torch.from_numpy(dout.astype(dtype)))
        pairs += [(n, "input", grads[n], _np(tensors[n].grad)) for n in float_names]
    result = _result(pairs, f"check_against_torch {getattr(forward, '__name__', 'forward')}", dtype, rtol, atol,
                     seed_label, notes)
    return _finish(result, verbose, raise_exception)


def _finish(result, verbose, raise_exception):
    """Print the report if asked, raise :class:`TorchCheckError` if asked and failed, else return it."""
    if verbose:
        print(result)
    if raise_exception and not result.ok:
        raise TorchCheckError(str(result))
    return result


def _load_ours_into_torch(our_module, torch_module, dtype):
    ours = our_module.state_dict()
    theirs = torch_module.state_dict()
    missing = [k for k in theirs if k not in ours]
    extra = [k for k in ours if k not in theirs]
    if missing or extra:
        parts = ([f"torch_module has {missing} that our_module lacks"] if missing else []) + \
                ([f"our_module has {extra} that torch_module lacks"] if extra else [])
        raise ValueError("state_dict keys differ: " + "; ".join(parts) + ". Both modules must use torch's names "
                         "(ours -> torch is transferred by name)")
    for k, v in theirs.items():
        if tuple(v.shape) != tuple(np.shape(ours[k])):
            hint = " (transposed?)" if tuple(v.shape) == tuple(np.shape(ours[k]))[::-1] else ""
            raise ValueError(f"state_dict[{k!r}] has shape {tuple(np.shape(ours[k]))} in our_module but "
                             f"{tuple(v.shape)} in torch_module{hint}")
        if v.is_floating_point() and v.dtype != _TORCH_DTYPE[dtype]:
            raise TypeError(f"torch_module's {k!r} is {v.dtype} but our_module is {dtype}: convert it with "
                            f"torch_module.{'double' if dtype == np.float64 else 'float'}() (the oracle must "
                            "compute in the same dtype)")
    with torch.no_grad():
        torch_module.load_state_dict({k: torch.from_numpy(np.array(v, copy=True)) for k, v in ours.items()})


def check_against_torch_module(our_module, torch_module, *inputs, forward_kwargs=None, torch_kwargs=None,
                               input_names=None, seed=0, rtol=None, atol=0.0, eval_mode=True, verbose=False,
                               raise_exception=False):
    """Compare a module of yours with a ``torch.nn.Module``: output, input gradients, every parameter's.

    Our weights are copied into ``torch_module`` by ``state_dict`` name (both must use torch's keys:
    missing or extra keys, or a shape mismatch, are refused naming them; torch's weights are
    overwritten). Then ``our_module(*inputs, **forward_kwargs)`` with ``our_module.backward(dout)`` and
    ``torch_module(*tensors, **torch_kwargs)`` under autograd run on the same inputs and the same
    random ``dout``. The dtype is our module's (float32 or float64, tolerance as in
    :func:`check_against_torch`); float inputs are cast to it, and ``torch_module`` must have it too.
    Both modules' training flags and our ``p.grad`` are left as they were found; with ``eval_mode``
    (the default) both run in eval mode (dropout off).

    Parameters
    ----------
    our_module : numpy_transformer.nn.Module
    torch_module : torch.nn.Module
    *inputs : ndarray or other values, positional, the same for both.
    forward_kwargs : dict, optional
        Keyword arguments of our forward; ``torch_kwargs`` defaults to them (arrays as tensors).
    input_names : list of str, optional
        Default: the names of ``our_module.forward``'s positional parameters.
    seed, rtol, atol, verbose, raise_exception : as :func:`check_against_torch` (``dout`` is also drawn
        again if parallel to a parameter of the output's shape).

    Returns
    -------
    TorchCheckResult
        Rows ``out``, each float input, and every parameter by its ``named_parameters`` name; falsy
        when a tensor failed.

    Raises
    ------
    TorchCheckError
        With ``raise_exception=True`` (default False, unlike torch's gradcheck), when a tensor failed.
    """
    from numpy_transformer.nn import Module
    if not isinstance(our_module, Module):
        raise TypeError(f"our_module must be a numpy_transformer.nn.Module, got {type(our_module).__name__}")
    if not isinstance(torch_module, torch.nn.Module):
        raise TypeError(f"torch_module must be a torch.nn.Module, got {type(torch_module).__name__}")
    params = list(our_module.named_parameters())
    dtypes = {np.dtype(p.dtype) for _, p in params}
    if len(dtypes) != 1:
        raise TypeError(f"our_module must have parameters of one float dtype, got {sorted(map(str, dtypes))}")
    check_flag(raise_exception, "raise_exception")
    dtype = _check_dtype(dtypes.pop(), "our_module's dtype")
    rng, rtol, atol, seed_label = _options(seed, rtol, atol, dtype)
    names = list(input_names) if input_names is not None else default_input_names(our_module, len(inputs))
    if len(names) != len(inputs):
        raise ValueError(f"input_names has {len(names)} entries but there are {len(inputs)} inputs")
    forward_kwargs = dict(forward_kwargs or {})
    torch_kwargs = ({k: _tensor(v, dtype, False) for k, v in forward_kwargs.items()} if torch_kwargs is None
                    else dict(torch_kwargs))
    _load_ours_into_torch(our_module, torch_module, dtype)

    ours_flags = [(m, m.training) for m in our_module.modules()]
    torch_flags = [(m, m.training) for m in torch_module.modules()]
    saved_grads = [(p, p.grad) for _, p in params]
    torch_params = dict(torch_module.named_parameters())
    torch_saved = [(p, p.grad) for p in torch_params.values()]
    try:
        if eval_mode:
            our_module.eval()
            torch_module.eval()
        values = [np.array(v, dtype=dtype, copy=True) if _is_float(v) else v for v in inputs]
        tensors = [_tensor(v, dtype, True) for v in inputs]
        out = _ours_output(our_module(*values, **forward_kwargs))
        dout = upstream_gradient(out.shape, rng=rng, avoid=[np.asarray(out, dtype=np.float64), *(
            np.asarray(v, dtype=np.float64) for v in values if _is_float(v)), *(
            np.asarray(p.data, dtype=np.float64) for _, p in params)])
        our_module.zero_grad()
        in_grads = module_input_grads(our_module, our_module.backward(dout.astype(dtype)), values)
        ours_p = {n: None if p.grad is None else p.grad.copy() for n, p in params}
        for p in torch_params.values():
            p.grad = None
        t_out = _torch_output(torch_module(*tensors, **torch_kwargs), "torch_module")
        notes, pairs = [], [("out", "output", out, _np(t_out))]
        if tuple(t_out.shape) != out.shape:
            notes.append(f"torch_module's output has shape {tuple(t_out.shape)}, ours {out.shape}: gradients not "
                         "compared")
        else:
            t_out.backward(torch.from_numpy(dout.astype(dtype)))
            pairs += [(n, "input", g, _np(t.grad)) for n, g, t, v in zip(names, in_grads, tensors, values)
                      if _is_float(v)]
            pairs += [(n, "parameter", ours_p[n], _np(torch_params[n].grad) if n in torch_params else None)
                      for n, _ in params]
    finally:
        for m, training in ours_flags:
            object.__setattr__(m, "training", training)
        for m, training in torch_flags:
            m.training = training
        for p, g in saved_grads:
            p.grad = g
        for p, g in torch_saved:
            p.grad = g
    result = _result(pairs, f"check_against_torch_module {type(our_module).__name__} vs "
                     f"{type(torch_module).__name__}", dtype, rtol, atol, seed_label, notes)
    return _finish(result, verbose, raise_exception)


_ = (Comparison, TorchCheckError)           # re-exported for ``from reference_torch.check.user import ...``
