"""The linear drill: ``y = x W^T + b`` with torch's (Dout, Din) weight layout and any leading dims."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from .... import functional as F
from ...engine.definition import Case, Exercise, describe, shape_text

#: its place in `drill list`
ORDER = 60
#: how torch re-checks the reference (reference_torch/drill_oracle.py reads it)
ORACLE = {'op': 'linear',
          'inputs': {'x': 'x', 'weight': 'W', 'bias': 'b'},
          'upstream': 'dy',
          'outputs': {'y': 'out', 'dx': 'x', 'dW': 'weight', 'db': 'bias'}}
#: the ops it contains: their mistake families (drills/families/) apply to it
OPS = ('linear',)


def _draw_linear(rng, i):
    edges = [((1, 1), 1), ((2, 4, 3), 3), ((5, 2), 4), ((1, 1, 6), 1), ((3, 3), 3)]
    if i < len(edges):
        xshape, dout = edges[i]
    else:
        lead = tuple(int(n) for n in rng.integers(1, 5, size=int(rng.integers(1, 3))))
        din = int(rng.integers(1, 7))
        dout = din if rng.random() < 0.3 else int(rng.integers(1, 7))
        xshape = lead + (din,)
    din = xshape[-1]
    x = rng.standard_normal(xshape)
    W = rng.standard_normal((dout, din)) / math.sqrt(din)
    b = rng.standard_normal(dout)
    dy = rng.standard_normal(xshape[:-1] + (dout,))
    n = int(np.prod(xshape[:-1]))
    return Case({"x": x, "W": W, "b": b, "dy": dy}, describe(f"x {shape_text(x)}", f"W {shape_text(W)}"), [], {"N": n})


def _run_linear(rec, c):
    y, cache = rec.pair("linear_forward", rec.call("linear_forward", c["x"], c["W"], c["b"]), "(y, cache)")
    rec.output("y", y)
    dx, dW, db = rec.unpack("linear_backward", rec.call("linear_backward", c["dy"], cache), ["dx", "dW", "db"])
    rec.output("dx", dx)
    rec.output("dW", dW)
    rec.output("db", db)


def _ref_linear():
    return SimpleNamespace(linear_forward=F.linear_forward, linear_backward=F.linear_backward)


EXERCISE = Exercise(
    name="linear", difficulty="easy", minutes=10,
    covers="y = x W^T + b with torch's (Dout, Din) weight layout and any leading dims; dx, dW, db",
    topic="backprop basics",
    functions=("linear_forward", "linear_backward"),
    outputs=(("y", "linear_forward"), ("dx", "linear_backward"), ("dW", "linear_backward"),
             ("db", "linear_backward")),
    library=("linear_forward", "linear_backward"),
    draw=_draw_linear, run=_run_linear, reference=_ref_linear, n_edge=5,
    exception_hints=(
        (r"matmul|not aligned|core dimension|shapes .* mismatch",
         "W is stored (Dout, Din), as torch.nn.Linear: y = x @ W.T + b, dx = dy @ W, "
         "dW = dy^T x with the leading axes flattened."),
    ),
)
