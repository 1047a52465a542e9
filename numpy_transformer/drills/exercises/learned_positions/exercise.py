"""The learned_positions drill: a trained table of positions added to the token vectors (GPT-2's
``wpe``), y = x + W[offset:offset+S]; its backward sums over the batch (every row used the same
positions) and leaves the unused rows at zero."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from .... import nn
from ...engine.definition import Case, Exercise, describe, shape_text

#: its place in `drill list`
ORDER = 160
#: how torch re-checks the reference (reference_torch/drill_oracle.py reads it)
ORACLE = {'adapter': 'learned_positions'}
#: the ops it contains (their mistake families: numpy_transformer/drills/families/)
OPS = ("learned_positions",)


def _draw_learned_positions(rng, i):
    edges = [(3, 4, 5, 8, 0), (1, 1, 2, 4, 3), (4, 6, 3, 6, 0)]
    if i < len(edges):
        b, s, d, max_len, offset = edges[i]
    else:
        b, s, d = int(rng.integers(1, 5)), int(rng.integers(1, 7)), int(rng.integers(1, 6))
        max_len = s + int(rng.integers(0, 6))
        offset = int(rng.integers(0, max_len - s + 1))
    x = rng.standard_normal((b, s, d))
    W = rng.standard_normal((max_len, d))
    dy = rng.standard_normal((b, s, d))
    tags = (["batch > 1"] if b > 1 else []) + (["offset > 0 (decode step)"] if offset else [])
    return Case({"x": x, "W": W, "offset": offset, "dy": dy},
                describe(f"x {shape_text(x)}", f"W {shape_text(W)}", f"offset={offset}"), tags,
                options={"batch > 1": b > 1, "offset > 0": offset > 0, "S < max_len": s < max_len})


def _run_learned_positions(rec, c):
    y, cache = rec.pair("learned_positions_forward",
                        rec.call("learned_positions_forward", c["x"], c["W"], c["offset"]), "(y, cache)")
    rec.output("y", y)
    dx, dW = rec.unpack("learned_positions_backward", rec.call("learned_positions_backward", c["dy"], cache),
                        ["dx", "dW"])
    rec.output("dx", dx)
    rec.output("dW", dW)


def _ref_learned_positions():
    """nt.LearnedPositionalEmbedding with the case's table."""
    def forward(x, W, offset=0):
        m = nn.LearnedPositionalEmbedding(W.shape[0], W.shape[1], dtype=np.float64)
        m.weight.data[...] = W
        return m(x, offset=offset), m

    def backward(dy, m):
        dx = m.backward(dy)
        return dx, m.weight.grad

    return SimpleNamespace(learned_positions_forward=forward, learned_positions_backward=backward)


EXERCISE = Exercise(
    name="learned_positions", difficulty="easy", minutes=8,
    covers="a learned position table y = x + W[offset:offset+S]; dW sums over the batch, unused rows zero",
    functions=("learned_positions_forward", "learned_positions_backward"),
    outputs=(("y", "learned_positions_forward"), ("dx", "learned_positions_backward"),
             ("dW", "learned_positions_backward")),
    library=(), reference_name="numpy_transformer.nn.LearnedPositionalEmbedding (verified)",
    draw=_draw_learned_positions, run=_run_learned_positions, reference=_ref_learned_positions,
    n_edge=3, topic="positions",
)
