"""The encoder_layer drill: a whole layer (MHA + ReLU FFN, residuals, post-LN and pre-LN), forward and
backward."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from ... import functional as F
from .. import variants as V
from ._types import MISSING, Case, Exercise, Mistake, _desc, _shape


PARAM_KEYS = ("Wq", "Wk", "Wv", "Wo", "W1", "b1", "W2", "b2", "gamma1", "beta1", "gamma2", "beta2")

_ENC_EDGES = [
    dict(B=1, S=1, H=1, Dh=3, F=3, mask=None, norm_first=False),
    dict(B=1, S=1, H=1, Dh=3, F=3, mask=None, norm_first=True),
    dict(B=2, S=3, H=2, Dh=2, F=4, mask="causal", norm_first=False),
    dict(B=2, S=4, H=1, Dh=3, F=5, mask="causal", norm_first=True),
    dict(B=1, S=4, H=2, Dh=2, F=6, mask="random", norm_first=False),
]


def _draw_encoder(rng, i):
    if i < len(_ENC_EDGES):
        cfg = dict(_ENC_EDGES[i])
    else:
        cfg = dict(B=int(rng.integers(1, 3)), S=int(rng.integers(1, 5)), H=int(rng.integers(1, 3)),
                   Dh=int(rng.integers(2, 4)), F=int(rng.integers(2, 7)),
                   mask=[None, "causal", "random"][int(rng.integers(3))], norm_first=bool(rng.random() < 0.5))
        if cfg["H"] * cfg["Dh"] < 3:
            cfg["Dh"] = 3          # D >= 3: with D <= 2 LayerNorm's output cannot depend on x (degenerate)
    b, s, h, dh, f = cfg["B"], cfg["S"], cfg["H"], cfg["Dh"], cfg["F"]
    d = h * dh
    x = rng.standard_normal((b, s, d))
    p = {}
    for name in ("Wq", "Wk", "Wv", "Wo"):
        p[name] = rng.standard_normal((d, d)) / math.sqrt(d)
    p["W1"] = rng.standard_normal((f, d)) / math.sqrt(d)
    p["b1"] = 0.1 * rng.standard_normal(f)
    p["W2"] = rng.standard_normal((d, f)) / math.sqrt(f)
    p["b2"] = 0.1 * rng.standard_normal(d)
    for j in (1, 2):
        p[f"gamma{j}"] = 1.0 + 0.1 * rng.standard_normal(d)
        p[f"beta{j}"] = 0.1 * rng.standard_normal(d)
    mask = None
    if cfg["mask"] == "causal":
        mask = F.causal_mask(s)
    elif cfg["mask"] == "random":
        mask = rng.random((s, s)) < 0.25
    dout = rng.standard_normal((b, s, d))
    desc = _desc(f"x {_shape(x)}", f"H={h} (Dh={dh})", f"F={f}",
                 {None: "no mask", "causal": "causal mask", "random": "random mask"}[cfg["mask"]],
                 "pre-LN (norm_first)" if cfg["norm_first"] else "post-LN")
    return Case({"x": x, "params": p, "num_heads": h, "mask": mask, "norm_first": cfg["norm_first"],
                 "dout": dout}, desc, [], {"sqrt(Dh)": math.sqrt(dh)})


def _run_encoder(rec, c):
    out, cache = rec.pair("encoder_layer_forward",
                          rec.call("encoder_layer_forward", c["x"], c["params"], c["num_heads"], mask=c["mask"],
                                   norm_first=c["norm_first"]), "(out, cache)")
    rec.output("out", out)
    dx, grads = rec.unpack("encoder_layer_backward", rec.call("encoder_layer_backward", c["dout"], cache),
                           ["dx", "grads"])
    rec.output("dx", dx)
    if not isinstance(grads, dict):
        rec.fail("encoder_layer_backward", "arity",
                 f"encoder_layer_backward must return (dx, grads) with grads a dict keyed like params; its "
                 f"second value is a {type(grads).__name__}")
    for key in PARAM_KEYS:
        rec.output(f"grads[{key}]", grads.get(key, MISSING))


def _ref_encoder():
    def attn(x, p, h, mask):
        out, _, cache = F.multi_head_attention_forward(
            x, x, x, h, in_proj_weight=np.concatenate([p["Wq"], p["Wk"], p["Wv"]]), out_proj_weight=p["Wo"],
            attn_mask=mask)
        return out, cache

    def attn_back(d, cache, g):
        dq, dk, dv, gg = F.multi_head_attention_backward(d, cache)
        g["Wq"], g["Wk"], g["Wv"] = np.split(gg["in_proj_weight"], 3)
        g["Wo"] = gg["out_proj.weight"]
        return dq + dk + dv

    def ffn(x, p):
        a, c1 = F.linear_forward(x, p["W1"], p["b1"])
        r, cr = F.relu_forward(a)
        y, c2 = F.linear_forward(r, p["W2"], p["b2"])
        return y, (c1, cr, c2)

    def ffn_back(d, cache, g):
        c1, cr, c2 = cache
        dr, g["W2"], g["b2"] = F.linear_backward(d, c2)
        dx, g["W1"], g["b1"] = F.linear_backward(F.relu_backward(dr, cr), c1)
        return dx

    def encoder_layer_forward(x, params, num_heads, mask=None, norm_first=False):
        p = params
        if norm_first:
            n1, c_n1 = F.layer_norm_forward(x, p["gamma1"], p["beta1"])
            a, c_a = attn(n1, p, num_heads, mask)
            h = x + a
            n2, c_n2 = F.layer_norm_forward(h, p["gamma2"], p["beta2"])
            f, c_f = ffn(n2, p)
            y = h + f
        else:
            a, c_a = attn(x, p, num_heads, mask)
            h, c_n1 = F.layer_norm_forward(x + a, p["gamma1"], p["beta1"])
            f, c_f = ffn(h, p)
            y, c_n2 = F.layer_norm_forward(h + f, p["gamma2"], p["beta2"])
        return y, (norm_first, c_n1, c_a, c_n2, c_f)

    def encoder_layer_backward(dout, cache):
        norm_first, c_n1, c_a, c_n2, c_f = cache
        g = {}
        if norm_first:
            dn2, g["gamma2"], g["beta2"] = F.layer_norm_backward(ffn_back(dout, c_f, g), c_n2)
            dh = dout + dn2
            dn1, g["gamma1"], g["beta1"] = F.layer_norm_backward(attn_back(dh, c_a, g), c_n1)
            dx = dh + dn1
        else:
            dz2, g["gamma2"], g["beta2"] = F.layer_norm_backward(dout, c_n2)
            dh = dz2 + ffn_back(dz2, c_f, g)
            dz1, g["gamma1"], g["beta1"] = F.layer_norm_backward(dh, c_n1)
            dx = dz1 + attn_back(dz1, c_a, g)
        return dx, g

    return SimpleNamespace(encoder_layer_forward=encoder_layer_forward,
                           encoder_layer_backward=encoder_layer_backward)


ENCODER = Exercise(
    name="encoder_layer", difficulty="hard", minutes=45,
    covers="a whole encoder layer (MHA + ReLU FFN, residuals, post-LN or pre-LN) forward and backward",
    functions=("encoder_layer_forward", "encoder_layer_backward"),
    outputs=(("out", "encoder_layer_forward"), ("dx", "encoder_layer_backward"))
    + tuple((f"grads[{k}]", "encoder_layer_backward") for k in PARAM_KEYS),
    library=("layer_norm_backward", "multi_head_attention_backward", "linear_backward", "relu_backward"),
    draw=_draw_encoder, run=_run_encoder, reference=_ref_encoder, variant=V.encoder_layer_impl,
    n_edge=len(_ENC_EDGES),
    mistakes=(
        Mistake("enc_norm_placement", "post-LN and pre-LN swapped",
                "norm_first=False (post-LN): x = LN1(x + SA(x)); x = LN2(x + FF(x)). "
                "norm_first=True (pre-LN): x = x + SA(LN1(x)); x = x + FF(LN2(x)).",
                "Branch on norm_first exactly as above, forward and backward.",
                ({"swap_norm": True},)),
        Mistake("enc_residual_grad_dropped", "backward dropped a residual's identity path",
                "y = x + f(x) gives dx = dy + (df/dx)^T dy: the gradient reaches x directly *and* through f.",
                "Add the incoming gradient to the branch's gradient at every residual.",
                ({"residual_grad": False},)),
        Mistake("enc_qkv_grads_not_summed", "attention input gradient from one projection only",
                "The attention input feeds q, k and v; its gradient is the sum of the three paths.",
                "d_in = dq @ Wq + dk @ Wk + dv @ Wv.",
                ({"sum_qkv": False},)),
        Mistake("enc_relu_backward_unmasked", "ReLU backward passes the gradient where the input was negative",
                "relu'(a) = 1 where a > 0 and 0 elsewhere.",
                "da = dr * (a > 0).",
                ({"relu_backward": "none"},)),
        Mistake("enc_no_scale", "no 1/sqrt(Dh) scaling in the attention",
                "The attention scores are q k^T / sqrt(Dh) with Dh = D/H.",
                "scores = qh @ kh^T / np.sqrt(Dh).",
                ({"scale": "none"},)),
    ),
)
