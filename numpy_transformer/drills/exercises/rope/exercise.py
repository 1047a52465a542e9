"""The rope drill: rotary position embeddings in either pair layout, and the backward as the transposed
rotation."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from .... import functional as F
from ...engine.definition import Case, Exercise, describe, shape_text

#: its place in `drill list`
ORDER = 170
#: the ops it contains: their mistake families (drills/families/) apply to it
OPS = ('rope',)
#: how torch re-checks the reference (reference_torch/drill_oracle.py reads it)
ORACLE = {'op': 'rope',
          'inputs': {'x': 'x'},
          'options': {'positions': 'positions', 'base': 'base', 'interleaved': 'interleaved'},
          'upstream': 'dy',
          'outputs': {'y': 'out', 'dx': 'x'}}


# (shape, first position, base, interleaved): S = 1, Dh = 2, H = 1, a decode step at an offset, both layouts
_ROPE_EDGES = [((1, 1, 4, 8), 0, 10000.0, False), ((1, 1, 4, 8), 0, 10000.0, True), ((5, 2), 3, 10000.0, False),
               ((2, 1, 1, 6), 17, 10000.0, True), ((2, 3, 5, 8), 0, 100.0, False), ((3, 6, 4), 40, 500.0, True)]


def _draw_rope(rng, i):
    if i < len(_ROPE_EDGES):
        shape, start, base, interleaved = _ROPE_EDGES[i]
    else:
        lead = tuple(int(n) for n in rng.integers(1, 4, size=int(rng.integers(0, 3))))
        shape = lead + (int(rng.integers(1, 7)), 2 * int(rng.integers(2, 6)))
        start, base = int(rng.choice([0, 0, int(rng.integers(1, 60))])), float(rng.choice([10000.0, 100.0, 500.0]))
        interleaved = bool(rng.integers(2))
    s = shape[-2]
    x, dy = rng.standard_normal(shape), rng.standard_normal(shape)
    positions = start + np.arange(s)
    tags = (["S=1"] if s == 1 else []) + (["Dh=2"] if shape[-1] == 2 else []) + \
        ([f"positions from {start}"] if start else [])
    return Case({"x": x, "positions": positions, "base": base, "interleaved": interleaved, "dy": dy},
                describe(f"x {shape_text(x)}", f"positions {start}..{start + s - 1}", f"base={base:g}",
                      f"interleaved={interleaved}"), tags, {"S": s, "Dh": shape[-1]})


def _run_rope(rec, c):
    y, cache = rec.pair("rope_forward", rec.call("rope_forward", c["x"], c["positions"], base=c["base"],
                                                 interleaved=c["interleaved"]), "(y, cache)")
    rec.output("y", y)
    (dx,) = rec.unpack("rope_backward", rec.call("rope_backward", c["dy"], cache), ["dx"])
    rec.output("dx", dx)


def _ref_rope():
    return SimpleNamespace(
        rope_forward=lambda x, positions, base=10000.0, interleaved=False: F.rope_forward(x, positions, base,
                                                                                          interleaved),
        rope_backward=F.rope_backward)


EXERCISE = Exercise(
    name="rope", difficulty="medium", minutes=12,
    covers="rotary embeddings: pairs (i, i + Dh/2) or (2i, 2i+1), frequencies base^(-2i/Dh); backward R(-theta)",
    aliases=('rotary',), topic="positions",
    functions=("rope_forward", "rope_backward"),
    outputs=(("y", "rope_forward"), ("dx", "rope_backward")),
    library=("rope_forward", "rope_backward"),
    draw=_draw_rope, run=_run_rope, reference=_ref_rope, n_edge=len(_ROPE_EDGES),
)
