"""The alibi drill: ALiBi's per-head slopes (the paper's interleaving for H not a power of two) and the
(H, S, T) bias, end-aligned for a KV-cache decode step. Forward only: the bias has no parameters, so
it needs no backward (the lesson)."""

from __future__ import annotations

from types import SimpleNamespace

from .... import functional as F
from ...engine.definition import Case, Exercise, describe

#: its place in `drill list`
ORDER = 110
#: the ops it contains: their mistake families (drills/families/) apply to it
OPS = ('positions', 'alibi')
#: how torch re-checks the reference (reference_torch/drill_oracle.py reads it)
ORACLE = {'adapter': 'alibi'}


def _draw_alibi(rng, i):
    edges = [(8, 4, 4), (6, 3, 3), (12, 1, 7), (1, 2, 2), (5, 2, 6)]
    if i < len(edges):
        h, s, t = edges[i]
    else:
        h = int(rng.integers(1, 17))
        t = int(rng.integers(1, 9))
        s = int(rng.integers(1, t + 1))
    tags = ([] if h & (h - 1) == 0 else ["H not a power of two"]) + (["S < T (decode)"] if s < t else [])
    return Case({"num_heads": h, "S": s, "T": t}, describe(f"H={h}", f"S={s}", f"T={t}"), tags,
                options={"H a power of two": h & (h - 1) == 0, "S < T": s < t})


def _run_alibi(rec, c):
    (slopes,) = rec.unpack("alibi_slopes", rec.call("alibi_slopes", c["num_heads"]), ["slopes"])
    rec.output("slopes", slopes)
    (bias,) = rec.unpack("alibi_bias", rec.call("alibi_bias", c["num_heads"], c["S"], c["T"]), ["bias"])
    rec.output("bias", bias)


def _ref_alibi():
    return SimpleNamespace(alibi_slopes=F.alibi_slopes, alibi_bias=lambda h, s, t: F.alibi_bias(h, s, t))


EXERCISE = Exercise(
    name="alibi", difficulty="easy", minutes=10,
    covers="ALiBi: per-head slopes (H not a power of two too) and the (H, S, T) bias; no backward needed",
    functions=("alibi_slopes", "alibi_bias"),
    outputs=(("slopes", "alibi_slopes"), ("bias", "alibi_bias")),
    library=("alibi_slopes", "alibi_bias"),
    draw=_draw_alibi, run=_run_alibi, reference=_ref_alibi, n_edge=5,
    topic="position bias",
)
