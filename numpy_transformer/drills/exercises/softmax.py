"""The softmax drill: a numerically stable softmax over the last axis and its backward."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ... import functional as F
from .. import variants as V
from ._types import Case, Exercise, Mistake, _desc, _shape


_SOFTMAX_EDGES = [((1, 1), 1.0), ((1, 6), 3.0), ((4, 1), 3.0), ((2, 3, 5), 1000.0), ((3, 4), 3.0)]


def _draw_softmax(rng, i):
    if i < len(_SOFTMAX_EDGES):
        shape, scale = _SOFTMAX_EDGES[i]
    else:
        lead = tuple(int(n) for n in rng.integers(1, 5, size=int(rng.integers(1, 3))))
        shape = lead + (int(rng.integers(1, 9)),)
        scale = 1000.0 if rng.random() < 0.2 else 3.0
    x = rng.standard_normal(shape) * scale
    dy = rng.standard_normal(shape)
    tags = ["large logits (exp overflows without the max subtraction)"] if scale > 100 else []
    return Case({"x": x, "dy": dy}, _desc(f"x {_shape(x)}"), tags, {"V": shape[-1]})


def _run_softmax(rec, c):
    y, cache = rec.pair("softmax_forward", rec.call("softmax_forward", c["x"]), "(y, cache)")
    rec.output("y", y)
    (dx,) = rec.unpack("softmax_backward", rec.call("softmax_backward", c["dy"], cache), ["dx"])
    rec.output("dx", dx)


def _ref_softmax():
    return SimpleNamespace(softmax_forward=lambda x: F.softmax_forward(x, axis=-1),
                           softmax_backward=F.softmax_backward)


SOFTMAX = Exercise(
    name="softmax", difficulty="easy", minutes=10,
    covers="numerically stable softmax over the last axis; its backward (Jacobian-vector product)",
    functions=("softmax_forward", "softmax_backward"),
    outputs=(("y", "softmax_forward"), ("dx", "softmax_backward")),
    library=("softmax_forward", "softmax_backward"),
    draw=_draw_softmax, run=_run_softmax, reference=_ref_softmax, variant=V.softmax_impl,
    n_edge=len(_SOFTMAX_EDGES),
    mistakes=(
        Mistake("softmax_wrong_axis", "softmax over the wrong axis",
                "Each row (the last axis) must sum to 1; the normalisation ran along another axis.",
                "Use axis=-1 with keepdims=True in both the max and the sum (and in the backward's sum).",
                ({"axis": 0}, {"axis": -2})),
        Mistake("softmax_unstable", "no max subtraction: exp overflows",
                "exp(1000) is inf in float64, and inf/inf is NaN. Softmax is unchanged by subtracting a "
                "constant from a row, so the max is subtracted first.",
                "e = np.exp(x - x.max(axis=-1, keepdims=True)).",
                ({"stable": False},)),
        Mistake("softmax_backward_no_rowsum", "softmax backward missing the row-sum term",
                "dx = y * dy treats softmax as elementwise. Its Jacobian is diag(y) - y y^T, so every "
                "input also receives -y_k * sum_i(dy_i y_i).",
                "dx = y * (dy - np.sum(dy * y, axis=-1, keepdims=True)).",
                ({"backward": "no_rowsum"},)),
        Mistake("softmax_backward_diagonal", "softmax backward uses only the Jacobian diagonal y(1-y)",
                "dy_i/dx_i = y_i(1 - y_i) is only the diagonal; dy_i/dx_k = -y_i y_k for k != i is dropped.",
                "dx = y * (dy - np.sum(dy * y, axis=-1, keepdims=True)).",
                ({"backward": "diagonal"},)),
    ),
)
