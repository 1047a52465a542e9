"""``numpy-transformer gradcheck``: every op's and every module's gradients, checked two ways.

For each functional op and each module of the registry (numpy_transformer.testing: one row per
example), and for each of its inputs and parameters, the analytic
gradient of ``L = sum(dout * f(x))`` (``dout`` random, seeded, from the checkers' own stream) is
compared with

(a) central finite differences in float64 (:func:`numpy_transformer.study.gradchecking.gradcheck`), and
(b) torch's autograd through ``torch.nn.functional`` / ``torch.nn`` with the same weights
    (the torch table, reference_torch.table, imported lazily through numpy_transformer.oracle: the
    column reads "torch not installed" without torch). ``--dtype float32`` runs (b) in float32 (our
    float32 code against torch's); (a) is always float64.

Errors are relative to the gradient's scale; a gradient that is zero to within the absolute
tolerance (max|fd| <= atol: a key bias's, which the softmax ignores) has nothing to be relative to,
and its row shows the absolute error against atol instead (marked "a"). A row that tests nothing
reads "-".
The exit status is 1 when any gradient fails either check.
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from .. import oracle
from .. import testing as registry
from ..study.gradchecking import (
    DEFAULT_ATOL,
    DEFAULT_EPS,
    DEFAULT_RTOL,
    default_input_names,
    gradcheck,
    gradcheck_module,
    upstream_gradient,
)
from ..testing import RandomChooser
from ..testing import modules as rmodules
from ..utils.text import fit
from . import nonnegative_int, positive_float
from .json_output import add_json_option, emit, report_to_stderr

JSON_SCHEMA = ('{"command": "gradcheck", "passed", "seed", "dtype", "eps", "fast", "torch" (its version, or why '
               'not compared), "cases", "gradients", "failed" (["case / tensor", ...]), "largest_fd_rel", '
               '"largest_torch_rel", "rows": [{"case", "tensor", "shape", "fd_err", "fd_tol", "fd_pass", '
               '"fd_absolute", "torch_rel", "torch_pass", "passed", "notes"}]}; a check not made is null')

__all__ = ["register", "run", "op_cases", "module_cases", "TORCH_TOL"]

# Normwise relative error allowed against torch (as tests/_compare.py): max|ours - torch| / max|torch|.
TORCH_TOL = registry.TOL


def register(subparsers):
    p = subparsers.add_parser(
        "gradcheck", help="check every op's and module's gradients (finite differences and torch)",
        description=__doc__.split("\n\n", 1)[1].strip(),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dtype", choices=["float64", "float32"], default="float64",
                   help="precision of the torch comparison (finite differences are always float64)")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="seed of the inputs, weights and upstream gradients")
    p.add_argument("--only", metavar="PATTERN", action="append",
                   help="run only the cases whose name contains PATTERN (case-insensitive; repeatable)")
    p.add_argument("--eps", type=positive_float, default=DEFAULT_EPS, help="finite-difference step (relative)")
    p.add_argument("--fast", action="store_true",
                   help="finite differences in fast mode: v^T J u along one random direction per tensor")
    add_json_option(p, JSON_SCHEMA)
    p.set_defaults(func=run)
    return p


# --------------------------------------------------------------------------------------------------
# the cases
# --------------------------------------------------------------------------------------------------

@dataclass
class OpCase:
    """A functional op: ``forward(**inputs, **static) -> (out, ..., cache)``,
    ``backward(dout, cache) -> {name: grad}``."""
    name: str
    op: str                       # the torch side's name for it
    inputs: dict                  # name -> array; float arrays are differentiated
    static: dict                  # constants: masks, axis, ...
    forward: Callable
    backward: Callable
    exclude: Optional[dict] = None


@dataclass
class ModuleCase:
    """A module: ``build(dtype)`` makes it (the same weights for every dtype)."""
    name: str
    build: Callable
    inputs: list
    forward_kwargs: dict = field(default_factory=dict)
    exclude: Optional[dict] = None


def _report_op(case, label, options, seed):
    """A registry op's report row: its drawn inputs and a forward returning ``(out, cache)``."""
    d = case.draw(RandomChooser([seed, len(label)] + [ord(ch) for ch in label]), np.float64, **options)

    def forward(**kw):
        outs, cache = case.forward(**kw)
        return outs["out"], cache
    return OpCase(case.label(label), case.name, d.inputs, d.static, forward, case.backward, d.fd_exclude)


def op_cases(seed=0):
    """Every functional op of the registry, one row per example (float64 inputs drawn from ``seed``)."""
    return [_report_op(case, label, options, seed) for case in registry.OPS.values()
            for label, options in case.examples]


def _perturbed(module, seed):
    """LayerNorm starts at weight 1, bias 0 (and attention biases at 0): random values test more."""
    r = np.random.default_rng([seed, 2])
    for p in module.parameters():
        p.data[...] += (0.25 * r.standard_normal(p.shape)).astype(p.dtype)
    return module


def _report_module(case, label, options, seed):
    cfg = rmodules.draw_config(case.name, RandomChooser([seed, 1, len(label)] + [ord(ch) for ch in label]),
                               **options)
    x, other = rmodules.make_inputs(cfg, np.random.default_rng([seed, 3]))
    args, kwargs = rmodules.call_args(cfg, x, other)
    seen = set()
    for i, a in enumerate(args):            # one array fed several times: distinct copies, one gradient each
        args[i] = a.copy() if id(a) in seen else a
        seen.add(id(a))
    if cfg["kind"] == "MultiheadAttention":
        kwargs["need_weights"] = False
    exclude = {"weight": cfg["padding_idx"] % cfg["V"]} if cfg.get("padding_idx") is not None else None

    def build(dtype):
        return _perturbed(rmodules.build(dict(cfg, dtype=np.dtype(dtype).name)), seed)
    return ModuleCase(case.label(label), build, args, kwargs, exclude)


def module_cases(seed=0):
    """Every module of the registry, one row per example, built from ``seed`` (``build(dtype)``)."""
    return [_report_module(case, label, options, seed) for case in registry.MODULES.values()
            for label, options in case.examples]


# --------------------------------------------------------------------------------------------------
# our analytic gradients in a given dtype (for the torch comparison)
# --------------------------------------------------------------------------------------------------

def _cast(v, dtype):
    return v.astype(dtype) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v


def _dout(shape, seed, avoid):
    """The upstream gradient of the torch comparison: the checkers' own stream (never the inputs')."""
    return upstream_gradient(shape, seed, avoid=[np.asarray(a, dtype=np.float64) for a in avoid])


def _ours_op(case, dtype, seed):
    inputs = {k: _cast(v, dtype) for k, v in case.inputs.items()}
    static = {k: _cast(v, dtype) for k, v in case.static.items()}
    res = case.forward(**inputs, **static)
    out, cache = res[0], res[-1]
    floats = [v for v in case.inputs.values() if isinstance(v, np.ndarray) and v.dtype.kind == "f"]
    dout = _dout(out.shape, seed, floats)
    grads = case.backward(dout.astype(dtype), cache)
    return dout, {k: v for k, v in grads.items() if v is not None}


def _ours_module(module, case, dtype, seed):
    inputs = [_cast(v, dtype) for v in case.inputs]
    kwargs = {k: _cast(v, dtype) for k, v in case.forward_kwargs.items()}
    module.eval()
    out = module(*inputs, **kwargs)
    out = out[0] if isinstance(out, tuple) else out
    dout = _dout(out.shape, seed, [v for v in inputs if isinstance(v, np.ndarray) and v.dtype.kind == "f"]
                 + [p.data for p in module.parameters()])
    module.zero_grad()
    dx = module.backward(dout.astype(dtype))
    names = default_input_names(module, len(inputs))
    dx = dx if isinstance(dx, (tuple, list)) else (dx,) * (1 if len(inputs) == 1 else 0)
    grads = {n: g for n, g, v in zip(names, dx, inputs) if g is not None and v.dtype.kind == "f"}
    grads.update({n: p.grad for n, p in module.named_parameters() if p.grad is not None})
    return dout, grads


def _module_in(case, dtype, seed):
    m64 = case.build(np.float64)
    if np.dtype(dtype) == np.float64:
        return m64
    m = case.build(dtype)
    m.load_state_dict(m64.state_dict())
    return m


# --------------------------------------------------------------------------------------------------
# running and reporting
# --------------------------------------------------------------------------------------------------

@dataclass
class Row:
    case: str
    tensor: str
    shape: tuple
    fd_abs: float = math.nan
    fd_rel: float = math.nan           # max|ours - fd| / max|fd|; the absolute error when fd_absolute
    fd_tol: float = math.nan           # the relative error FD allows, rtol + atol / scale; atol when fd_absolute
    fd_pass: Optional[bool] = None     # None: not tested (no element checked, or no gradient)
    fd_absolute: bool = False          # the gradient is zero to within atol: err and tol are absolute
    fd_note: str = ""
    t_abs: float = math.nan
    t_rel: float = math.nan
    t_pass: Optional[bool] = None
    t_note: str = ""

    @property
    def passed(self):
        return self.fd_pass is not False and self.t_pass is not False

    @property
    def tested(self):
        return self.fd_pass is not None or self.t_pass is not None


def _load_torch_side():
    """``(module, None)``, or ``(None, why)`` when torch (or the reference) is unavailable."""
    try:
        return oracle.load("table"), None
    except oracle.OracleUnavailable as exc:
        return None, exc.reason


# A gradient that is zero in exact arithmetic (a key bias's: a bias added to every key shifts each row
# of scores by a constant, which the softmax ignores) comes out as rounding noise on both sides; as in
# tests/_compare.py the relative error then divides by a floor, this fraction of the case's largest
# torch gradient, so such a tensor is judged against its siblings' size.
SCALE_FLOOR = 1e-4


def _torch_errors(ours, ref, floor=0.0):
    a, b = np.asarray(ours, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    if a.shape != b.shape:
        return math.inf, math.inf
    abs_err = float(np.max(np.abs(a - b))) if a.size else 0.0
    scale = max(float(np.max(np.abs(b))) if b.size else 0.0, floor)
    return abs_err, (abs_err / scale if scale > 0 else abs_err)


def _fd_rows(case_name, result):
    """One row per checked tensor. A tensor whose finite-difference gradient is zero to within atol (its
    scale ``max|fd|`` <= atol) has nothing to be relative to: its row holds the absolute error and the
    absolute bound it was held to (never an infinite relative tolerance); one with no element checked
    is not tested (``fd_pass`` None), whatever its TensorCheck says."""
    rows = {}
    for c in result.checks:
        if c.checked == 0:
            r = Row(case_name, c.name, c.shape, fd_note=f"{case_name} / {c.name}: no element checked")
        elif c.zero_gradient:
            r = Row(case_name, c.name, c.shape, c.max_abs_err, c.max_abs_err, c.allowed, c.passed, fd_absolute=True)
        else:
            r = Row(case_name, c.name, c.shape, c.max_abs_err, c.max_rel_err, c.allowed / c.scale, c.passed)
        if not c.passed:
            r.fd_note = f"{case_name}: {c.describe()}"
        rows[c.name] = r
    return rows


def _run_case(case, args, torch_side, torch_why, tol):
    """The rows of one case: (a) finite differences, (b) torch."""
    seed = args.seed
    if isinstance(case, OpCase):
        fwd = functools.partial(case.forward, **case.static)
        fwd.__name__ = case.name
        res = gradcheck(fwd, case.backward, case.inputs, eps=args.eps, seed=seed, exclude=case.exclude,
                        fast_mode=args.fast, verbose=False)
    else:
        res = gradcheck_module(case.build(np.float64), *case.inputs, forward_kwargs=case.forward_kwargs,
                               eps=args.eps, seed=seed, exclude=case.exclude, fast_mode=args.fast, verbose=False)
    rows = _fd_rows(case.name, res)
    for h in res.hygiene_failures:                 # the backward edited its cache, or a second call disagreed
        rows[f"({h.name})"] = Row(case.name, f"({h.name})", (), fd_pass=False, fd_note=f"{case.name}: {h.describe()}")
    for name, why in res.skipped:
        if why == "the backward returned None":
            shape = np.shape(case.inputs[name]) if isinstance(case, OpCase) else ()
            rows[name] = Row(case.name, name, shape, fd_note="no gradient")
    if torch_side is None:
        for r in rows.values():
            r.t_note = torch_why
        return list(rows.values())
    if isinstance(case, OpCase):
        dout, ours = _ours_op(case, args.dtype, seed)
        ref = torch_side.op_outputs(case.op, case.inputs, case.static, dout, np.dtype(args.dtype),
                                    registry.OPS[case.op].nondiff)
        ref = {n: g.detach().numpy().astype(np.float64) for n, g in ref.items() if n in case.inputs and g is not None}
    else:
        module = _module_in(case, args.dtype, seed)
        dout, ours = _ours_module(module, case, args.dtype, seed)
        names = default_input_names(module, len(case.inputs))
        ref = torch_side.module_outputs(module, case.inputs, case.forward_kwargs, names, dout, np.dtype(args.dtype))
        ref = {n: (None if g is None else g.detach().numpy().astype(np.float64)) for n, g in ref.items() if n != "out"}
    floor = SCALE_FLOOR * max([float(np.max(np.abs(g))) for g in ref.values() if g is not None and g.size] + [0.0])
    for name in list(ref) + [n for n in ours if n not in ref]:
        r = rows.get(name)
        if r is None:
            r = rows[name] = Row(case.name, name, np.shape(ref.get(name, ours.get(name))))
        if name not in ours or ours[name] is None:
            r.t_pass, r.t_note = False, "ours: no gradient"
        elif ref.get(name) is None:
            r.t_pass, r.t_note = False, "torch: no gradient"
        else:
            r.t_abs, r.t_rel = _torch_errors(ours[name], ref[name], floor)
            r.t_pass = r.t_rel <= tol
            if not r.t_pass:
                r.t_note = f"{case.name} / {name}: torch disagrees: rel {r.t_rel:.3e} > {tol:g}"
    return list(rows.values())


_TENSOR_W = 34       # the longest tensor name, layers.0.self_attn.out_proj.weight: rows fit 100 columns


def _e(x, absolute=False):
    """A cell: ``-`` for nothing, ``1.23e-10``, or ``1.2e-10a`` for an absolute value."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.1e}a" if absolute else f"{x:.2e}"


def _status(p):
    return "-" if p is None else ("PASS" if p else "FAIL")


def run(args):
    """The ``gradcheck`` command: the report (to stderr with ``--json``, then the document on stdout)."""
    document = {}
    with report_to_stderr(getattr(args, "json", False)):
        rc = _report(args, document)
    if getattr(args, "json", False) and document:
        emit(document)
    return rc


def _row_document(r):
    """One row of the JSON document: the figures of its line in the table."""
    notes = [n for n in (r.fd_note if r.fd_pass is False else "", r.t_note if r.t_pass is False else "") if n]
    return {"case": r.case, "tensor": r.tensor, "shape": list(r.shape), "fd_err": r.fd_rel, "fd_tol": r.fd_tol,
            "fd_pass": r.fd_pass, "fd_absolute": r.fd_absolute, "torch_rel": r.t_rel, "torch_pass": r.t_pass,
            "passed": r.passed, "notes": notes}


def _report(args, document):
    """Print the report; fill ``document`` (the JSON one); return the exit status."""
    t0 = time.perf_counter()
    torch_side, torch_why = _load_torch_side()
    tol = TORCH_TOL[args.dtype]
    cases = op_cases(args.seed) + module_cases(args.seed)
    if args.only:
        pats = [p.lower() for p in args.only]
        cases = [c for c in cases if any(p in c.name.lower() for p in pats)]
        if not cases:
            print(f"error: no case matches --only {' '.join(args.only)}", file=sys.stderr)
            return 2
    torch_desc = (f"torch {torch_side.TORCH_VERSION} autograd in {args.dtype} (our {args.dtype} code against "
                  f"torch.nn / torch.nn.functional with the same weights); pass: max|ours - torch| / max|torch| "
                  f"<= {tol:g}" if torch_side else torch_why)
    print(fit("numpy-transformer gradcheck: gradients of L = sum(dout * f(x)), dout ~ N(0, 1), "
              f"seed {args.seed}"))
    print(fit(f"  (a) FD: central finite differences in float64, eps {args.eps:g}"
              + (" (fast mode: v^T J u along one random direction u per tensor)" if args.fast else "")
              + f"; pass: max|ours - fd| <= {DEFAULT_ATOL:g} + {DEFAULT_RTOL:g} * max|fd| (FD tol: that bound as a "
              "relative error); the backward must not edit its cache or inputs in place"))
    print(fit(f"  (b) torch: {torch_desc}"))
    print(fit("  errors are relative: max|ours - reference| / max|reference| (torch: over at least 1e-4 of "
              "the case's largest gradient, for those zero in exact arithmetic); a gradient whose FD values are "
              f"all within atol {DEFAULT_ATOL:g} of zero has nothing to be relative to: its FD err and tol are "
              "absolute, marked a (max|ours - fd| <= the bound); '-': not tested; each case's rows follow its name"))
    head = (f"  {'tensor':<{_TENSOR_W}} {'shape':<13} {'FD err':>8} {'FD tol':>8} {'FD':>4}   "
            f"{'torch rel':>9} {'torch':>5}   result")
    print(head)
    print("-" * len(head))
    all_rows, notes = [], []
    for case in cases:
        try:
            rows = _run_case(case, args, torch_side, torch_why, tol)
        except Exception as exc:                       # a broken op: report it, keep going
            rows = [Row(case.name, "(error)", (), fd_pass=False, fd_note=f"{case.name}: {type(exc).__name__}: {exc}")]
        print(case.name)
        for r in rows:
            tensor = r.tensor
            if len(tensor) > _TENSOR_W:            # a long name on a line of its own, never cut
                print(f"  {tensor}")
                tensor = ""
            result = "FAIL" if not r.passed else "PASS" if r.tested else "-"
            print(f"  {tensor:<{_TENSOR_W}} {str(tuple(r.shape)):<13} {_e(r.fd_rel, r.fd_absolute):>8} "
                  f"{_e(r.fd_tol, r.fd_absolute):>8} {_status(r.fd_pass):>4}   {_e(r.t_rel):>9} "
                  f"{_status(r.t_pass):>5}   {result}")
            notes += [n for n in (r.fd_note if r.fd_pass is False else "",
                                  r.t_note if r.t_pass is False else "") if n]
        all_rows += rows
    failed = [r for r in all_rows if not r.passed]
    worst_fd = max((r.fd_rel for r in all_rows if r.fd_pass and not r.fd_absolute), default=math.nan)
    worst_t = max((r.t_rel for r in all_rows if not math.isnan(r.t_rel) and r.t_pass), default=math.nan)
    zero = [r for r in all_rows if r.fd_pass and r.fd_absolute]
    untested = [r for r in all_rows if not r.tested]
    print("-" * len(head))
    for n in notes:
        print(fit(n))
    print(fit(f"{len(all_rows)} gradients in {len(cases)} cases, {time.perf_counter() - t0:.1f} s; largest passing "
              f"relative error: FD {_e(worst_fd)}, torch {_e(worst_t)}"))
    if zero:
        print(fit(f"{len(zero)} gradient(s) zero to within atol, checked by absolute error: the largest "
                  f"max|ours - fd| is {max(r.fd_rel for r in zero):.1e} (allowed {max(r.fd_tol for r in zero):.1e}): "
                  + ", ".join(f"{r.case} / {r.tensor}" for r in zero)))
    if untested:
        print(fit("not tested ('-'): " + ", ".join(f"{r.case} / {r.tensor}" + (f" ({r.fd_note})" if r.fd_note
                                                                                else "") for r in untested)))
    document.update(command="gradcheck", passed=not failed, seed=args.seed, dtype=args.dtype, eps=args.eps,
                    fast=args.fast, torch=torch_side.TORCH_VERSION if torch_side else torch_why, cases=len(cases),
                    gradients=len(all_rows), failed=[f"{r.case} / {r.tensor}" for r in failed],
                    largest_fd_rel=worst_fd, largest_torch_rel=worst_t, rows=[_row_document(r) for r in all_rows])
    if failed:
        print(fit(f"FAILED: {len(failed)} gradient(s): " + ", ".join(f"{r.case} / {r.tensor}" for r in failed)))
        return 1
    print("ALL PASS")
    return 0

