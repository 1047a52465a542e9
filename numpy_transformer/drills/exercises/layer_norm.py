"""The layer_norm drill: LayerNorm over the last axis (biased variance, eps inside the sqrt) and its
three-path backward."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ... import functional as F
from .. import variants as V
from ._types import Case, Exercise, Mistake, _desc, _shape


_LN_EDGES = [((1, 1, 4), 1.0), ((2, 1), 1.0), ((2, 3, 5), 1e-3), ((1, 8), 1.0), ((3, 6), 4.0)]


def _draw_layer_norm(rng, i):
    if i < len(_LN_EDGES):
        shape, scale = _LN_EDGES[i]
    else:
        lead = tuple(int(n) for n in rng.integers(1, 5, size=int(rng.integers(1, 3))))
        shape = lead + (int(rng.integers(2, 9)),)
        scale = float(rng.choice([1.0, 1e-3, 4.0]))
    d = shape[-1]
    offset = rng.standard_normal(shape[:-1] + (1,))
    x = offset + scale * rng.standard_normal(shape)
    gamma = 1.0 + 0.5 * rng.standard_normal(d)
    beta = 0.5 * rng.standard_normal(d)
    dy = rng.standard_normal(shape)
    tags = ["small variance (eps matters)"] if scale < 0.01 else []
    n = int(np.prod(shape[:-1]))
    return Case({"x": x, "gamma": gamma, "beta": beta, "dy": dy},
                _desc(f"x {_shape(x)}", f"D={d}"), tags, {"D": d, "N": n})


def _run_layer_norm(rec, c):
    y, cache = rec.pair("layer_norm_forward",
                        rec.call("layer_norm_forward", c["x"], c["gamma"], c["beta"], eps=1e-5), "(y, cache)")
    rec.output("y", y)
    dx, dgamma, dbeta = rec.unpack("layer_norm_backward", rec.call("layer_norm_backward", c["dy"], cache),
                                   ["dx", "dgamma", "dbeta"])
    rec.output("dx", dx)
    rec.output("dgamma", dgamma)
    rec.output("dbeta", dbeta)


def _ref_layer_norm():
    return SimpleNamespace(
        layer_norm_forward=lambda x, gamma, beta, eps=1e-5: F.layer_norm_forward(x, gamma, beta, eps),
        layer_norm_backward=F.layer_norm_backward)


LAYER_NORM = Exercise(
    name="layer_norm", difficulty="medium", minutes=15,
    covers="LayerNorm over the last axis (biased variance, eps inside the sqrt); backward dx, dgamma, dbeta",
    functions=("layer_norm_forward", "layer_norm_backward"),
    outputs=(("y", "layer_norm_forward"), ("dx", "layer_norm_backward"), ("dgamma", "layer_norm_backward"),
             ("dbeta", "layer_norm_backward")),
    library=("layer_norm_forward", "layer_norm_backward"),
    draw=_draw_layer_norm, run=_run_layer_norm, reference=_ref_layer_norm, variant=V.layer_norm_impl,
    n_edge=len(_LN_EDGES),
    mistakes=(
        Mistake("ln_unbiased_variance", "unbiased variance (divided by D-1) instead of biased (by D)",
                "LayerNorm (torch, the paper) uses the population variance mean((x - mu)^2). "
                "np.var(ddof=1) / torch.var(unbiased=True) divide by D-1.",
                "var = np.mean((x - mu)**2, axis=-1, keepdims=True)  (np.var's default ddof=0).",
                ({"ddof": 1},)),
        Mistake("ln_eps_outside_sqrt", "eps added outside the square root",
                "(x - mu) / (sqrt(var) + eps) differs from (x - mu) / sqrt(var + eps), most where the "
                "variance is small.",
                "rstd = 1 / np.sqrt(var + eps).",
                ({"eps_outside": True},)),
        Mistake("ln_wrong_axis", "normalised over the batch/positions instead of the features (a BatchNorm)",
                "LayerNorm normalises each position's D features: statistics over axis=-1 only.",
                "mu = x.mean(axis=-1, keepdims=True); var likewise over axis=-1.",
                ({"axis": "leading"},)),
        Mistake("ln_backward_no_mean_term", "LayerNorm backward missing the -mean(dxhat) term",
                "Every x_j also moves the mean mu, which shifts every xhat_i: that path contributes "
                "-rstd * mean(dxhat).",
                "dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).",
                ({"backward": "no_mean"},)),
        Mistake("ln_backward_no_variance_term", "LayerNorm backward missing the -xhat*mean(dxhat*xhat) term",
                "Every x_j also moves the variance, which rescales every xhat_i: that path contributes "
                "-rstd * xhat * mean(dxhat * xhat).",
                "dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).",
                ({"backward": "no_xhat"},)),
        Mistake("ln_backward_constant_stats", "LayerNorm backward treats mean and variance as constants",
                "dx = rstd * dxhat is the gradient only if mu and var did not depend on x.",
                "dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).",
                ({"backward": "direct_only"},)),
        Mistake("ln_backward_no_gamma", "LayerNorm backward forgot gamma in dx",
                "y = xhat * gamma + beta, so the gradient reaching xhat is dxhat = dy * gamma.",
                "dxhat = dy * gamma, then the usual formula with dxhat.",
                ({"backward": "no_gamma"},)),
    ),
)
