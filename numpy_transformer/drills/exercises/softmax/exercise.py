"""The softmax drill: a numerically stable softmax over the last axis and its backward."""

from __future__ import annotations

from types import SimpleNamespace

from .... import functional as F
from ...engine.definition import Case, Exercise, describe, shape_text

#: its place in `drill list`
ORDER = 10
#: the ops it contains: their mistake families (drills/families/) apply to it
OPS = ('softmax',)
#: how torch re-checks the reference (reference_torch/drill_oracle.py reads it)
ORACLE = {'op': 'softmax',
          'inputs': {'x': 'x'},
          'static': {'axis': -1},
          'upstream': 'dy',
          'outputs': {'y': 'out', 'dx': 'x'}}


_SOFTMAX_EDGES = [((1, 1), 1.0), ((1, 6), 3.0), ((4, 1), 3.0), ((2, 3, 5), 1000.0), ((3, 4), 3.0)]


def _draw_softmax(rng, i):
    if i < len(_SOFTMAX_EDGES):
        shape, scale = _SOFTMAX_EDGES[i]
    else:
        lead = tuple(int(n) for n in rng.integers(1, 5, size=int(rng.integers(1, 3))))
        shape = lead + (int(rng.integers(1, 9)),)
        scale = 1000.0 if rng.random() < 0.2 else 3.0
    x = rng.standard_normal(shape) * scale
    dy = rng.standard_normal(shape)
    tags = ["large logits (exp overflows without the max subtraction)"] if scale > 100 else []
    return Case({"x": x, "dy": dy}, describe(f"x {shape_text(x)}"), tags, {"V": shape[-1]})


def _run_softmax(rec, c):
    y, cache = rec.pair("softmax_forward", rec.call("softmax_forward", c["x"]), "(y, cache)")
    rec.output("y", y)
    (dx,) = rec.unpack("softmax_backward", rec.call("softmax_backward", c["dy"], cache), ["dx"])
    rec.output("dx", dx)


def _ref_softmax():
    return SimpleNamespace(softmax_forward=lambda x: F.softmax_forward(x, axis=-1),
                           softmax_backward=F.softmax_backward)


EXERCISE = Exercise(
    name="softmax", difficulty="easy", minutes=10,
    covers="numerically stable softmax over the last axis; its backward (Jacobian-vector product)",
    topic="numerics",
    functions=("softmax_forward", "softmax_backward"),
    outputs=(("y", "softmax_forward"), ("dx", "softmax_backward")),
    library=("softmax_forward", "softmax_backward"),
    draw=_draw_softmax, run=_run_softmax, reference=_ref_softmax, n_edge=len(_SOFTMAX_EDGES),
)
