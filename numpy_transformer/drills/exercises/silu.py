"""The silu drill: SiLU / Swish, y = x * sigmoid(x), with an overflow-free sigmoid, and its derivative."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ... import functional as F
from .. import variants as V
from ._types import Case, Exercise, Mistake, _desc, _shape


def _draw_silu(rng, i):
    edges = [np.linspace(-12, 12, 49), np.array([-1000.0, -100.0, -30.0, 0.0, 30.0, 100.0, 1000.0]),
             np.zeros((1, 1))]
    if i < len(edges):
        x = edges[i].copy()
    else:
        shape = tuple(int(n) for n in rng.integers(1, 7, size=int(rng.integers(1, 4))))
        x = 4.0 * rng.standard_normal(shape)
    dy = rng.standard_normal(x.shape)
    tags = ["large |x| (overflow)"] if np.abs(x).max() > 500 else []
    return Case({"x": x, "dy": dy}, _desc(f"x {_shape(x)}", f"|x| <= {np.abs(x).max():.3g}"), tags)


def _run_silu(rec, c):
    y, cache = rec.pair("silu_forward", rec.call("silu_forward", c["x"]), "(y, cache)")
    rec.output("y", y)
    (dx,) = rec.unpack("silu_backward", rec.call("silu_backward", c["dy"], cache), ["dx"])
    rec.output("dx", dx)


def _ref_silu():
    return SimpleNamespace(silu_forward=F.silu_forward, silu_backward=F.silu_backward)


SILU = Exercise(
    name="silu", difficulty="easy", minutes=8,
    covers="SiLU / Swish x * sigmoid(x), finite for x = +-1000; its derivative (product rule)",
    functions=("silu_forward", "silu_backward"),
    outputs=(("y", "silu_forward"), ("dx", "silu_backward")),
    library=("silu_forward", "silu_backward"),
    draw=_draw_silu, run=_run_silu, reference=_ref_silu, variant=V.silu_impl, n_edge=3,
    mistakes=(
        Mistake("silu_backward_no_product_rule", "SiLU backward dx = dy * sigmoid(x): the x * s * (1 - s) term "
                "missing",
                "y = x * sigmoid(x) is a product; the x in front is not a constant. The product rule gives "
                "y' = s + x * s * (1 - s).",
                "dx = dy * (s + x * s * (1 - s)) with s = sigmoid(x).",
                ({"backward": "sigmoid_only"},)),
        Mistake("silu_backward_sigmoid_derivative", "SiLU backward uses the sigmoid's derivative s * (1 - s) alone",
                "s * (1 - s) is the derivative of sigmoid(x), not of x * sigmoid(x); the product rule adds s and "
                "multiplies the s' term by x.",
                "dx = dy * (s + x * s * (1 - s)).",
                ({"backward": "sigmoid_derivative"},)),
        Mistake("silu_unstable_sigmoid", "sigmoid computed as exp(x) / (1 + exp(x)): inf / inf = nan for large x",
                "exp(x) overflows to inf for x > ~709 in float64, and inf / inf is nan.",
                "With e = np.exp(-np.abs(x)): s = np.where(x >= 0, 1, e) / (1 + e).",
                ({"sigmoid": "exp_ratio"},)),
        Mistake("silu_gelu_sigmoid_approximation", "x * sigmoid(1.702 x) (the sigmoid form of GELU) used for SiLU",
                "SiLU is x * sigmoid(x) (Swish with beta = 1); 1.702 is the constant of GELU's sigmoid "
                "approximation.",
                "y = x * sigmoid(x), dx = dy * (s + x * s * (1 - s)).",
                ({"beta": 1.702},)),
    ),
)
