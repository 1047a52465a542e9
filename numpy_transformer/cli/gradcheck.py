"""``numpy-transformer gradcheck``: every op's and every module's gradients, checked two ways.

For each functional op and each module, and for each of its inputs and parameters, the analytic
gradient of ``L = sum(dout * f(x))`` (``dout`` random, seeded) is compared with

(a) central finite differences in float64 (:func:`numpy_transformer.gradcheck.gradcheck`), and
(b) torch's autograd through ``torch.nn.functional`` / ``torch.nn`` with the same weights
    (``reference_torch.autograd_check``, imported lazily through :mod:`numpy_transformer.oracle`: the
    column reads "torch not installed" without torch). ``--dtype float32`` runs (b) in float32 (our
    float32 code against torch's); (a) is always float64.

The exit status is 1 when any gradient fails either check.
"""

from __future__ import annotations

import argparse
import functools
import math
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from .. import functional as F
from .. import nn, oracle
from ..gradcheck import DEFAULT_ATOL, DEFAULT_EPS, DEFAULT_RTOL, _input_names, gradcheck, gradcheck_module
from . import nonnegative_int, positive_float

__all__ = ["register", "run", "op_cases", "module_cases", "TORCH_TOL"]

# Normwise relative error allowed against torch (as tests/_compare.py): max|ours - torch| / max|torch|.
TORCH_TOL = {"float64": 1e-10, "float32": 1e-4}


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


def _away_from_zero(x, margin=0.1):
    """Keep a ReLU's input clear of its kink (a finite difference across it is meaningless)."""
    return np.sign(x) * (np.abs(x) + margin) + (x == 0) * margin


def _mask_rows_open(mask):
    """A bool mask with at least one attendable key per row (torch.nn gives NaN on fully masked rows)."""
    mask = mask.copy()
    mask[..., 0] = False
    return mask


def _linear_bwd(dout, cache):
    dx, dw, db = F.linear_backward(dout, cache)
    return {"x": dx, "weight": dw, "bias": db}


def _ln_bwd(dout, cache):
    dx, dw, db = F.layer_norm_backward(dout, cache)
    return {"x": dx, "weight": dw, "bias": db}


def _sdpa_bwd(dout, cache):
    dq, dk, dv = F.scaled_dot_product_attention_backward(dout, cache)
    return {"q": dq, "k": dk, "v": dv}


def _flash_bwd(dout, cache):
    dq, dk, dv = F.flash_attention_backward(dout, cache)
    return {"q": dq, "k": dk, "v": dv}


def _mha_fwd(query, key, value, out_proj_weight, num_heads, in_proj_weight=None, in_proj_bias=None,
             out_proj_bias=None, q_proj_weight=None, k_proj_weight=None, v_proj_weight=None, **static):
    return F.multi_head_attention_forward(
        query, key, value, num_heads, in_proj_weight=in_proj_weight, in_proj_bias=in_proj_bias,
        out_proj_weight=out_proj_weight, out_proj_bias=out_proj_bias, q_proj_weight=q_proj_weight,
        k_proj_weight=k_proj_weight, v_proj_weight=v_proj_weight, **static)


def _mha_bwd(dout, cache):
    dq, dk, dv, grads = F.multi_head_attention_backward(dout, cache)
    out = {"query": dq, "key": dk, "value": dv}
    out.update({k.replace(".", "_"): v for k, v in grads.items()})       # out_proj.weight -> out_proj_weight
    return out


def op_cases(seed=0):
    """Every functional op, with small random inputs (float64) and the constants each needs."""
    rng = np.random.default_rng(seed)
    n = rng.standard_normal
    ids = np.array([[1, 3, 1, 0], [5, 3, 3, 2]])                        # repeated ids: the scatter-add
    cases = [
        OpCase("linear", "linear", {"x": n((2, 3, 4)), "weight": n((5, 4)), "bias": n(5)}, {},
               F.linear_forward, _linear_bwd),
        OpCase("linear (no bias)", "linear", {"x": n((3, 4)), "weight": n((2, 4))}, {},
               F.linear_forward, lambda d, c: {k: v for k, v in _linear_bwd(d, c).items() if k != "bias"}),
        OpCase("embedding", "embedding", {"ids": ids, "weight": n((6, 3))}, {},
               F.embedding_forward, lambda d, c: {"weight": F.embedding_backward(d, c)}),
        OpCase("embedding (padding_idx=0, FD skips the frozen row)", "embedding",
               {"ids": ids, "weight": n((6, 3))}, {"padding_idx": 0},
               F.embedding_forward, lambda d, c: {"weight": F.embedding_backward(d, c)},
               exclude={"weight": 0}),          # the padding row is frozen by design: not a derivative
        OpCase("layer_norm", "layer_norm", {"x": 3 * n((2, 3, 5)) + 1, "weight": n(5), "bias": n(5)}, {"eps": 1e-5},
               F.layer_norm_forward, _ln_bwd),
        OpCase("layer_norm (no affine)", "layer_norm", {"x": n((4, 6))}, {"eps": 1e-5},
               F.layer_norm_forward, lambda d, c: {"x": _ln_bwd(d, c)["x"]}),
        OpCase("softmax (axis=-1)", "softmax", {"x": 2 * n((2, 3, 4))}, {"axis": -1},
               F.softmax_forward, lambda d, c: {"x": F.softmax_backward(d, c)}),
        OpCase("softmax (axis=1)", "softmax", {"x": 2 * n((2, 3, 4))}, {"axis": 1},
               F.softmax_forward, lambda d, c: {"x": F.softmax_backward(d, c)}),
        OpCase("relu", "relu", {"x": _away_from_zero(n((3, 5)))}, {},
               F.relu_forward, lambda d, c: {"x": F.relu_backward(d, c)}),
        OpCase("gelu (approximate=none)", "gelu", {"x": 3 * n((3, 5))}, {"approximate": "none"},
               F.gelu_forward, lambda d, c: {"x": F.gelu_backward(d, c)}),
        OpCase("gelu (approximate=tanh)", "gelu", {"x": 3 * n((3, 5))}, {"approximate": "tanh"},
               F.gelu_forward, lambda d, c: {"x": F.gelu_backward(d, c)}),
        OpCase("dropout (fixed mask, p=0.3)", "dropout", {"x": n((3, 5))},
               {"p": 0.3, "mask": rng.random((3, 5)) >= 0.3, "training": True},
               F.dropout_forward, lambda d, c: {"x": F.dropout_backward(d, c)}),
    ]
    qkv = lambda s, t: {"q": n((2, 2, s, 4)), "k": n((2, 2, t, 4)), "v": n((2, 2, t, 3))}  # noqa: E731
    bool_mask = rng.random((3, 5)) < 0.4
    bool_mask[1] = True                                  # a fully masked query row: zero output and grads
    cases += [
        OpCase("sdpa", "scaled_dot_product_attention", qkv(3, 5), {},
               F.scaled_dot_product_attention_forward, _sdpa_bwd),
        OpCase("sdpa (bool mask)", "scaled_dot_product_attention", qkv(3, 5), {"attn_mask": bool_mask},
               F.scaled_dot_product_attention_forward, _sdpa_bwd),
        OpCase("sdpa (float mask)", "scaled_dot_product_attention", qkv(3, 5), {"attn_mask": n((3, 5))},
               F.scaled_dot_product_attention_forward, _sdpa_bwd),
        OpCase("sdpa (causal)", "scaled_dot_product_attention", qkv(3, 5), {"is_causal": True},
               F.scaled_dot_product_attention_forward, _sdpa_bwd),
        OpCase("sdpa (causal + bool mask)", "scaled_dot_product_attention", qkv(4, 4),
               {"is_causal": True, "attn_mask": _mask_rows_open(rng.random((4, 4)) < 0.3)},
               F.scaled_dot_product_attention_forward, _sdpa_bwd),
        OpCase("flash_attention (tiles 2x3, causal + bool mask)", "scaled_dot_product_attention", qkv(5, 5),
               {"is_causal": True, "attn_mask": _mask_rows_open(rng.random((5, 5)) < 0.3), "block_q": 2,
                "block_k": 3}, F.flash_attention_forward, _flash_bwd),
        OpCase("flash_attention (tiles 2x2, float mask)", "scaled_dot_product_attention", qkv(3, 5),
               {"attn_mask": n((3, 5)), "block_q": 2, "block_k": 2}, F.flash_attention_forward, _flash_bwd),
    ]
    d, h = 8, 2
    packed = lambda bias=True: {"in_proj_weight": n((3 * d, d)) / math.sqrt(d),  # noqa: E731
                                "out_proj_weight": n((d, d)) / math.sqrt(d),
                                **({"in_proj_bias": n(3 * d), "out_proj_bias": n(d)} if bias else {})}
    kpm = np.zeros((2, 4), dtype=bool)
    kpm[1, 3] = True
    cases += [
        OpCase("multi_head_attention (bool masks)", "multi_head_attention",
               {"query": n((2, 3, d)), "key": n((2, 4, d)), "value": n((2, 4, d)), **packed()},
               {"num_heads": h, "attn_mask": _mask_rows_open(rng.random((3, 4)) < 0.3), "key_padding_mask": kpm},
               _mha_fwd, _mha_bwd),
        OpCase("multi_head_attention (kdim=3, vdim=5, float mask)", "multi_head_attention",
               {"query": n((2, 3, d)), "key": n((2, 4, 3)), "value": n((2, 4, 5)),
                "q_proj_weight": n((d, d)) / 3, "k_proj_weight": n((d, 3)) / 2, "v_proj_weight": n((d, 5)) / 2,
                "in_proj_bias": n(3 * d), "out_proj_weight": n((d, d)) / 3, "out_proj_bias": n(d)},
               {"num_heads": h, "attn_mask": n((2 * h, 3, 4))}, _mha_fwd, _mha_bwd),
        OpCase("multi_head_attention (causal, no bias)", "multi_head_attention",
               {"query": n((2, 4, d)), "key": n((2, 4, d)), "value": n((2, 4, d)), **packed(bias=False)},
               {"num_heads": h, "is_causal": True}, _mha_fwd, _mha_bwd),
    ]
    return cases


def _encoder_layer(dtype, activation, norm_first, seed):
    return nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.1, activation=activation,
                                      norm_first=norm_first, dtype=dtype, seed=seed)


def module_cases(seed=0):
    """Every module, built from ``seed`` (``build(dtype)``), with small random inputs."""
    rng = np.random.default_rng(seed + 1)
    n = rng.standard_normal
    ids = np.array([[1, 3, 1, 0, 6], [5, 1, 3, 2, 1]])
    kpm = np.zeros((2, 4), dtype=bool)
    kpm[0, 2] = True
    attn_mask = _mask_rows_open(rng.random((3, 4)) < 0.3)
    src_kpm = np.zeros((2, 5), dtype=bool)
    src_kpm[1, 3:] = True

    def randomise(m):
        """LayerNorm starts at weight 1, bias 0 (and attention biases at 0): random values test more."""
        r = np.random.default_rng(seed + 2)
        for name, p in m.named_parameters():
            if name.endswith("bias") or (name.endswith("weight") and p.data.ndim == 1):
                p.data[...] = r.standard_normal(p.shape) * (0.5 if name.endswith("bias") else 0.3) + \
                    (1.0 if p.data.ndim == 1 and name.endswith("weight") else 0.0)
        return m

    def encoder(dtype):
        layer = _encoder_layer(dtype, "gelu", False, seed)
        return nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8, dtype=dtype), seed=seed)

    return [
        ModuleCase("Linear", lambda dt: nn.Linear(4, 5, dtype=dt, seed=seed), [n((2, 3, 4))]),
        ModuleCase("Embedding", lambda dt: nn.Embedding(7, 4, dtype=dt, seed=seed), [ids]),
        ModuleCase("Embedding (padding_idx=1, FD skips the frozen row)",
                   lambda dt: nn.Embedding(7, 4, padding_idx=1, dtype=dt, seed=seed),
                   [ids], exclude={"weight": 1}),
        ModuleCase("LayerNorm", lambda dt: randomise(nn.LayerNorm(6, dtype=dt)), [2 * n((2, 3, 6)) + 1]),
        ModuleCase("MultiheadAttention (bool masks)",
                   lambda dt: randomise(nn.MultiheadAttention(8, 2, dtype=dt, seed=seed)),
                   [n((2, 3, 8)), n((2, 4, 8)), n((2, 4, 8))],
                   {"attn_mask": attn_mask, "key_padding_mask": kpm}),
        ModuleCase("MultiheadAttention (kdim=3, vdim=5)",
                   lambda dt: randomise(nn.MultiheadAttention(8, 2, kdim=3, vdim=5, dtype=dt, seed=seed)),
                   [n((2, 3, 8)), n((2, 4, 3)), n((2, 4, 5))], {"attn_mask": n((3, 4))}),
        ModuleCase("MultiheadAttention (batch_first=False, causal)",
                   lambda dt: randomise(nn.MultiheadAttention(8, 2, batch_first=False, dtype=dt, seed=seed)),
                   [n((4, 2, 8)), n((4, 2, 8)), n((4, 2, 8))], {"is_causal": True}),
        ModuleCase("MultiheadAttention (attention='tiled', block_size=2)",
                   lambda dt: randomise(nn.MultiheadAttention(8, 2, attention="tiled", block_size=2, dtype=dt,
                                                              seed=seed)),
                   [n((2, 5, 8)), n((2, 5, 8)), n((2, 5, 8))],
                   {"attn_mask": _mask_rows_open(rng.random((5, 5)) < 0.3), "need_weights": False}),
        ModuleCase("TransformerEncoderLayer (relu, post-LN)",
                   lambda dt: randomise(_encoder_layer(dt, "relu", False, seed)), [n((2, 5, 8))],
                   {"src_key_padding_mask": src_kpm}),
        ModuleCase("TransformerEncoderLayer (gelu, post-LN)",
                   lambda dt: randomise(_encoder_layer(dt, "gelu", False, seed)), [n((2, 5, 8))]),
        ModuleCase("TransformerEncoderLayer (relu, pre-LN)",
                   lambda dt: randomise(_encoder_layer(dt, "relu", True, seed)), [n((2, 5, 8))],
                   {"is_causal": True}),
        ModuleCase("TransformerEncoderLayer (gelu, pre-LN)",
                   lambda dt: randomise(_encoder_layer(dt, "gelu", True, seed)), [n((2, 5, 8))],
                   {"src_key_padding_mask": src_kpm}),
        ModuleCase("TransformerEncoderLayer (gelu, pre-LN, tiled attention)",
                   lambda dt: randomise(nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, activation="gelu",
                                                                   norm_first=True, dtype=dt, seed=seed,
                                                                   attention="tiled", block_size=2)),
                   [n((2, 5, 8))], {"is_causal": True}),
        ModuleCase("TransformerEncoder (2 layers, final norm, causal)", lambda dt: randomise(encoder(dt)),
                   [n((2, 5, 8))], {"mask": F.causal_mask(5)}),
        ModuleCase("TokenEmbedding", lambda dt: nn.TokenEmbedding(7, 4, dtype=dt, seed=seed), [ids]),
        ModuleCase("PositionalEncoding", lambda dt: nn.PositionalEncoding(4, max_len=10, dtype=dt), [n((2, 5, 4))]),
    ]


# --------------------------------------------------------------------------------------------------
# our analytic gradients in a given dtype (for the torch comparison)
# --------------------------------------------------------------------------------------------------

def _cast(v, dtype):
    return v.astype(dtype) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v


def _dout(shape, seed):
    return np.random.default_rng([seed, 7]).standard_normal(shape)


def _ours_op(case, dtype, seed):
    inputs = {k: _cast(v, dtype) for k, v in case.inputs.items()}
    static = {k: _cast(v, dtype) for k, v in case.static.items()}
    res = case.forward(**inputs, **static)
    out, cache = res[0], res[-1]
    dout = _dout(out.shape, seed)
    grads = case.backward(dout.astype(dtype), cache)
    return dout, {k: v for k, v in grads.items() if v is not None}


def _ours_module(module, case, dtype, seed):
    inputs = [_cast(v, dtype) for v in case.inputs]
    kwargs = {k: _cast(v, dtype) for k, v in case.forward_kwargs.items()}
    module.eval()
    out = module(*inputs, **kwargs)
    out = out[0] if isinstance(out, tuple) else out
    dout = _dout(out.shape, seed)
    module.zero_grad()
    dx = module.backward(dout.astype(dtype))
    names = _input_names(module, len(inputs))
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
    fd_rel: float = math.nan
    fd_tol: float = math.nan           # the relative error FD allows: rtol + atol / scale
    fd_pass: Optional[bool] = None
    fd_note: str = ""
    t_abs: float = math.nan
    t_rel: float = math.nan
    t_pass: Optional[bool] = None
    t_note: str = ""

    @property
    def passed(self):
        return self.fd_pass is not False and self.t_pass is not False


def _load_torch_side():
    """``(module, None)``, or ``(None, why)`` when torch (or the reference) is unavailable."""
    try:
        return oracle.load("autograd_check"), None
    except oracle.OracleUnavailable as exc:
        return None, exc.reason


def _torch_errors(ours, ref):
    a, b = np.asarray(ours, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    if a.shape != b.shape:
        return math.inf, math.inf
    abs_err = float(np.max(np.abs(a - b))) if a.size else 0.0
    scale = float(np.max(np.abs(b))) if b.size else 0.0
    return abs_err, (abs_err / scale if scale > 0 else abs_err)


def _fd_rows(case_name, result):
    rows = {}
    for c in result.checks:
        r = Row(case_name, c.name, c.shape, c.max_abs_err, c.max_rel_err,
                result.rtol + (result.atol / c.scale if c.scale > 0 else math.inf), c.passed)
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
                        verbose=False)
    else:
        res = gradcheck_module(case.build(np.float64), *case.inputs, forward_kwargs=case.forward_kwargs,
                               eps=args.eps, seed=seed, exclude=case.exclude, verbose=False)
    rows = _fd_rows(case.name, res)
    for name, why in res.skipped:
        if why == "the backward returned None":
            rows[name] = Row(case.name, name, (), fd_note="no gradient")
    if torch_side is None:
        for r in rows.values():
            r.t_note = torch_why
        return list(rows.values())
    if isinstance(case, OpCase):
        dout, ours = _ours_op(case, args.dtype, seed)
        ref = torch_side.functional_grads(case.op, case.inputs, case.static, dout, np.dtype(args.dtype))
    else:
        module = _module_in(case, args.dtype, seed)
        dout, ours = _ours_module(module, case, args.dtype, seed)
        names = _input_names(module, len(case.inputs))
        ref = torch_side.module_grads(module, case.inputs, names, case.forward_kwargs, dout, np.dtype(args.dtype))
    for name in list(ref) + [n for n in ours if n not in ref]:
        r = rows.get(name)
        if r is None:
            r = rows[name] = Row(case.name, name, np.shape(ref.get(name, ours.get(name))))
        if name not in ours or ours[name] is None:
            r.t_pass, r.t_note = False, "ours: no gradient"
        elif ref.get(name) is None:
            r.t_pass, r.t_note = False, "torch: no gradient"
        else:
            r.t_abs, r.t_rel = _torch_errors(ours[name], ref[name])
            r.t_pass = r.t_rel <= tol
            if not r.t_pass:
                r.t_note = f"{case.name} / {name}: torch disagrees: rel {r.t_rel:.3e} > {tol:g}"
    return list(rows.values())


def _e(x):
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2e}"


def _status(p):
    return "-" if p is None else ("PASS" if p else "FAIL")


def run(args):
    t0 = time.perf_counter()
    torch_side, torch_why = _load_torch_side()
    tol = TORCH_TOL[args.dtype]
    cases = op_cases(args.seed) + module_cases(args.seed)
    if args.only:
        pats = [p.lower() for p in args.only]
        cases = [c for c in cases if any(p in c.name.lower() for p in pats)]
        if not cases:
            print(f"no case matches {args.only}")
            return 2
    torch_desc = (f"torch {torch_side.TORCH_VERSION} autograd in {args.dtype} (our {args.dtype} code against "
                  f"torch.nn / torch.nn.functional with the same weights); pass: max|ours - torch| / max|torch| "
                  f"<= {tol:g}" if torch_side else torch_why)
    print("numpy-transformer gradcheck: gradients of L = sum(dout * f(x)), dout ~ N(0, 1), "
          f"seed {args.seed}")
    print(f"  (a) FD: central finite differences in float64, eps {args.eps:g}; pass: max|ours - fd| <= "
          f"{DEFAULT_ATOL:g} + {DEFAULT_RTOL:g} * max|fd|  (shown as a relative tolerance)")
    print(f"  (b) torch: {torch_desc}")
    cw = max(len(c.name) for c in cases)
    head = (f"{'case':<{cw}} {'tensor':<34} {'shape':<13} | {'FD abs':>8} {'FD rel':>8} {'FD tol':>8} {'FD':>4} | "
            f"{'torch abs':>9} {'torch rel':>9} {'tol':>7} {'torch':>5} | result")
    print(head)
    print("-" * len(head))
    all_rows, notes = [], []
    for case in cases:
        try:
            rows = _run_case(case, args, torch_side, torch_why, tol)
        except Exception as exc:                       # a broken op: report it, keep going
            rows = [Row(case.name, "(error)", (), fd_pass=False, fd_note=f"{case.name}: {type(exc).__name__}: {exc}")]
        for r in rows:
            if torch_side is None:
                short = torch_why if torch_why == "torch not installed" else "torch reference unavailable"
                torch_cols = f"{short:>38}"
            else:
                torch_cols = f"{_e(r.t_abs):>9} {_e(r.t_rel):>9} {tol:>7.0e} {_status(r.t_pass):>5}"
            print(f"{r.case:<{cw}} {r.tensor:<34} {str(tuple(r.shape)):<13} | {_e(r.fd_abs):>8} {_e(r.fd_rel):>8} "
                  f"{_e(r.fd_tol):>8} {_status(r.fd_pass):>4} | {torch_cols} | {'PASS' if r.passed else 'FAIL'}")
            notes += [n for n in (r.fd_note if r.fd_pass is False else "",
                                  r.t_note if r.t_pass is False else "") if n]
        all_rows += rows
    failed = [r for r in all_rows if not r.passed]
    worst_fd = max((r.fd_rel for r in all_rows if not math.isnan(r.fd_rel) and r.fd_pass), default=math.nan)
    worst_t = max((r.t_rel for r in all_rows if not math.isnan(r.t_rel) and r.t_pass), default=math.nan)
    print("-" * len(head))
    for n in notes:
        print(n)
    print(f"{len(all_rows)} gradients in {len(cases)} cases, {time.perf_counter() - t0:.1f} s; largest passing "
          f"relative error: FD {_e(worst_fd)}, torch {_e(worst_t)}")
    if failed:
        print(f"FAILED: {len(failed)} gradient(s): " +
              ", ".join(f"{r.case} / {r.tensor}" for r in failed))
        return 1
    print("ALL PASS")
    return 0

