"""The gelu drill: exact (erf) and tanh GELU, both derivatives."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from .... import functional as F
from ...engine.definition import Case, Exercise, describe, shape_text

#: its place in `drill list`
ORDER = 40
#: the ops it contains: their mistake families (drills/families/) apply to it
OPS = ('activations',)
#: how torch re-checks the reference (reference_torch/drill_oracle.py reads it)
ORACLE = {'op': 'gelu',
          'inputs': {'x': 'x'},
          'options': {'approximate': 'approximate'},
          'upstream': 'dy',
          'outputs': {'y': 'out', 'dx': 'x'}}


def _draw_gelu(rng, i):
    edges = [(np.linspace(-10, 10, 41), "none"), (np.linspace(-10, 10, 41), "tanh"),
             (np.zeros((1, 1)), "none")]
    if i < len(edges):
        x, approx = edges[i]
        x = x.copy()
    else:
        shape = tuple(int(n) for n in rng.integers(1, 7, size=int(rng.integers(1, 4))))
        x = 3.0 * rng.standard_normal(shape)
        approx = "none" if rng.random() < 0.6 else "tanh"
    dy = rng.standard_normal(x.shape)
    return Case({"x": x, "approximate": approx, "dy": dy}, describe(f"x {shape_text(x)}", f"approximate={approx!r}"))


def _run_gelu(rec, c):
    y, cache = rec.pair("gelu_forward", rec.call("gelu_forward", c["x"], approximate=c["approximate"]),
                        "(y, cache)")
    rec.output("y", y)
    (dx,) = rec.unpack("gelu_backward", rec.call("gelu_backward", c["dy"], cache), ["dx"])
    rec.output("dx", dx)


def _ref_gelu():
    return SimpleNamespace(gelu_forward=lambda x, approximate="none": F.gelu_forward(x, approximate),
                           gelu_backward=F.gelu_backward)


EXERCISE = Exercise(
    name="gelu", difficulty="easy", minutes=10,
    covers="GELU exact (x * Phi(x), with erf) and its tanh approximation; both derivatives",
    topic="activations",
    functions=("gelu_forward", "gelu_backward"),
    outputs=(("y", "gelu_forward"), ("dx", "gelu_backward")),
    library=("gelu_forward", "gelu_backward"),
    draw=_draw_gelu, run=_run_gelu, reference=_ref_gelu, n_edge=3,
)
