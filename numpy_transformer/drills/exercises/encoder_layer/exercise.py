"""The encoder_layer drill: a whole layer (MHA + ReLU FFN, residuals, post-LN and pre-LN), forward and
backward."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from .... import functional as F
from ...engine.definition import MISSING, Case, Exercise, describe, shape_text

#: its place in `drill list`
ORDER = 240
#: the ops it contains: their mistake families (drills/families/) apply to it
OPS = ('softmax', 'attention', 'heads', 'projections', 'norms', 'residual', 'feedforward')


def _g(*names):
    return tuple(f"grads[{n}]" for n in names)


_ATTENTION_BACKWARD = (("the attention's output projection", _g("Wo")), ("the attention's values", _g("Wv")),
                       ("the attention's scores and softmax", _g("Wq", "Wk")))

#: its sub-blocks, for "where it goes wrong" (engine/localise.py): how each is switched off, and the
#: order the backward visits them (post-LN: LN2, FF, LN1, SA; pre-LN: FF, LN2, SA, LN1)
LOCALISE = {
    "switch_off": (("the mask", {"mask": None}),
                   ("the head split and merge", {"num_heads": 1}),
                   ("the attention's scores and softmax (q, k, the scale)", {"params.Wq": 0}),
                   ("the feed-forward", {"params.W2": 0, "params.b2": 0}),
                   ("the self-attention", {"params.Wo": 0})),
    "backward": lambda inputs: (
        ((("the feed-forward", _g("W2", "b2", "W1", "b1")), ("LN2", _g("gamma2", "beta2")))
         + _ATTENTION_BACKWARD + (("LN1", _g("gamma1", "beta1")),))
        if inputs["norm_first"] else
        ((("LN2", _g("gamma2", "beta2")), ("the feed-forward", _g("W2", "b2", "W1", "b1")),
          ("LN1", _g("gamma1", "beta1"))) + _ATTENTION_BACKWARD)) + (("the input gradient", ("dx",)),),
}
#: how torch re-checks the reference (reference_torch/drill_oracle.py reads it)
ORACLE = {'adapter': 'encoder_layer'}


PARAM_KEYS = ("Wq", "Wk", "Wv", "Wo", "W1", "b1", "W2", "b2", "gamma1", "beta1", "gamma2", "beta2")

_ENC_EDGES = [
    dict(B=1, S=1, H=1, Dh=3, F=3, mask=None, norm_first=False),
    dict(B=1, S=1, H=1, Dh=3, F=3, mask=None, norm_first=True),
    dict(B=2, S=3, H=2, Dh=2, F=4, mask="causal", norm_first=False),
    dict(B=2, S=4, H=1, Dh=3, F=5, mask="causal", norm_first=True),
    dict(B=1, S=4, H=2, Dh=2, F=6, mask="random", norm_first=False),
    dict(B=2, S=3, H=1, Dh=3, F=4, mask="full_row", norm_first=True),
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
    elif cfg["mask"] in ("random", "full_row"):
        mask = rng.random((s, s)) < 0.25
        if cfg["mask"] == "full_row":
            mask[min(1, s - 1)] = True      # a query that may attend no key: its attention output is zeros
    dout = rng.standard_normal((b, s, d))
    tags = ["a fully-masked row (its attention output is zeros)"] if mask is not None and np.any(
        np.all(mask, axis=-1)) else []
    desc = describe(f"x {shape_text(x)}", f"H={h} (Dh={dh})", f"F={f}",
                 {None: "no mask", "causal": "causal mask", "random": "random mask",
                  "full_row": "mask with a fully-masked row"}[cfg["mask"]],
                 "pre-LN (norm_first)" if cfg["norm_first"] else "post-LN")
    return Case({"x": x, "params": p, "num_heads": h, "mask": mask, "norm_first": cfg["norm_first"],
                 "dout": dout}, desc, tags, {"sqrt(Dh)": math.sqrt(dh)},
                options={"norm_first": "pre-LN" if cfg["norm_first"] else "post-LN",
                         "a causal mask": cfg["mask"] == "causal"})


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


# the drill's params -> the library layer's state_dict keys (torch's names); Wq, Wk, Wv are packed
STATE_KEYS = {"Wo": "self_attn.out_proj.weight", "W1": "linear1.weight", "b1": "linear1.bias",
               "W2": "linear2.weight", "b2": "linear2.bias", "gamma1": "norm1.weight", "beta1": "norm1.bias",
               "gamma2": "norm2.weight", "beta2": "norm2.bias"}


def _ref_encoder():
    """The library's own ``TransformerEncoderLayer`` (float64, ReLU, no dropout) loaded with the drill's params.

    The drill's attention has no biases: the layer's ``self_attn.in_proj_bias`` and ``out_proj.bias`` are
    loaded as zeros (adding 0 is exact) and their gradients ignored. The drill's bool mask is the layer's
    ``src_mask`` as it is (True = may not attend). The cache is the layer itself.
    """
    from .... import TransformerEncoderLayer

    def encoder_layer_forward(x, params, num_heads, mask=None, norm_first=False):
        d, f = x.shape[-1], params["W1"].shape[0]
        layer = TransformerEncoderLayer(d, num_heads, dim_feedforward=f, dropout=0.0, activation="relu",
                                        layer_norm_eps=1e-5, batch_first=True, norm_first=norm_first,
                                        bias=True, dtype=np.float64)
        state = {key: params[k] for k, key in STATE_KEYS.items()}
        state["self_attn.in_proj_weight"] = np.concatenate([params["Wq"], params["Wk"], params["Wv"]])
        state["self_attn.in_proj_bias"] = np.zeros(3 * d)
        state["self_attn.out_proj.bias"] = np.zeros(d)
        layer.load_state_dict(state)
        return layer(x, src_mask=mask), layer

    def encoder_layer_backward(dout, layer):
        dx = layer.backward(dout)
        p = dict(layer.named_parameters())
        grads = {k: p[key].grad for k, key in STATE_KEYS.items()}
        grads["Wq"], grads["Wk"], grads["Wv"] = np.split(p["self_attn.in_proj_weight"].grad, 3)
        return dx, grads

    return SimpleNamespace(encoder_layer_forward=encoder_layer_forward,
                           encoder_layer_backward=encoder_layer_backward)


EXERCISE = Exercise(
    name="encoder_layer", difficulty="hard", minutes=45,
    covers="a whole encoder layer (MHA + ReLU FFN, residuals, post-LN or pre-LN) forward and backward",
    aliases=('encoder',), topic="architecture",
    functions=("encoder_layer_forward", "encoder_layer_backward"),
    outputs=(("out", "encoder_layer_forward"), ("dx", "encoder_layer_backward"))
    + tuple((f"grads[{k}]", "encoder_layer_backward") for k in PARAM_KEYS),
    library=("layer_norm_backward", "multi_head_attention_backward", "linear_backward", "relu_backward"),
    draw=_draw_encoder, run=_run_encoder, reference=_ref_encoder, n_edge=len(_ENC_EDGES),
)
