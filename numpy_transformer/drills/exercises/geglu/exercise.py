"""The geglu drill: the GELU-gated feed-forward ``(gelu(x W_gate^T) * (x W_up^T)) W_down^T`` (Gemma's,
T5 v1.1's) and its backward (the product rule, GELU's slope, and x feeding two branches)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from .... import functional as F
from ...engine.definition import Case, Exercise, describe, shape_text

#: its place in `drill list`
ORDER = 75
#: the ops it contains: their mistake families (drills/families/) apply to it
OPS = ('activations', 'glu')
#: how torch re-checks the reference (reference_torch/drill_oracle.py reads it)
ORACLE = {'op': 'geglu',
          'inputs': {'x': 'x', 'w_gate': 'W_gate', 'w_up': 'W_up', 'w_down': 'W_down'},
          'upstream': 'dy',
          'outputs': {'y': 'out', 'dx': 'x', 'dW_gate': 'w_gate', 'dW_up': 'w_up', 'dW_down': 'w_down'}}


# (x shape, F): D = 1, F = 1, F = D, no leading batch dim, several leading dims
_EDGES = [((1, 1, 1), 1), ((2, 3, 4), 6), ((5, 3), 3), ((1, 4, 2), 1), ((2, 2, 3, 4), 5)]


def _draw_geglu(rng, i):
    if i < len(_EDGES):
        xshape, f = _EDGES[i]
    else:
        lead = tuple(int(n) for n in rng.integers(1, 5, size=int(rng.integers(1, 3))))
        d = int(rng.integers(1, 7))
        f = d if rng.random() < 0.2 else int(rng.integers(1, 9))
        xshape = lead + (d,)
    d = xshape[-1]
    x = rng.standard_normal(xshape)
    W_gate = 1.5 * rng.standard_normal((f, d)) / math.sqrt(d)
    W_up = rng.standard_normal((f, d)) / math.sqrt(d)
    W_down = rng.standard_normal((d, f)) / math.sqrt(f)
    dy = rng.standard_normal(xshape)
    n = int(np.prod(xshape[:-1]))
    return Case({"x": x, "W_gate": W_gate, "W_up": W_up, "W_down": W_down, "dy": dy},
                describe(f"x {shape_text(x)}", f"F={f}"), [], {"N": n, "D": d, "F": f})


def _run_geglu(rec, c):
    y, cache = rec.pair("geglu_forward", rec.call("geglu_forward", c["x"], c["W_gate"], c["W_up"], c["W_down"]),
                        "(y, cache)")
    rec.output("y", y)
    grads = rec.unpack("geglu_backward", rec.call("geglu_backward", c["dy"], cache),
                       ["dx", "dW_gate", "dW_up", "dW_down"])
    for name, g in zip(("dx", "dW_gate", "dW_up", "dW_down"), grads):
        rec.output(name, g)


def _ref_geglu():
    def geglu_backward(dy, cache):
        return F.geglu_backward(dy, cache)[:4]
    return SimpleNamespace(geglu_forward=F.geglu_forward, geglu_backward=geglu_backward)


EXERCISE = Exercise(
    name="geglu", difficulty="medium", minutes=15,
    covers="the GELU-gated feed-forward GeGLU down(gelu(gate(x)) * up(x)); dx, dW_gate, dW_up, dW_down",
    topic="activations",
    functions=("geglu_forward", "geglu_backward"),
    outputs=(("y", "geglu_forward"), ("dx", "geglu_backward"), ("dW_gate", "geglu_backward"),
             ("dW_up", "geglu_backward"), ("dW_down", "geglu_backward")),
    library=("geglu_forward", "geglu_backward", "gelu_backward"),
    draw=_draw_geglu, run=_run_geglu, reference=_ref_geglu, n_edge=len(_EDGES),
    exception_hints=(
        (r"matmul|not aligned|core dimension|shapes .* mismatch",
         "Weights have torch.nn.Linear's layout (out, in): g = x @ W_gate.T, u = x @ W_up.T, "
         "y = h @ W_down.T; flatten the leading axes for the weight gradients."),
    ),
)
