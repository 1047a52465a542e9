"""The checker: ``numpy_transformer`` against ``torch.nn``'s own modules, outputs and every gradient.

Usage::

    python -m reference_torch.check [--trials N] [--seed S] [--dtype float64|float32] [--tol T] [--twins]

For each module of the registry (``numpy_transformer.testing.MODULES``: ``Linear``, ``Embedding``,
``LayerNorm``, ``MultiheadAttention``, ``TransformerEncoderLayer``, ``TransformerEncoder``,
``TransformerDecoderLayer``, ``TransformerDecoder``, ``Transformer``, ...) and
each trial it draws a random configuration (shapes, heads, activation, pre/post-LN, batch_first,
unbatched inputs, bias, eps, kdim/vdim, add_bias_kv/add_zero_attn, masks), builds torch's module with the torch table
(``reference_torch.table.torch_module``; dropout 0, random weights and biases), copies its weights
into the NumPy module through ``state_dict``, runs both forward, back-propagates the same *random* upstream gradient and
compares the output, the attention weights, every input gradient and every parameter gradient.
``--twins`` adds the hand-written twins of :mod:`reference_torch.nn` with dropout active (the
NumPy masks replayed).

It prints one row per module and tensor (worst max-abs and normwise relative error over the trials)
and exits with status 1 when any relative error exceeds the tolerance (1e-9 in float64, 1e-4 in
float32), listing the failing configurations.

The configurations are drawn by the registry (``numpy_transformer.testing.modules``) and the comparisons
live here as functions, so the test-suite drives the very same code with hypothesis (see
:class:`HypothesisChooser`).
"""

from __future__ import annotations

import argparse
import copy
import math
import warnings
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch

import numpy_transformer as nt
from numpy_transformer.study.gradchecking.upstream import upstream_gradient
from numpy_transformer.testing import (
    CROSS_MASKS,
    KINDS,
    SELF_MASKS,
    TWIN_KINDS,
    HypothesisChooser,
    RandomChooser,
    make_masks,
)
from numpy_transformer.testing.modules import (
    FLOAT32_SIZES,
    MIN_LAYER_NORM_D,
    build,
    draw_config,
    input_grads,
    make_inputs,
)
from numpy_transformer.utils.text import plain

from .. import convert, table

__all__ = [
    "RandomChooser", "HypothesisChooser", "KINDS", "TWIN_KINDS", "draw_config", "compare", "Result",
    "SELF_MASKS", "CROSS_MASKS", "make_masks", "run", "main", "FLOAT32_SIZES", "MIN_LAYER_NORM_D",
    "TOLERANCE", "SCALE_FLOOR", "reference_in_float64", "float32_verdicts", "assert_float32_close", "verify_float32",
    "pairs_floor", "format_table",
]

TOLERANCE = {"float64": 1e-9, "float32": 1e-4}
SCALE_FLOOR = 1e-4        # float32 verdicts: relative to the largest exact tensor (as tests/_compare.py)


@dataclass
class Result:
    """What :func:`compare` produced: ``pairs`` maps tensor names to ``(ours, reference)``."""
    cfg: dict
    pairs: "OrderedDict[str, tuple]"
    ours: Any = None
    ref: Any = None
    masks: dict = field(default_factory=dict)
    oracle: str = "torch.nn"
    inputs: Any = None            # (differentiable inputs, other inputs, upstream gradient), NumPy

    @property
    def param_grad_names(self):
        return [k[len("grad."):] for k in self.pairs if k.startswith("grad.")]


def _perturb_torch(module, gen):
    """Random weights *and* biases (torch initialises biases and LayerNorm to 0/1): a missing bias or
    a swapped weight would otherwise go unnoticed. Layers copied from one template also get distinct
    weights this way."""
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.25 * torch.randn(p.shape, generator=gen, dtype=torch.float64).to(p.dtype))


def _perturb_numpy(module, rng):
    for p in module.parameters():
        p.data[...] += (0.25 * rng.standard_normal(p.shape)).astype(p.dtype)


# the registry's NumPy side, and the torch table's module for a configuration
_build_numpy = build
_inputs = make_inputs


def _build_torch(cfg):
    """Torch's own module (``torch.nn``) for configuration ``cfg`` (built by the torch table from ours)."""
    return table.torch_module(build(cfg), "torch.nn")


def _call(module, cfg, x, other, side):
    """Run ``module`` (side 'numpy', 'torch.nn' or 'twin'); returns ``(output, {extra outputs})``."""
    if side == "numpy":
        from numpy_transformer.testing.modules import call
        return call(module, cfg, x, other)
    return table.torch_call(module, cfg, x, other, side)


def _backward_numpy(module, cfg, dout, x):
    return input_grads(module, cfg, dout, x)


def compare(cfg, oracle="torch.nn"):
    """Run the NumPy module and ``oracle`` ('torch.nn', or 'twin' with dropout ``cfg['dropout']``
    active and the NumPy masks replayed) on the same weights, inputs and random upstream gradient.

    Returns
    -------
    Result
        ``pairs``: ``out``, ``weights`` (MultiheadAttention with need_weights), ``d<input>`` for every
        float input, ``grad.<name>`` for every named parameter of the reference module, and
        ``after.<name>`` for a parameter the forward changed in place on either side (Embedding's
        ``max_norm`` renorm).
    """
    rng = np.random.default_rng(cfg["seed"])
    gen = torch.Generator().manual_seed(cfg["seed"])
    if oracle == "torch.nn":
        if cfg["dropout"]:
            raise ValueError("compare against torch.nn with dropout 0 (its masks cannot be replayed)")
        ref = _build_torch(cfg)
        _perturb_torch(ref, gen)
        ours = _build_numpy(cfg)
        ours.load_state_dict({k: v.detach().numpy() for k, v in ref.state_dict().items()})
        ref.train()
    elif oracle == "twin":
        ours = _build_numpy(cfg)
        _perturb_numpy(ours, rng)
        ref = table.torch_module(ours, "twin")
    else:
        raise ValueError(f"oracle must be 'torch.nn' or 'twin', got {oracle!r}")
    ours.train()
    x_np, other = _inputs(cfg, rng)
    x_t = {name: torch.from_numpy(a.copy()).requires_grad_(True) for name, a in x_np.items()}

    before = {n: p.data.copy() for n, p in ours.named_parameters()}
    before_t = {n: p.detach().clone() for n, p in ref.named_parameters()}
    out, extra = _call(ours, cfg, x_np, other, "numpy")
    masks = nt.dropout_masks(ours) if oracle == "twin" else {}
    if oracle == "twin":
        ref.set_dropout_masks(masks)
    out_t, extra_t = _call(ref, cfg, x_t, other, oracle)

    # dout from the checkers' own stream (never the inputs' default_rng stream), not parallel to an input
    dout = upstream_gradient(out.shape, cfg["seed"], avoid=list(x_np.values())).astype(out.dtype)
    grads = _backward_numpy(ours, cfg, dout, x_np)
    out_t.backward(torch.from_numpy(dout.copy()))

    pairs = OrderedDict(out=(out, out_t))
    for name in extra:
        pairs[name] = (extra[name], extra_t[name])
    for name in x_np:
        pairs[f"d{name}"] = (grads[name], x_t[name].grad)
    ours_params = dict(ours.named_parameters())
    for name, p in ref.named_parameters():
        pairs[f"grad.{name}"] = (ours_params[name].grad if name in ours_params else None, p.grad)
    for name, p in ref.named_parameters():       # a weight the forward edits in place (Embedding's max_norm)
        mine = ours_params.get(name)
        if not torch.equal(p.detach(), before_t[name]) or (mine is not None and
                                                           not np.array_equal(mine.data, before[name])):
            pairs[f"after.{name}"] = (None if mine is None else mine.data, p.detach())
    return Result(cfg, pairs, ours, ref, masks, oracle, (x_np, other, dout))




# --------------------------------------------------------------------------------------------------
# the checker
# --------------------------------------------------------------------------------------------------

def reference_in_float64(res):
    """The reference of a float32 :class:`Result` re-run in float64 on the *same* (float32-valued)
    weights, inputs, masks and upstream gradient: ``{name: tensor}`` named like ``res.pairs``.

    This is the exact answer (to ~1e-16) for the very numbers the float32 runs saw.
    """
    cfg64 = dict(res.cfg, dtype="float64")
    ref = copy.deepcopy(res.ref).double()
    ref.zero_grad(set_to_none=True)
    x_np, other, dout = res.inputs
    x = {k: torch.from_numpy(v.astype(np.float64)).requires_grad_(True) for k, v in x_np.items()}
    other = {k: (v.astype(np.float64) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v)
             for k, v in other.items()}
    out, extra = _call(ref, cfg64, x, other, res.oracle)
    out.backward(torch.from_numpy(dout.astype(np.float64)))
    exact = OrderedDict(out=out)
    exact.update(extra)
    exact.update((f"d{k}", v.grad) for k, v in x.items())
    exact.update((f"grad.{k}", p.grad) for k, p in ref.named_parameters())
    exact.update((f"after.{k}", p.detach()) for k, p in ref.named_parameters())
    return exact


NOISE_ULPS = 8
_EPS32 = float(np.finfo(np.float32).eps)


def _scale(t):
    a = convert.to_numpy(t).astype(np.float64) if isinstance(t, torch.Tensor) else np.asarray(t, np.float64)
    return float(np.abs(np.nan_to_num(a, posinf=0, neginf=0)).max()) if a.size else 0.0


def float32_verdicts(pairs, exact, tol=1e-4, slack=10.0):
    """Judge float32 results: ``{name: (ok, rel vs torch float32, ours' rel error, torch's rel error)}``.

    A tensor passes when it agrees with torch's float32 result to ``tol`` (normwise relative), or,
    failing that, when it is within ``tol`` of the exact answer ``exact[name]`` or no more than
    ``slack`` times further from it than torch's own float32 result is. The fallback only matters
    for ill-conditioned entries (a gradient that is a near-total cancellation), where two correct
    float32 computations can differ by more than ``tol``; a bug is off by far more than 10x torch's
    rounding error.

    The errors against the exact answer divide by a scale with a floor, as ``tests/_compare.py``'s
    float64 comparisons do: ``SCALE_FLOOR`` (1e-4) times the largest exact tensor of the comparison.
    A tensor whose exact value is a cancellation far below its siblings' (a saturated softmax row, the
    only path to a parameter, gives a 1e-12 gradient among O(1) ones) is then judged against their
    magnitude, not against its own rounding noise. A tensor that is zero in exact arithmetic (below the
    floor: a key bias's gradient, since a bias added to every key shifts each row of scores by a
    constant) also passes when ours is off by at most ``NOISE_ULPS`` float32 roundings of the largest
    tensor: float32 cannot do better, and torch's own sum may happen to cancel exactly.
    """
    direct = _errors(pairs, pairs_floor(pairs))
    scales = [float(np.abs(np.nan_to_num(convert.to_numpy(t).astype(np.float64))).max())
              for t in exact.values() if t is not None and t.numel()]
    floor = SCALE_FLOOR * max(scales + [0.0])
    verdicts = OrderedDict()
    for name, (ae, re) in direct.items():
        if re <= tol:
            verdicts[name] = (True, re, math.nan, math.nan)
            continue
        ours, ref32 = pairs[name]
        e_ours = _errors({name: (ours, exact[name])}, floor)[name][1]
        e_ref = _errors({name: (ref32, exact[name])}, floor)[name][1]
        noise = _scale(exact[name]) < floor and e_ours * floor <= NOISE_ULPS * _EPS32 * floor / SCALE_FLOOR
        verdicts[name] = (bool(e_ours <= tol or e_ours <= slack * e_ref or noise), re, e_ours, e_ref)
    return verdicts


def assert_float32_close(pairs, exact, tol=1e-4, slack=10.0, context=""):
    """Raise ``AssertionError`` (listing every tensor) unless :func:`float32_verdicts` passes them all."""
    verdicts = float32_verdicts(pairs, exact, tol, slack)
    if all(v[0] for v in verdicts.values()):
        return verdicts
    lines = "\n".join(f"  {name:<40} {'ok  ' if ok else 'FAIL'} vs torch f32 {re:.3e}  ours vs exact {eo:.3e}  "
                      f"torch f32 vs exact {er:.3e}" for name, (ok, re, eo, er) in verdicts.items())
    raise AssertionError(f"{context}float32 results off by more than {tol:g} from torch's float32 results and "
                         f"more than {slack:g}x torch's own float32 error from the exact (float64) answer:\n{lines}")


def verify_float32(res, tol=1e-4, slack=10.0):
    """:func:`assert_float32_close` for a float32 :class:`Result` (the float64 re-run only when needed)."""
    direct = _errors(res.pairs, pairs_floor(res.pairs))
    if all(re <= tol for _, re in direct.values()):
        return
    assert_float32_close(res.pairs, reference_in_float64(res), tol, slack, context=f"{res.cfg}\n")


def pairs_floor(pairs):
    """The smallest scale a relative error divides by: ``SCALE_FLOOR`` times the largest reference tensor
    of the comparison (as ``tests/_compare.py``): a gradient that is exactly zero in exact arithmetic (a
    key bias's) comes out as rounding noise on both sides and is judged against its siblings' size."""
    scales = [float(np.abs(np.nan_to_num(convert.to_numpy(b).astype(np.float64), posinf=0, neginf=0)).max())
              for _, b in pairs.values() if b is not None and convert.to_numpy(b).size]
    return SCALE_FLOOR * max(scales + [0.0])


def _errors(pairs, floor=0.0):
    """``{name: (max abs, normwise rel)}`` (NaN where one side is missing or NaN positions differ); the
    relative error divides by ``max(max|reference|, floor)``."""
    out = OrderedDict()
    for name, (a, b) in pairs.items():
        if a is None and b is None:
            continue
        if a is None or b is None:
            out[name] = (math.nan, math.nan)
            continue
        a = convert.to_numpy(a) if isinstance(a, torch.Tensor) else np.asarray(a)
        b = convert.to_numpy(b) if isinstance(b, torch.Tensor) else np.asarray(b)
        if a.shape != b.shape or not np.array_equal(np.isnan(a), np.isnan(b)):
            out[name] = (math.nan, math.nan)
            continue
        if a.size == 0:
            out[name] = (0.0, 0.0)
            continue
        diff = np.abs(np.nan_to_num(a.astype(np.float64)) - np.nan_to_num(b.astype(np.float64)))
        ae = float(diff.max())
        scale = max(float(np.abs(np.nan_to_num(b.astype(np.float64))).max()), floor)
        out[name] = (ae, ae / scale if scale > 0 else ae)
    return out


def run(trials=5, seed=0, dtype="float64", tol=None, twins=False, kinds=KINDS,
        log: Callable[[str], None] = print):
    """Run the checker; returns ``(table rows, failures)``.

    Rows are ``(module, tensor, max abs, max rel, count, flag)``; failures ``(module, cfg, tensor, rel)``.
    In float32 a tensor above ``tol`` that :func:`float32_verdicts` excuses (ill-conditioned: ours as
    close to the exact answer as torch's float32) is noted, not failed.
    """
    tol = TOLERANCE[dtype] if tol is None else tol
    rng = np.random.default_rng(seed)
    chooser = RandomChooser(rng)
    agg: "OrderedDict[tuple, list]" = OrderedDict()
    failures = []
    jobs = [(k, "torch.nn") for k in kinds] + ([(k, "twin") for k in TWIN_KINDS if k in kinds] if twins else [])
    for kind, oracle in jobs:
        label = kind if oracle == "torch.nn" else f"{kind} [twin, dropout]"
        for _ in range(trials):
            p = chooser.choice((0.1, 0.5)) if oracle == "twin" else 0.0
            sizes = FLOAT32_SIZES if dtype == "float32" else {}
            cfg = draw_config(kind, chooser, dtype=dtype, dropout=p, **sizes)
            try:
                res = compare(cfg, oracle)
                errs = _errors(res.pairs, pairs_floor(res.pairs))
                excused = {}
                if dtype == "float32" and any(not re <= tol for _, re in errs.values()):
                    verdicts = float32_verdicts(res.pairs, reference_in_float64(res), tol)
                    excused = {name: v for name, v in verdicts.items() if v[0] and not v[1] <= tol}
            except Exception as exc:  # a crash is a failure of the checked code, reported like one
                failures.append((label, cfg, f"exception: {type(exc).__name__}: {exc}", math.inf))
                continue
            for tensor, (ae, re) in errs.items():
                row = agg.setdefault((label, tensor), [0.0, 0.0, 0, ""])
                row[0] = max(row[0], ae) if not math.isnan(ae) else math.nan
                row[1] = max(row[1], re) if not math.isnan(re) else math.nan
                row[2] += 1
                if tensor in excused:
                    _, _, e_ours, e_ref = excused[tensor]
                    log(f"  note: {label} {tensor}: rel {re:.2e} vs torch float32, but ours is {e_ours:.2e} "
                        f"from the exact answer and torch float32 {e_ref:.2e} (ill-conditioned; accepted)")
                    row[3] = row[3] or "  (ill-conditioned, accepted)"
                elif not re <= tol:
                    failures.append((label, cfg, tensor, re))
                    row[3] = "  <-- FAIL"
    rows = [(m, t, ae, re, n, flag) for (m, t), (ae, re, n, flag) in agg.items()]
    return rows, failures


def format_table(rows):
    head = f"{'module':<38} {'tensor':<42} {'n':>3} {'max abs':>10} {'max rel':>10}"
    lines = [head, "-" * len(head)]
    for m, t, ae, re, n, flag in rows:
        lines.append(f"{m:<38} {t:<42} {n:>3} {ae:>10.2e} {re:>10.2e}{flag}")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m reference_torch.check", description=plain(__doc__.split("\n\n")[0]))
    ap.add_argument("--trials", type=int, default=5, help="random configurations per module (default 5)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the configuration generator (default 0)")
    ap.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    ap.add_argument("--tol", type=float, default=None,
                    help="relative-error threshold (default 1e-9 for float64, 1e-4 for float32)")
    ap.add_argument("--twins", action="store_true",
                    help="also compare against reference_torch's twins with dropout active (masks replayed)")
    ap.add_argument("--module", action="append", choices=KINDS, metavar="NAME",
                    help=f"only this module (repeatable): one of {', '.join(KINDS)}")
    args = ap.parse_args(argv)
    if args.trials < 1:
        ap.error(f"--trials must be at least 1, got {args.trials}")
    tol = TOLERANCE[args.dtype] if args.tol is None else args.tol
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)        # tiny tensors: threads only add synchronisation cost
    # torch deprecates mixing a bool padding mask with a float attention mask; both are tested on purpose
    warnings.filterwarnings("ignore", message="Support for mismatched")
    rows, failures = run(args.trials, args.seed, args.dtype, tol, args.twins, tuple(args.module or KINDS))
    print(f"numpy_transformer vs torch {torch.__version__}: {args.trials} trial(s) per module, seed {args.seed}, "
          f"{args.dtype}, tolerance {tol:g} (normwise relative)")
    print(format_table(rows))
    worst = max((r[3] for r in rows if not r[5]), default=0.0)
    if failures:
        print(f"\nFAILED: {len(failures)} tensor comparison(s) above {tol:g}:")
        for label, cfg, tensor, re in failures[:20]:
            print(f"  {label}: {tensor} rel {re:.3e}\n    config {cfg}")
        return 1
    print(f"\nOK: worst relative error {worst:.2e} <= {tol:g}")
    return 0
