"""The relative_position_bias drill: T5's buckets, the (H, S, T) lookup and its scatter-add backward."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from .... import functional as F
from ...engine.definition import Case, Exercise, describe, shape_text

#: its place in `drill list`
ORDER = 100
#: the ops it contains: their mistake families (drills/families/) apply to it
OPS = ('positions', 't5_bias')
#: how torch re-checks the reference (reference_torch/drill_oracle.py reads it)
ORACLE = {'adapter': 'relative_position_bias'}


def _has_tie(num_buckets, max_distance, bidirectional):
    """Some distance strictly between max_exact and max_distance lands within rounding of a bucket
    boundary (float32 and float64 logarithms could then disagree): such configurations are not drawn.
    (At max_exact the logarithm is exactly 0; from max_distance on the bucket is capped anyway.)"""
    half = num_buckets // 2 if bidirectional else num_buckets
    exact = half // 2
    n = np.arange(exact + 1, max_distance, dtype=np.float64)
    r = np.log(n / exact) / math.log(max_distance / exact) * (half - exact)
    return bool(np.any(np.abs(r - np.round(r)) < 1e-5))


def _draw_relative_position_bias(rng, i):
    edges = [(1, 1, 1, 4, 5, True), (1, 9, 2, 6, 6, False), (5, 12, 3, 8, 4, True)]
    if i < len(edges):
        s, t, h, nb, md, bidirectional = edges[i]
    else:
        bidirectional = bool(rng.integers(0, 2))
        nb = int(rng.integers(4 if bidirectional else 2, 17))
        half = nb // 2 if bidirectional else nb
        t = int(rng.integers(1, 25))
        s, h, md = int(rng.integers(1, min(t, 8) + 1)), int(rng.integers(1, 4)), 0   # S <= T, as in T5
        while md == 0 or _has_tie(nb, md, bidirectional):
            md = half // 2 + int(rng.integers(1, 20))
    rel = rng.integers(-3 * md, 3 * md + 1, size=(int(rng.integers(1, 4)), int(rng.integers(1, 8))))
    W = rng.standard_normal((nb, h))
    dbias = rng.standard_normal((h, s, t))
    tags = ["decode step (S = 1)"] if s == 1 and t > 1 else []
    return Case({"rel": rel, "W": W, "S": s, "T": t, "bidirectional": bidirectional, "max_distance": md,
                 "dbias": dbias},
                describe(f"W {shape_text(W)}", f"S={s}", f"T={t}", f"bidirectional={bidirectional}",
                         f"max_distance={md}"),
                tags + ["repeated buckets"])


def _run_relative_position_bias(rec, c):
    nb = c["W"].shape[0]
    (buckets,) = rec.unpack("relative_position_bucket", rec.call("relative_position_bucket", c["rel"],
                                                                  c["bidirectional"], nb, c["max_distance"]),
                            ["buckets"])
    rec.output("buckets", buckets)
    bias, cache = rec.pair("relative_position_bias_forward",
                           rec.call("relative_position_bias_forward", c["W"], c["S"], c["T"], c["bidirectional"],
                                    c["max_distance"]), "(bias, cache)")
    rec.output("bias", bias)
    (dW,) = rec.unpack("relative_position_bias_backward",
                       rec.call("relative_position_bias_backward", c["dbias"], cache), ["dW"])
    rec.output("dW", dW)


def _ref_relative_position_bias():
    def forward(W, S, T, bidirectional, max_distance):
        buckets = F.relative_position_bucket(F.relative_positions(S, T), bidirectional, W.shape[0], max_distance)
        return F.relative_position_bias_forward(W, buckets)
    return SimpleNamespace(relative_position_bucket=F.relative_position_bucket,
                           relative_position_bias_forward=forward,
                           relative_position_bias_backward=F.relative_position_bias_backward)


EXERCISE = Exercise(
    name="relative_position_bias", difficulty="medium", minutes=15,
    covers="T5's relative position buckets (exact, then log-spaced; two halves when bidirectional), the (H, S, T) "
           "lookup and its scatter-add backward",
    aliases=('t5_bias', 'relative_bias'), topic="positions",
    functions=("relative_position_bucket", "relative_position_bias_forward", "relative_position_bias_backward"),
    outputs=(("buckets", "relative_position_bucket"), ("bias", "relative_position_bias_forward"),
             ("dW", "relative_position_bias_backward")),
    library=("relative_position_bucket", "relative_position_bias_forward", "relative_position_bias_backward"),
    draw=_draw_relative_position_bias, run=_run_relative_position_bias, reference=_ref_relative_position_bias,
    n_edge=3,
)
