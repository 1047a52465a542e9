"""The layer_norm drill: LayerNorm over the last axis (biased variance, eps inside the sqrt) and its
three-path backward."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from .... import functional as F
from ...engine.definition import Case, Exercise, describe, shape_text

#: its place in `drill list`
ORDER = 20
#: the ops it contains: their mistake families (drills/families/) apply to it
OPS = ('norms',)
#: how torch re-checks the reference (reference_torch/drill_oracle.py reads it)
ORACLE = {'op': 'layer_norm',
          'inputs': {'x': 'x', 'weight': 'gamma', 'bias': 'beta'},
          'static': {'eps': 1e-05},
          'upstream': 'dy',
          'outputs': {'y': 'out', 'dx': 'x', 'dgamma': 'weight', 'dbeta': 'bias'}}


_LN_EDGES = [((1, 1, 4), 1.0), ((2, 1), 1.0), ((2, 3, 5), 1e-3), ((1, 8), 1.0), ((3, 6), 4.0)]


def _draw_layer_norm(rng, i):
    if i < len(_LN_EDGES):
        shape, scale = _LN_EDGES[i]
    else:
        lead = tuple(int(n) for n in rng.integers(1, 5, size=int(rng.integers(1, 3))))
        shape = lead + (int(rng.integers(2, 9)),)
        scale = float(rng.choice([1.0, 1e-3, 4.0]))
    d = shape[-1]
    offset = rng.standard_normal(shape[:-1] + (1,))
    x = offset + scale * rng.standard_normal(shape)
    gamma = 1.0 + 0.5 * rng.standard_normal(d)
    beta = 0.5 * rng.standard_normal(d)
    dy = rng.standard_normal(shape)
    tags = ["small variance (eps matters)"] if scale < 0.01 else []
    n = int(np.prod(shape[:-1]))
    return Case({"x": x, "gamma": gamma, "beta": beta, "dy": dy},
                describe(f"x {shape_text(x)}", f"D={d}"), tags, {"D": d, "N": n})


def _run_layer_norm(rec, c):
    y, cache = rec.pair("layer_norm_forward",
                        rec.call("layer_norm_forward", c["x"], c["gamma"], c["beta"], eps=1e-5), "(y, cache)")
    rec.output("y", y)
    dx, dgamma, dbeta = rec.unpack("layer_norm_backward", rec.call("layer_norm_backward", c["dy"], cache),
                                   ["dx", "dgamma", "dbeta"])
    rec.output("dx", dx)
    rec.output("dgamma", dgamma)
    rec.output("dbeta", dbeta)


def _ref_layer_norm():
    return SimpleNamespace(
        layer_norm_forward=lambda x, gamma, beta, eps=1e-5: F.layer_norm_forward(x, gamma, beta, eps),
        layer_norm_backward=F.layer_norm_backward)


EXERCISE = Exercise(
    name="layer_norm", difficulty="medium", minutes=15,
    covers="LayerNorm over the last axis (biased variance, eps inside the sqrt); backward dx, dgamma, dbeta",
    aliases=('layernorm', 'ln', 'layer-norm'), topic="normalisation",
    functions=("layer_norm_forward", "layer_norm_backward"),
    outputs=(("y", "layer_norm_forward"), ("dx", "layer_norm_backward"), ("dgamma", "layer_norm_backward"),
             ("dbeta", "layer_norm_backward")),
    library=("layer_norm_forward", "layer_norm_backward"),
    draw=_draw_layer_norm, run=_run_layer_norm, reference=_ref_layer_norm, n_edge=len(_LN_EDGES),
)
