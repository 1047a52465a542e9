"""The scaled_dot_product_attention drill: scale, boolean mask, causal, fully-masked rows; backward."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from .... import functional as F
from ...engine.definition import Case, Exercise, describe, shape_text

#: its place in `drill list`
ORDER = 180
#: the ops it contains: their mistake families (drills/families/) apply to it
OPS = ('softmax', 'attention')
#: how torch re-checks the reference (reference_torch/drill_oracle.py reads it)
ORACLE = {'adapter': 'scaled_dot_product_attention'}


_ATTN_EDGES = [
    dict(B=1, H=1, S=1, T=1, Dh=1, Dv=1, mask=None, causal=False),
    dict(B=1, H=2, S=1, T=3, Dh=4, Dv=2, mask=None, causal=True),
    dict(B=2, H=1, S=3, T=3, Dh=2, Dv=3, mask="full_row", causal=False),
    dict(B=1, H=3, S=4, T=4, Dh=3, Dv=3, mask=None, causal=True),
    dict(B=2, H=2, S=3, T=5, Dh=4, Dv=4, mask="batch", causal=False),
    dict(B=1, H=1, S=5, T=5, Dh=8, Dv=2, mask="st", causal=True),
    dict(B=2, H=2, S=4, T=2, Dh=2, Dv=3, mask="st", causal=False),
]


def _draw_attention(rng, i):
    if i < len(_ATTN_EDGES):
        cfg = dict(_ATTN_EDGES[i])
    else:
        cfg = dict(B=int(rng.integers(1, 3)), H=int(rng.integers(1, 4)), S=int(rng.integers(1, 6)),
                   T=int(rng.integers(1, 6)), Dh=int(rng.integers(1, 7)), Dv=int(rng.integers(1, 6)),
                   mask=[None, "st", "batch"][int(rng.choice(3, p=[0.4, 0.3, 0.3]))],
                   causal=bool(rng.random() < 0.4))
    b, h, s, t, dh, dv = (cfg[k] for k in ("B", "H", "S", "T", "Dh", "Dv"))
    q = rng.standard_normal((b, h, s, dh))
    k = rng.standard_normal((b, h, t, dh))
    v = rng.standard_normal((b, h, t, dv))
    mask = None
    if cfg["mask"] in ("st", "full_row"):
        mask = rng.random((s, t)) < 0.3
        if cfg["mask"] == "full_row":
            mask[min(1, s - 1)] = True
    elif cfg["mask"] == "batch":
        mask = rng.random((b, 1, s, t)) < 0.3
    dout = rng.standard_normal((b, h, s, dv))
    blocked = np.zeros((s, t), dtype=bool) if mask is None else mask
    if cfg["causal"]:
        blocked = blocked | F.causal_mask(s, t)
    tags = ["a fully-masked row (expect zeros there)"] if np.any(np.all(blocked, axis=-1)) else []
    desc = describe(f"q {shape_text(q)}", f"k {shape_text(k)}", f"v {shape_text(v)}",
                 f"mask {shape_text(mask)}" if mask is not None else "no mask", "causal" if cfg["causal"] else "")
    return Case({"q": q, "k": k, "v": v, "mask": mask, "causal": cfg["causal"], "dout": dout}, desc, tags,
                {"sqrt(Dh)": math.sqrt(dh), "Dh": dh})


def _run_attention(rec, c):
    out, cache = rec.pair("attention_forward",
                          rec.call("attention_forward", c["q"], c["k"], c["v"], mask=c["mask"], causal=c["causal"]),
                          "(out, cache)")
    rec.output("out", out)
    dq, dk, dv = rec.unpack("attention_backward", rec.call("attention_backward", c["dout"], cache),
                            ["dq", "dk", "dv"])
    rec.output("dq", dq)
    rec.output("dk", dk)
    rec.output("dv", dv)


def _ref_attention():
    """The library's attention. This drill's bool mask is True where a query may NOT attend (its own
    convention, stated in the skeleton); the library's function follows torch's
    ``scaled_dot_product_attention`` (True = takes part) and takes no mask together with is_causal, so
    the drill's mask and causal flag become one mask of the function's convention."""
    def attention_forward(q, k, v, mask=None, causal=False):
        if mask is None:
            return F.scaled_dot_product_attention_forward(q, k, v, is_causal=causal)
        blocked = mask | F.causal_mask(q.shape[-2], k.shape[-2]) if causal else mask
        return F.scaled_dot_product_attention_forward(q, k, v, attn_mask=~blocked)
    return SimpleNamespace(attention_forward=attention_forward,
                           attention_backward=F.scaled_dot_product_attention_backward)


EXERCISE = Exercise(
    name="scaled_dot_product_attention", difficulty="medium", minutes=20,
    covers="softmax(q k^T / sqrt(Dh)) v with a boolean mask and a causal option; backward dq, dk, dv",
    aliases=('attention', 'sdpa'), topic="attention",
    functions=("attention_forward", "attention_backward"),
    outputs=(("out", "attention_forward"), ("dq", "attention_backward"), ("dk", "attention_backward"),
             ("dv", "attention_backward")),
    library=("scaled_dot_product_attention_forward", "scaled_dot_product_attention_backward",
             "softmax_backward"),
    draw=_draw_attention, run=_run_attention, reference=_ref_attention, n_edge=len(_ATTN_EDGES),
    exception_hints=(
        (r"broadcast", "mask is (S, T) or (B, 1, S, T) and must broadcast against the scores (B, H, S, T); "
                       "k^T means swapping the last two axes: np.swapaxes(k, -1, -2), not k.T"),
        (r"matmul|core dimension|not aligned",
         "check each matmul's shapes (S and T differ in general): scores = q k^T is (.., S, T); in the "
         "backward dv = P^T dout is (.., T, Dv) and dk = dA^T q is (.., T, Dh); k.T on a 4-D array reverses "
         "every axis, use np.swapaxes(k, -1, -2)"),
    ),
)
