"""The multi_head_attention drill: project, split heads, attend, merge, project; the full backward."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from .... import functional as F
from ...engine.definition import Case, Exercise, describe, shape_text

#: its place in `drill list`
ORDER = 210
#: the ops it contains: their mistake families (drills/families/) apply to it
OPS = ('softmax', 'attention', 'heads', 'projections')

#: its sub-blocks, for "where it goes wrong" (engine/localise.py): how each is switched off, and the
#: order the backward visits them
LOCALISE = {
    "switch_off": (("the mask", {"mask": None, "causal": False}),
                   ("the head split and merge", {"num_heads": 1}),
                   ("the scores and softmax (q, k, the scale)", {"Wq": 0})),
    "backward": (("the output projection", ("dWo",)), ("the values", ("dWv",)),
                 ("the scores and softmax", ("dWq", "dWk")), ("the input gradient (q, k, v paths summed)", ("dx",))),
}
#: how torch re-checks the reference (reference_torch/drill_oracle.py reads it)
ORACLE = {'adapter': 'multi_head_attention'}


_MHA_EDGES = [
    dict(B=1, S=1, H=1, Dh=1, mask=False, causal=False),
    dict(B=1, S=3, H=1, Dh=4, mask=False, causal=False),
    dict(B=2, S=4, H=2, Dh=3, mask=False, causal=False),
    dict(B=1, S=5, H=4, Dh=2, mask=False, causal=True),
    dict(B=2, S=3, H=3, Dh=2, mask=True, causal=False),
    dict(B=1, S=1, H=2, Dh=2, mask=False, causal=True),
    dict(B=2, S=4, H=2, Dh=2, mask="full_row", causal=True),
]


def _draw_mha(rng, i):
    if i < len(_MHA_EDGES):
        cfg = dict(_MHA_EDGES[i])
    else:
        cfg = dict(B=int(rng.integers(1, 3)), S=int(rng.integers(1, 6)), H=int(rng.integers(1, 4)),
                   Dh=int(rng.integers(1, 4)), mask=bool(rng.random() < 0.3), causal=bool(rng.random() < 0.4))
    b, s, h, dh = cfg["B"], cfg["S"], cfg["H"], cfg["Dh"]
    d = h * dh
    x = rng.standard_normal((b, s, d))
    Wq, Wk, Wv, Wo = (rng.standard_normal((d, d)) / math.sqrt(d) for _ in range(4))
    mask = (rng.random((s, s)) < 0.25) if cfg["mask"] else None
    if cfg["mask"] == "full_row":
        mask[min(1, s - 1)] = True          # a query that may attend no key: its row must be zeros
    blocked = np.zeros((s, s), dtype=bool) if mask is None else mask
    blocked = blocked | F.causal_mask(s) if cfg["causal"] else blocked
    tags = ["a fully-masked row (expect zeros there)"] if np.any(np.all(blocked, axis=-1)) else []
    dout = rng.standard_normal((b, s, d))
    desc = describe(f"x {shape_text(x)}", f"H={h} (Dh={dh})",
                    f"mask {shape_text(mask)}" if mask is not None else "no mask",
                 "causal" if cfg["causal"] else "")
    return Case({"x": x, "Wq": Wq, "Wk": Wk, "Wv": Wv, "Wo": Wo, "num_heads": h, "mask": mask,
                 "causal": cfg["causal"], "dout": dout}, desc, tags,
                {"sqrt(Dh)": math.sqrt(dh), "Dh": dh, "sqrt(D)": math.sqrt(d), "D": d, "H": h})


def _run_mha(rec, c):
    out, cache = rec.pair("mha_forward",
                          rec.call("mha_forward", c["x"], c["Wq"], c["Wk"], c["Wv"], c["Wo"], c["num_heads"],
                                   mask=c["mask"], causal=c["causal"]), "(out, cache)")
    rec.output("out", out)
    names = ["dx", "dWq", "dWk", "dWv", "dWo"]
    grads = rec.unpack("mha_backward", rec.call("mha_backward", c["dout"], cache), names)
    for name, g in zip(names, grads):
        rec.output(name, g)


def _blocked(mask, s, causal):
    if not causal:
        return mask
    c = F.causal_mask(s)
    return c if mask is None else (np.asarray(mask, dtype=bool) | c)


def _ref_mha():
    """The library's own ``MultiheadAttention`` without biases (float64) loaded with Wq, Wk, Wv and Wo.

    The drill's bool mask (True = may not attend) and its causal flag combine into the module's
    ``attn_mask``. The cache is the module itself.
    """
    from .... import MultiheadAttention

    def mha_forward(x, Wq, Wk, Wv, Wo, num_heads, mask=None, causal=False):
        attn = MultiheadAttention(x.shape[-1], num_heads, bias=False, batch_first=True, dtype=np.float64)
        attn.load_state_dict({"in_proj_weight": np.concatenate([Wq, Wk, Wv]), "out_proj.weight": Wo})
        out, _ = attn(x, x, x, attn_mask=_blocked(mask, x.shape[1], causal), need_weights=False)
        return out, attn

    def mha_backward(dout, attn):
        dx = attn.backward(dout, sum_inputs=True)       # x fed query, key and value: their gradients add
        dWq, dWk, dWv = np.split(attn.in_proj_weight.grad, 3)
        return dx, dWq, dWk, dWv, attn.out_proj.weight.grad

    return SimpleNamespace(mha_forward=mha_forward, mha_backward=mha_backward)


EXERCISE = Exercise(
    name="multi_head_attention", difficulty="hard", minutes=30,
    covers="self-attention with H heads: project, split heads, attend, merge, project; full backward",
    aliases=('mha',), topic="attention",
    functions=("mha_forward", "mha_backward"),
    outputs=(("out", "mha_forward"), ("dx", "mha_backward"), ("dWq", "mha_backward"), ("dWk", "mha_backward"),
             ("dWv", "mha_backward"), ("dWo", "mha_backward")),
    library=("multi_head_attention_forward", "multi_head_attention_backward",
             "scaled_dot_product_attention_backward"),
    draw=_draw_mha, run=_run_mha, reference=_ref_mha, n_edge=len(_MHA_EDGES),
)
