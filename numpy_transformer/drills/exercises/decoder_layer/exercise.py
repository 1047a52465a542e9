"""The decoder_layer drill: a whole post-LN decoder layer (self-attention with tgt_mask, cross-attention
over the memory with its padding mask, ReLU feed-forward, three residuals and LayerNorms), forward and
backward with dtgt, dmemory and every parameter's gradient. Its reference is the library's
``TransformerDecoderLayer`` (ReLU, no dropout, zero attention biases) loaded with the case's weights."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from .... import functional as F
from ...engine.definition import MISSING, Case, Exercise, describe, shape_text

#: its place in `drill list`
ORDER = 250
#: the ops it contains: their mistake families (drills/families/) apply to it
OPS = ('softmax', 'attention', 'heads', 'projections', 'norms', 'residual', 'feedforward')


def _g(*names):
    return tuple(f"grads[{n}]" for n in names)


#: its sub-blocks, for "where it goes wrong" (engine/localise.py): how each is switched off, and the
#: order the backward visits them (post-LN: LN3, FF, LN2, CA, LN1, SA)
LOCALISE = {
    "switch_off": (("the memory padding mask", {"memory_key_padding_mask": None}),
                   ("the self-attention's mask", {"tgt_mask": None}),
                   ("the head split and merge", {"num_heads": 1}),
                   ("the self-attention's scores and softmax (q, k, the scale)", {"params.Wq": 0}),
                   ("the cross-attention's scores and softmax (q, k, the scale)", {"params.cWq": 0}),
                   ("the feed-forward", {"params.W2": 0, "params.b2": 0}),
                   ("the cross-attention", {"params.cWo": 0}),
                   ("the self-attention", {"params.Wo": 0})),
    "backward": (("LN3", _g("gamma3", "beta3")), ("the feed-forward", _g("W2", "b2", "W1", "b1")),
                 ("LN2", _g("gamma2", "beta2")), ("the cross-attention's output projection", _g("cWo")),
                 ("the cross-attention's values", _g("cWv")),
                 ("the cross-attention's scores and softmax", _g("cWq", "cWk")),
                 ("dmemory (the cross-attention's k and v paths)", ("dmemory",)),
                 ("LN1", _g("gamma1", "beta1")), ("the self-attention's output projection", _g("Wo")),
                 ("the self-attention's values", _g("Wv")),
                 ("the self-attention's scores and softmax", _g("Wq", "Wk")), ("the input gradient", ("dtgt",))),
}
#: how torch re-checks the reference (reference_torch/drill_oracle.py reads it)
ORACLE = {'adapter': 'decoder_layer'}


DEC_PARAM_KEYS = ("Wq", "Wk", "Wv", "Wo", "cWq", "cWk", "cWv", "cWo", "W1", "b1", "W2", "b2",
                  "gamma1", "beta1", "gamma2", "beta2", "gamma3", "beta3")

_DEC_EDGES = [
    dict(B=1, S=1, T=1, H=1, Dh=3, F=3, causal=False, pad=False),
    dict(B=1, S=3, T=2, H=1, Dh=3, F=4, causal=True, pad=False),
    dict(B=2, S=2, T=4, H=2, Dh=2, F=5, causal=True, pad=True),
    dict(B=2, S=4, T=3, H=1, Dh=4, F=3, causal=False, pad=True),
    dict(B=1, S=4, T=5, H=2, Dh=2, F=6, causal=True, pad=False),
]


def _draw_decoder(rng, i):
    if i < len(_DEC_EDGES):
        cfg = dict(_DEC_EDGES[i])
    else:
        cfg = dict(B=int(rng.integers(1, 3)), S=int(rng.integers(1, 5)), T=int(rng.integers(1, 6)),
                   H=int(rng.integers(1, 3)), Dh=int(rng.integers(2, 4)), F=int(rng.integers(2, 7)),
                   causal=bool(rng.random() < 0.7), pad=bool(rng.random() < 0.5))
        if cfg["H"] * cfg["Dh"] < 3:
            cfg["Dh"] = 3          # D >= 3: with D <= 2 LayerNorm's output cannot depend on its input
    b, s, t, h, dh, f = (cfg[k] for k in ("B", "S", "T", "H", "Dh", "F"))
    d = h * dh
    tgt, memory = rng.standard_normal((b, s, d)), rng.standard_normal((b, t, d))
    p = {k: rng.standard_normal((d, d)) / math.sqrt(d) for k in DEC_PARAM_KEYS[:8]}
    p["W1"] = rng.standard_normal((f, d)) / math.sqrt(d)
    p["b1"] = 0.1 * rng.standard_normal(f)
    p["W2"] = rng.standard_normal((d, f)) / math.sqrt(f)
    p["b2"] = 0.1 * rng.standard_normal(d)
    for j in (1, 2, 3):
        p[f"gamma{j}"] = 1.0 + 0.1 * rng.standard_normal(d)
        p[f"beta{j}"] = 0.1 * rng.standard_normal(d)
    tgt_mask = F.causal_mask(s) if cfg["causal"] else None
    pad = None
    if cfg["pad"]:                         # right padding, every memory keeps at least one position
        lengths = rng.integers(1, t + 1, size=b)
        lengths[0] = max(1, t - 1)
        pad = np.arange(t)[None, :] >= lengths[:, None]
    dout = rng.standard_normal((b, s, d))
    desc = describe(f"tgt {shape_text(tgt)}", f"memory {shape_text(memory)}", f"H={h}", f"F={f}",
                 "causal" if cfg["causal"] else "", f"padding {shape_text(pad)}" if pad is not None else "")
    return Case({"tgt": tgt, "memory": memory, "params": p, "num_heads": h, "tgt_mask": tgt_mask,
                 "memory_key_padding_mask": pad, "dout": dout}, desc, [], {"sqrt(Dh)": math.sqrt(dh)},
                options={"tgt_mask": "a causal tgt_mask" if cfg["causal"] else "no tgt_mask"})


def _run_decoder(rec, c):
    out, cache = rec.pair("decoder_layer_forward",
                          rec.call("decoder_layer_forward", c["tgt"], c["memory"], c["params"], c["num_heads"],
                                   tgt_mask=c["tgt_mask"], memory_key_padding_mask=c["memory_key_padding_mask"]),
                          "(out, cache)")
    rec.output("out", out)
    dtgt, dmemory, grads = rec.unpack("decoder_layer_backward", rec.call("decoder_layer_backward", c["dout"], cache),
                                      ["dtgt", "dmemory", "grads"])
    rec.output("dtgt", dtgt)
    rec.output("dmemory", dmemory)
    if not isinstance(grads, dict):
        rec.fail("decoder_layer_backward", "arity",
                 f"decoder_layer_backward must return (dtgt, dmemory, grads) with grads a dict keyed like params; "
                 f"its third value is a {type(grads).__name__}")
    for key in DEC_PARAM_KEYS:
        rec.output(f"grads[{key}]", grads.get(key, MISSING))


# the drill's params -> the library layer's state_dict keys (torch's names); the projections are packed
DEC_STATE_KEYS = {"Wo": "self_attn.out_proj.weight", "cWo": "multihead_attn.out_proj.weight",
                   "W1": "linear1.weight", "b1": "linear1.bias", "W2": "linear2.weight", "b2": "linear2.bias",
                   "gamma1": "norm1.weight", "beta1": "norm1.bias", "gamma2": "norm2.weight", "beta2": "norm2.bias",
                   "gamma3": "norm3.weight", "beta3": "norm3.bias"}


def _ref_decoder():
    """The library's ``TransformerDecoderLayer`` (float64, ReLU, no dropout, post-LN) loaded with the
    drill's params; its attention biases are zeros (adding 0 is exact) and their gradients ignored."""
    from .... import TransformerDecoderLayer

    def decoder_layer_forward(tgt, memory, params, num_heads, tgt_mask=None, memory_key_padding_mask=None):
        d, f = tgt.shape[-1], params["W1"].shape[0]
        layer = TransformerDecoderLayer(d, num_heads, dim_feedforward=f, dropout=0.0, activation="relu",
                                        layer_norm_eps=1e-5, batch_first=True, norm_first=False, dtype=np.float64)
        state = {key: params[k] for k, key in DEC_STATE_KEYS.items()}
        for attn, pre in (("self_attn", ""), ("multihead_attn", "c")):
            state[f"{attn}.in_proj_weight"] = np.concatenate([params[pre + "Wq"], params[pre + "Wk"],
                                                              params[pre + "Wv"]])
            state[f"{attn}.in_proj_bias"] = np.zeros(3 * d)
            state[f"{attn}.out_proj.bias"] = np.zeros(d)
        layer.load_state_dict(state)
        return layer(tgt, memory, tgt_mask=tgt_mask, memory_key_padding_mask=memory_key_padding_mask), layer

    def decoder_layer_backward(dout, layer):
        dtgt, dmemory = layer.backward(dout)
        p = dict(layer.named_parameters())
        grads = {k: p[key].grad for k, key in DEC_STATE_KEYS.items()}
        grads["Wq"], grads["Wk"], grads["Wv"] = np.split(p["self_attn.in_proj_weight"].grad, 3)
        grads["cWq"], grads["cWk"], grads["cWv"] = np.split(p["multihead_attn.in_proj_weight"].grad, 3)
        return dtgt, dmemory, grads

    return SimpleNamespace(decoder_layer_forward=decoder_layer_forward,
                           decoder_layer_backward=decoder_layer_backward)


EXERCISE = Exercise(
    name="decoder_layer", difficulty="hard", minutes=50,
    covers="a whole post-LN decoder layer (self-attention, cross-attention, ReLU FFN, residuals) forward and "
           "backward: dtgt, dmemory, every parameter",
    aliases=('decoder',),
    functions=("decoder_layer_forward", "decoder_layer_backward"),
    outputs=(("out", "decoder_layer_forward"), ("dtgt", "decoder_layer_backward"),
             ("dmemory", "decoder_layer_backward"))
    + tuple((f"grads[{k}]", "decoder_layer_backward") for k in DEC_PARAM_KEYS),
    library=("layer_norm_backward", "multi_head_attention_backward", "linear_backward", "relu_backward"),
    draw=_draw_decoder, run=_run_decoder, reference=_ref_decoder, n_edge=len(_DEC_EDGES),
    topic="architecture",
    grad_check={"loss": "out", "upstream": "dout",
                "grads": {"dtgt": "tgt", "dmemory": "memory",
                          **{f"grads[{k}]": f"params.{k}" for k in DEC_PARAM_KEYS}}},
)
