"""The cross_entropy drill: mean cross-entropy fused with softmax (log-sum-exp) and its backward.

The drill's logits are (N, V), torch's (N, C) layout; its reference is the library's functional pair
(``F.cross_entropy_forward/backward``, checked against torch in the tests)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from .... import functional as F
from ...engine.definition import Case, Exercise, describe, shape_text

#: its place in `drill list`
ORDER = 120
#: how torch re-checks the reference (reference_torch/drill_oracle.py reads it)
ORACLE = {'op': 'cross_entropy',
          'inputs': {'input': 'logits', 'target': 'targets'},
          'upstream': 'dloss',
          'outputs': {'loss': 'out', 'dlogits': 'input'},
          'nondiff': ('target',)}
#: the ops it contains: their mistake families (drills/families/) apply to it
OPS = ('cross_entropy',)


def _draw_cross_entropy(rng, i):
    edges = [(1, 1, 2.0), (1, 5, 2.0), (4, 3, 1000.0), (6, 4, 2.0), (3, 7, 2.0)]
    if i < len(edges):
        n, v, scale = edges[i]
    else:
        n, v = int(rng.integers(1, 9)), int(rng.integers(2, 9))
        scale = 1000.0 if rng.random() < 0.2 else 2.0
    logits = scale * rng.standard_normal((n, v))
    targets = rng.integers(0, v, size=n).astype(np.int64)
    dloss = float(rng.uniform(0.5, 2.0))
    tags = ["large logits (exp overflows, probabilities underflow)"] if scale > 100 else []
    return Case({"logits": logits, "targets": targets, "dloss": dloss},
                describe(f"logits {shape_text(logits)}", f"dloss={dloss:.3f}"), tags, {"N": n, "dloss": dloss})


def _run_cross_entropy(rec, c):
    loss, cache = rec.pair("cross_entropy_forward",
                           rec.call("cross_entropy_forward", c["logits"], c["targets"]), "(loss, cache)")
    rec.output("loss", loss)
    (dlogits,) = rec.unpack("cross_entropy_backward",
                            rec.call("cross_entropy_backward", c["dloss"], cache), ["dlogits"])
    rec.output("dlogits", dlogits)


def _ref_cross_entropy():
    return SimpleNamespace(cross_entropy_forward=lambda logits, targets: F.cross_entropy_forward(logits, targets),
                           cross_entropy_backward=F.cross_entropy_backward)


EXERCISE = Exercise(
    name="cross_entropy", difficulty="medium", minutes=12,
    covers="mean cross-entropy fused with softmax (log-sum-exp), backward (softmax - onehot) / N",
    aliases=('ce', 'cross-entropy'), topic="losses",
    functions=("cross_entropy_forward", "cross_entropy_backward"),
    outputs=(("loss", "cross_entropy_forward"), ("dlogits", "cross_entropy_backward")),
    library=("softmax_forward", "softmax_backward"),
    draw=_draw_cross_entropy, run=_run_cross_entropy, reference=_ref_cross_entropy,
    n_edge=5,
)
