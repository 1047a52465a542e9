"""The silu drill: SiLU / Swish, y = x * sigmoid(x), with an overflow-free sigmoid, and its derivative."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from .... import functional as F
from ...engine.definition import Case, Exercise, describe, shape_text

#: its place in `drill list`
ORDER = 50
#: the ops it contains: their mistake families (drills/families/) apply to it
OPS = ('activations',)
#: how torch re-checks the reference (reference_torch/drill_oracle.py reads it)
ORACLE = {'op': 'silu', 'inputs': {'x': 'x'}, 'upstream': 'dy', 'outputs': {'y': 'out', 'dx': 'x'}}


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
    return Case({"x": x, "dy": dy}, describe(f"x {shape_text(x)}", f"|x| <= {np.abs(x).max():.3g}"), tags)


def _run_silu(rec, c):
    y, cache = rec.pair("silu_forward", rec.call("silu_forward", c["x"]), "(y, cache)")
    rec.output("y", y)
    (dx,) = rec.unpack("silu_backward", rec.call("silu_backward", c["dy"], cache), ["dx"])
    rec.output("dx", dx)


def _ref_silu():
    return SimpleNamespace(silu_forward=F.silu_forward, silu_backward=F.silu_backward)


EXERCISE = Exercise(
    name="silu", difficulty="easy", minutes=8,
    covers="SiLU / Swish x * sigmoid(x), finite for x = +-1000; its derivative (product rule)",
    aliases=('swish',), topic="activations",
    functions=("silu_forward", "silu_backward"),
    outputs=(("y", "silu_forward"), ("dx", "silu_backward")),
    library=("silu_forward", "silu_backward"),
    draw=_draw_silu, run=_run_silu, reference=_ref_silu, n_edge=3,
)
