"""The cross_entropy_options drill: torch's ``ignore_index`` (ignored rows cost nothing, get no gradient
and leave the mean's denominator) and ``label_smoothing`` (the target mixed with the uniform over all
V classes). Its reference is the library's ``F.cross_entropy_forward/backward`` with those arguments."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from .... import functional as F
from ...engine.definition import Case, Exercise, describe, shape_text

#: its place in `drill list`
ORDER = 130
#: how torch re-checks the reference (reference_torch/drill_oracle.py reads it)
ORACLE = {'op': 'cross_entropy',
          'inputs': {'input': 'logits', 'target': 'targets'},
          'options': {'ignore_index': 'ignore_index', 'label_smoothing': 'label_smoothing'},
          'upstream': 'dloss',
          'outputs': {'loss': 'out', 'dlogits': 'input'},
          'nondiff': ('target',)}
#: the ops it contains: their mistake families (drills/families/) apply to it
OPS = ('cross_entropy',)


# (N, V, ignore_index, how many rows ignored, label_smoothing, logit scale)
_CEO_EDGES = [(1, 2, -100, 0, 0.0, 2.0), (4, 5, -100, 2, 0.0, 2.0), (4, 3, -100, 0, 0.1, 2.0),
              (6, 4, 0, 3, 0.2, 2.0), (5, 6, -100, 2, 0.1, 1000.0), (3, 7, -100, 1, 1.0, 2.0),
              (2, 2, 1, 1, 0.3, 2.0)]


def _draw_ceo(rng, i):
    if i < len(_CEO_EDGES):
        n, v, ignore_index, n_ignored, e, scale = _CEO_EDGES[i]
    else:
        n, v = int(rng.integers(1, 9)), int(rng.integers(2, 9))
        ignore_index = -100 if rng.random() < 0.6 else int(rng.integers(0, v))
        n_ignored = int(rng.integers(0, n)) if rng.random() < 0.7 else 0
        e = 0.0 if rng.random() < 0.3 else float(rng.choice([0.1, 0.2, rng.uniform(0.0, 1.0)]))
        scale = 1000.0 if rng.random() < 0.15 else 2.0
    logits = scale * rng.standard_normal((n, v))
    # kept rows draw a class other than ignore_index (which may be a real class id)
    classes = [c for c in range(v) if c != ignore_index]
    targets = rng.choice(classes, size=n).astype(np.int64)
    targets[rng.permutation(n)[:n_ignored]] = ignore_index
    dloss = float(rng.uniform(0.5, 2.0))
    tags = ["large logits (exp overflows, probabilities underflow)"] if scale > 100 else []
    if 0 <= ignore_index < v:
        tags.append("ignore_index a real class id")
    return Case({"logits": logits, "targets": targets, "ignore_index": ignore_index, "label_smoothing": e,
                 "dloss": dloss},
                describe(f"logits {shape_text(logits)}", f"ignored {n_ignored}" if n_ignored else "",
                      f"smoothing {e:.3g}" if e else "", f"dloss={dloss:.3f}"), tags,
                {"N": n, "kept rows": n - n_ignored, "dloss": dloss},
                {"ignored targets": n_ignored > 0, "label smoothing": e > 0})


def _run_ceo(rec, c):
    loss, cache = rec.pair("cross_entropy_forward",
                           rec.call("cross_entropy_forward", c["logits"], c["targets"],
                                    ignore_index=c["ignore_index"], label_smoothing=c["label_smoothing"]),
                           "(loss, cache)")
    rec.output("loss", loss)
    (dlogits,) = rec.unpack("cross_entropy_backward",
                            rec.call("cross_entropy_backward", c["dloss"], cache), ["dlogits"])
    rec.output("dlogits", dlogits)


def _ref_ceo():
    def cross_entropy_forward(logits, targets, ignore_index=-100, label_smoothing=0.0):
        return F.cross_entropy_forward(logits, targets, ignore_index=ignore_index, label_smoothing=label_smoothing)
    return SimpleNamespace(cross_entropy_forward=cross_entropy_forward,
                           cross_entropy_backward=F.cross_entropy_backward)


EXERCISE = Exercise(
    name="cross_entropy_options", difficulty="medium", minutes=15,
    covers="torch's ignore_index (out of the mean and the gradient) and label_smoothing (e / V over all "
           "classes)",
    aliases=('label_smoothing', 'ignore_index'),
    functions=("cross_entropy_forward", "cross_entropy_backward"),
    outputs=(("loss", "cross_entropy_forward"), ("dlogits", "cross_entropy_backward")),
    library=("cross_entropy_forward", "cross_entropy_backward"),
    draw=_draw_ceo, run=_run_ceo, reference=_ref_ceo, n_edge=len(_CEO_EDGES), topic="losses",
    exception_hints=(
        (r"index -?\d+ is out of bounds",
         "a target equal to ignore_index (-100 by default) is not a class: index with "
         "np.where(keep, targets, 0) and zero those rows out"),
    ),
)
