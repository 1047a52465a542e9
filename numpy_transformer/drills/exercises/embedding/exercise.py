"""The embedding drill: table lookup and its scatter-add backward (repeated ids accumulate)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from .... import functional as F
from ...engine.definition import Case, Exercise, describe, shape_text

#: its place in `drill list`
ORDER = 90
#: how torch re-checks the reference (reference_torch/drill_oracle.py reads it)
ORACLE = {'op': 'embedding',
          'inputs': {'ids': 'ids', 'weight': 'W'},
          'upstream': 'dout',
          'outputs': {'out': 'out', 'dW': 'weight'},
          'nondiff': ('ids',)}
#: the ops it contains: their mistake families (drills/families/) apply to it
OPS = ('embedding',)


def _draw_embedding(rng, i):
    if i == 0:
        v, d, ids = 3, 2, np.array([[1]])
    elif i == 1:
        v, d, ids = 4, 3, np.full((2, 4), 2)
    elif i == 2:
        v, d, ids = 5, 2, rng.permutation(5)[None, :]
    else:
        v, d = int(rng.integers(1, 7)), int(rng.integers(1, 6))
        ids = rng.integers(0, v, size=(int(rng.integers(1, 4)), int(rng.integers(1, 7))))
    ids = ids.astype(np.int64)
    W = rng.standard_normal((v, d))
    dout = rng.standard_normal(ids.shape + (d,))
    repeats = len(np.unique(ids)) < ids.size
    return Case({"ids": ids, "W": W, "dout": dout},
                describe(f"ids {shape_text(ids)}", f"W {shape_text(W)}"), ["repeated ids"] if repeats else [])


def _run_embedding(rec, c):
    out, cache = rec.pair("embedding_forward", rec.call("embedding_forward", c["ids"], c["W"]), "(out, cache)")
    rec.output("out", out)
    (dW,) = rec.unpack("embedding_backward", rec.call("embedding_backward", c["dout"], cache), ["dW"])
    rec.output("dW", dW)


def _ref_embedding():
    return SimpleNamespace(embedding_forward=lambda ids, W: F.embedding_forward(ids, W),
                           embedding_backward=F.embedding_backward)


EXERCISE = Exercise(
    name="embedding", difficulty="easy", minutes=8,
    covers="table lookup W[ids] and its scatter-add backward (repeated ids accumulate)",
    topic="backprop basics",
    functions=("embedding_forward", "embedding_backward"),
    outputs=(("out", "embedding_forward"), ("dW", "embedding_backward")),
    library=("embedding_forward", "embedding_backward"),
    draw=_draw_embedding, run=_run_embedding, reference=_ref_embedding, n_edge=3,
)
