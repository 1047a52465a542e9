"""The rms_norm drill: RMSNorm over the last axis (mean of squares, eps inside the sqrt, no bias) and its
two-path backward."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from .... import functional as F
from ...engine.definition import Case, Exercise, describe, shape_text

#: its place in `drill list`
ORDER = 30
#: the ops it contains: their mistake families (drills/families/) apply to it
OPS = ('norms',)
#: how torch re-checks the reference (reference_torch/drill_oracle.py reads it)
ORACLE = {'op': 'rms_norm',
          'inputs': {'x': 'x', 'weight': 'gamma'},
          'static': {'eps': 1e-06},
          'upstream': 'dy',
          'outputs': {'y': 'out', 'dx': 'x', 'dgamma': 'weight'}}


# (shape, scale): lead dims, D = 1, and tiny values where eps = 1e-6 is comparable to mean(x^2)
_RMS_EDGES = [((1, 1, 4), 1.0), ((2, 1), 1.0), ((2, 3, 5), 1e-3), ((1, 8), 1.0), ((3, 1), 1e-3), ((3, 6), 4.0)]


def _draw_rms_norm(rng, i):
    if i < len(_RMS_EDGES):
        shape, scale = _RMS_EDGES[i]
    else:
        lead = tuple(int(n) for n in rng.integers(1, 5, size=int(rng.integers(1, 3))))
        shape = lead + (int(rng.integers(1, 9)),)
        scale = float(rng.choice([1.0, 1e-3, 4.0]))
    d = shape[-1]
    offset = rng.standard_normal(shape[:-1] + (1,))            # a per-row offset: centring x would show
    x = scale * (0.7 * offset + rng.standard_normal(shape))
    gamma = 1.0 + 0.5 * rng.standard_normal(d)
    dy = rng.standard_normal(shape)
    tags = (["tiny values (eps matters)"] if scale < 0.01 else []) + (["D=1"] if d == 1 else [])
    n = int(np.prod(shape[:-1]))
    return Case({"x": x, "gamma": gamma, "dy": dy}, describe(f"x {shape_text(x)}", f"D={d}"), tags, {"D": d, "N": n})


def _run_rms_norm(rec, c):
    y, cache = rec.pair("rms_norm_forward", rec.call("rms_norm_forward", c["x"], c["gamma"], eps=1e-6), "(y, cache)")
    rec.output("y", y)
    dx, dgamma = rec.unpack("rms_norm_backward", rec.call("rms_norm_backward", c["dy"], cache), ["dx", "dgamma"])
    rec.output("dx", dx)
    rec.output("dgamma", dgamma)


def _ref_rms_norm():
    return SimpleNamespace(
        rms_norm_forward=lambda x, gamma, eps=1e-6: F.rms_norm_forward(x, gamma, eps),
        rms_norm_backward=F.rms_norm_backward)


EXERCISE = Exercise(
    name="rms_norm", difficulty="medium", minutes=12,
    covers="RMSNorm over the last axis (mean of squares, eps inside the sqrt, no bias); backward dx, dgamma",
    aliases=('rmsnorm',), topic="normalisation",
    functions=("rms_norm_forward", "rms_norm_backward"),
    outputs=(("y", "rms_norm_forward"), ("dx", "rms_norm_backward"), ("dgamma", "rms_norm_backward")),
    library=("rms_norm_forward", "rms_norm_backward"),
    draw=_draw_rms_norm, run=_run_rms_norm, reference=_ref_rms_norm, n_edge=len(_RMS_EDGES),
)
