"""The cross_entropy_options drill: torch's ``ignore_index`` (ignored rows cost nothing, get no gradient
and leave the mean's denominator) and ``label_smoothing`` (the target mixed with the uniform over all
V classes). Its reference is the library's ``F.cross_entropy_forward/backward`` with those arguments."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ... import functional as F
from .. import variants as V
from ._types import Case, Exercise, Mistake, _desc, _shape


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
                _desc(f"logits {_shape(logits)}", f"ignored {n_ignored}" if n_ignored else "",
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


CROSS_ENTROPY_OPTIONS = Exercise(
    name="cross_entropy_options", difficulty="medium", minutes=15,
    covers="torch's ignore_index (out of the mean and the gradient) and label_smoothing (e / V over all "
           "classes)",
    functions=("cross_entropy_forward", "cross_entropy_backward"),
    outputs=(("loss", "cross_entropy_forward"), ("dlogits", "cross_entropy_backward")),
    library=("cross_entropy_forward", "cross_entropy_backward"),
    draw=_draw_ceo, run=_run_ceo, reference=_ref_ceo, variant=V.cross_entropy_options_impl,
    n_edge=len(_CEO_EDGES), topic="losses",
    exception_hints=(
        (r"index -?\d+ is out of bounds",
         "a target equal to ignore_index (-100 by default) is not a class: index with "
         "np.where(keep, targets, 0) and zero those rows out"),
    ),
    mistakes=(
        Mistake("ceo_ignored_in_denominator", "ignored targets still counted in the mean's denominator",
                "torch's mean divides by the number of targets that are not ignore_index: padding rows must "
                "not dilute the loss (nor the gradient).",
                "loss = sum over kept rows / keep.sum(); the gradient's factor is dloss / keep.sum().",
                ({"denominator": "all"},)),
        Mistake("ceo_smoothing_over_v_minus_1", "smoothing spread over the V - 1 other classes instead of all V",
                "torch (and Szegedy et al.'s formula) mixes the target with the uniform over all V classes: "
                "q = (1 - e) onehot + e / V, so the target class gets 1 - e + e / V. Spreading e over the "
                "V - 1 wrong classes is another loss.",
                "loss row = (1 - e) * (-logp_y) + e * (-logp.mean(axis=-1)); gradient p - q with "
                "q = (1 - e) * onehot + e / V.",
                ({"smooth_over": "V-1"},)),
        Mistake("ceo_smoothing_on_ignored_rows", "label smoothing applied to the ignored rows",
                "An ignored row costs nothing at all: the smoothing term -e * mean(logp) must be masked as "
                "well as the target term, in the loss and in the gradient.",
                "Multiply the whole row loss ((1 - e) * nll + e * smooth) by keep, and the whole gradient "
                "row by keep[:, None].",
                ({"smooth_ignored": True},)),
        Mistake("ceo_ignored_rows_get_gradient", "ignored rows still get a gradient",
                "The forward left the ignored rows out of the loss, so the loss does not depend on their "
                "logits: their gradient is exactly zero.",
                "d = (p - q) * keep[:, None].",
                ({"ignored_grad": "p"}, {"ignored_grad": "first_class"})),
    ),
)
