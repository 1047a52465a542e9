"""The dropout drill: inverted dropout with a given generator (the keep-mask replayed by the grader),
its scale 1/(1-p), its backward through the same mask, and the identity at evaluation."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from .... import functional as F
from ...engine.definition import Case, Exercise, describe, shape_text

#: its place in `drill list`
ORDER = 80
#: the ops it contains: their mistake families (drills/families/) apply to it
OPS = ('dropout',)
#: how torch re-checks the reference (reference_torch/drill_oracle.py reads it)
ORACLE = {'adapter': 'dropout'}


# (shape, p, training)
_DROPOUT_EDGES = [((1, 1), 0.5, True), ((3, 7), 0.0, True), ((2, 5), 1.0, True), ((4, 6), 0.3, False),
                  ((2, 3, 8), 0.1, True), ((5, 4), 0.75, True)]


def _draw_dropout(rng, i):
    if i < len(_DROPOUT_EDGES):
        shape, p, training = _DROPOUT_EDGES[i]
    else:
        shape = tuple(int(n) for n in rng.integers(1, 7, size=int(rng.integers(1, 4))))
        p = float(rng.choice([0.1, 0.2, 0.25, 0.5, 0.6, 0.9])) if rng.random() < 0.7 else float(rng.uniform(0.05, 0.95))
        training = bool(rng.random() < 0.8)
    x = rng.standard_normal(shape)
    dy = rng.standard_normal(shape)
    # the generator the functions get is built afresh from this seed for every run (a 0-d array, not a
    # scalar input, so that it is not reported as an option of the case)
    seed = np.array(int(rng.integers(0, 2**31 - 1)), dtype=np.int64)
    tags = ["p = 0"] if p == 0.0 else ["p = 1"] if p == 1.0 else []
    return Case({"x": x, "p": p, "seed": seed, "training": training, "dy": dy},
                describe(f"x {shape_text(x)}", f"p={p:.3g}", "" if training else "eval"), tags,
                {"1/(1-p)": 1.0 / (1.0 - p)} if 0.0 < p < 1.0 else {})


def _run_dropout(rec, c):
    rng = np.random.default_rng(int(c["seed"]))
    y, cache = rec.pair("dropout_forward", rec.call("dropout_forward", c["x"], c["p"], rng,
                                                    training=c["training"]), "(y, cache)")
    rec.output("y", y)
    (dx,) = rec.unpack("dropout_backward", rec.call("dropout_backward", c["dy"], cache), ["dx"])
    rec.output("dx", dx)


def _ref_dropout():
    """The library's pair; its keep-mask is ``rng.random(x.shape) >= p`` (drawn only when needed)."""
    def dropout_forward(x, p, rng, training=True):
        return F.dropout_forward(x, p, training=training, rng=rng)
    return SimpleNamespace(dropout_forward=dropout_forward, dropout_backward=F.dropout_backward)


EXERCISE = Exercise(
    name="dropout", difficulty="easy", minutes=8,
    covers="inverted dropout: keep with probability 1 - p, scale by 1/(1-p); the same mask in the "
           "backward; the identity at eval",
    functions=("dropout_forward", "dropout_backward"),
    outputs=(("y", "dropout_forward"), ("dx", "dropout_backward")),
    library=("dropout_forward", "dropout_backward"),
    draw=_draw_dropout, run=_run_dropout, reference=_ref_dropout, n_edge=len(_DROPOUT_EDGES),
    topic="regularisation",
)
