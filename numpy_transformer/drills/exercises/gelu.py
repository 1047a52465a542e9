"""The gelu drill: exact (erf) and tanh GELU, both derivatives."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ... import functional as F
from .. import variants as V
from ._types import Case, Exercise, Mistake, _desc, _shape


def _draw_gelu(rng, i):
    edges = [(np.linspace(-10, 10, 41), "none"), (np.linspace(-10, 10, 41), "tanh"),
             (np.zeros((1, 1)), "none")]
    if i < len(edges):
        x, approx = edges[i]
        x = x.copy()
    else:
        shape = tuple(int(n) for n in rng.integers(1, 7, size=int(rng.integers(1, 4))))
        x = 3.0 * rng.standard_normal(shape)
        approx = "none" if rng.random() < 0.6 else "tanh"
    dy = rng.standard_normal(x.shape)
    return Case({"x": x, "approximate": approx, "dy": dy}, _desc(f"x {_shape(x)}", f"approximate={approx!r}"))


def _run_gelu(rec, c):
    y, cache = rec.pair("gelu_forward", rec.call("gelu_forward", c["x"], approximate=c["approximate"]),
                        "(y, cache)")
    rec.output("y", y)
    (dx,) = rec.unpack("gelu_backward", rec.call("gelu_backward", c["dy"], cache), ["dx"])
    rec.output("dx", dx)


def _ref_gelu():
    return SimpleNamespace(gelu_forward=lambda x, approximate="none": F.gelu_forward(x, approximate),
                           gelu_backward=F.gelu_backward)


GELU = Exercise(
    name="gelu", difficulty="easy", minutes=10,
    covers="GELU exact (x * Phi(x), with erf) and its tanh approximation; both derivatives",
    functions=("gelu_forward", "gelu_backward"),
    outputs=(("y", "gelu_forward"), ("dx", "gelu_backward")),
    library=("gelu_forward", "gelu_backward"),
    draw=_draw_gelu, run=_run_gelu, reference=_ref_gelu, variant=V.gelu_impl, n_edge=3,
    mistakes=(
        Mistake("gelu_tanh_for_exact", "the tanh approximation used where the exact GELU was asked",
                "approximate='none' is x * Phi(x) with Phi(x) = (1 + erf(x / sqrt(2))) / 2; the tanh "
                "formula differs by up to ~1e-3.",
                "When approximate == 'none': y = 0.5 * x * (1 + erf(x / sqrt(2))).",
                ({"exact": "tanh"},)),
        Mistake("gelu_sigmoid_approximation", "the sigmoid approximation x * sigmoid(1.702 x) used",
                "x * sigmoid(1.702 x) is a coarse approximation (error ~2e-2), not GELU.",
                "y = 0.5 * x * (1 + erf(x / sqrt(2))) (or the tanh formula when approximate == 'tanh').",
                ({"exact": "sigmoid"},)),
        Mistake("gelu_backward_no_x_pdf", "GELU backward missing the x * phi(x) term (product rule)",
                "y = x * Phi(x) is a product: y' = Phi(x) + x * phi(x), phi the standard normal density.",
                "dx = dy * (Phi(x) + x * np.exp(-x**2 / 2) / np.sqrt(2 * np.pi)).",
                ({"backward": "no_x_pdf"},)),
        Mistake("gelu_backward_pdf_unnormalised", "GELU backward with phi(x) missing 1/sqrt(2*pi)",
                "The standard normal density is exp(-x^2/2) / sqrt(2 pi).",
                "phi = np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi).",
                ({"backward": "pdf_unnormalised"},)),
        Mistake("gelu_tanh_backward_no_inner", "tanh-GELU backward missing the inner derivative",
                "u = sqrt(2/pi) (x + 0.044715 x^3) has du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2).",
                "slope = 0.5 * (1 + t) + 0.5 * x * (1 - t**2) * sqrt(2/pi) * (1 + 3 * 0.044715 * x**2).",
                ({"backward": "no_inner"},)),
    ),
)
