"""The positional_encoding drill: the sinusoidal table, vectorised."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ...engine.definition import Case, Exercise, describe

#: its place in `drill list`
ORDER = 150
#: the ops it contains: their mistake families (drills/families/) apply to it
OPS = ('sinusoid',)
#: how torch re-checks the reference (reference_torch/drill_oracle.py reads it)
ORACLE = {'adapter': 'positional_encoding'}


def _draw_positional(rng, i):
    edges = [(1, 2), (1, 8), (6, 2), (50, 16), (7, 6)]
    if i < len(edges):
        s, d = edges[i]
    else:
        s, d = int(rng.integers(1, 51)), 2 * int(rng.integers(1, 17))
    return Case({"S": s, "D": d}, describe(f"S={s}", f"D={d}"))


def _run_positional(rec, c):
    (pe,) = rec.unpack("positional_encoding", rec.call("positional_encoding", c["S"], c["D"]), ["pe"])
    rec.output("pe", pe)


def _ref_positional():
    from .... import sinusoidal_table
    return SimpleNamespace(positional_encoding=lambda S, D: sinusoidal_table(S, D, np.float64))


EXERCISE = Exercise(
    name="positional_encoding", difficulty="easy", minutes=8,
    covers="the sinusoidal table pe[pos, 2i] = sin(pos / 10000^(2i/D)), pe[pos, 2i+1] = cos(...), vectorised",
    aliases=('pe',), topic="positions",
    functions=("positional_encoding",),
    outputs=(("pe", "positional_encoding"),),
    library=(),
    draw=_draw_positional, run=_run_positional, reference=_ref_positional, n_edge=5,
    reference_name="numpy_transformer.nn.sinusoidal_table (verified)",
)
