"""The cross_attention drill: multi-head attention of the decoder's x over the encoder's memory, with
the memory's key padding mask; the backward's dmemory collects the key and the value paths. Its
reference is the library's ``MultiheadAttention`` (no biases) called as torch's decoder calls it."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from ...engine.definition import Case, Exercise, describe, shape_text

#: its place in `drill list`
ORDER = 220
#: the ops it contains: their mistake families (drills/families/) apply to it
OPS = ('softmax', 'attention', 'heads', 'projections')

#: its sub-blocks, for "where it goes wrong" (engine/localise.py): how each is switched off, and the
#: order the backward visits them
LOCALISE = {
    "switch_off": (("the padding mask", {"memory_key_padding_mask": None}),
                   ("the head split and merge", {"num_heads": 1}),
                   ("the scores and softmax (q, k, the scale)", {"Wq": 0})),
    "backward": (("the output projection", ("dWo",)), ("the values", ("dWv",)),
                 ("the scores and softmax", ("dWq", "dWk")),
                 ("the input gradients (dx; dmemory: k and v paths summed)", ("dx", "dmemory"))),
}
#: how torch re-checks the reference (reference_torch/drill_oracle.py reads it)
ORACLE = {'adapter': 'cross_attention'}


_XATTN_EDGES = [
    dict(B=1, S=1, T=1, H=1, Dh=1, mask=False),
    dict(B=1, S=3, T=5, H=1, Dh=4, mask=False),
    dict(B=2, S=4, T=2, H=2, Dh=3, mask=False),
    dict(B=2, S=3, T=3, H=2, Dh=2, mask=True),
    dict(B=2, S=2, T=5, H=3, Dh=2, mask=True),
    dict(B=3, S=4, T=4, H=1, Dh=3, mask=True),
]


def _draw_xattn(rng, i):
    if i < len(_XATTN_EDGES):
        cfg = dict(_XATTN_EDGES[i])
    else:
        s = int(rng.integers(1, 6))
        cfg = dict(B=int(rng.integers(1, 4)), S=s, T=s if rng.random() < 0.5 else int(rng.integers(1, 7)),
                   H=int(rng.integers(1, 4)), Dh=int(rng.integers(1, 4)), mask=bool(rng.random() < 0.6))
    b, s, t, h, dh = cfg["B"], cfg["S"], cfg["T"], cfg["H"], cfg["Dh"]
    d = h * dh
    x, memory = rng.standard_normal((b, s, d)), rng.standard_normal((b, t, d))
    Wq, Wk, Wv, Wo = (rng.standard_normal((d, d)) / math.sqrt(d) for _ in range(4))
    mask = None
    if cfg["mask"]:                        # right padding: memory b has lengths[b] >= 1 real positions
        lengths = rng.integers(1, t + 1, size=b)
        lengths[0] = max(1, t - 1) if t > 1 else 1
        mask = np.arange(t)[None, :] >= lengths[:, None]
    dout = rng.standard_normal((b, s, d))
    desc = describe(f"x {shape_text(x)}", f"memory {shape_text(memory)}", f"H={h}",
                 f"padding {shape_text(mask)}" if mask is not None else "")
    return Case({"x": x, "memory": memory, "Wq": Wq, "Wk": Wk, "Wv": Wv, "Wo": Wo, "num_heads": h,
                 "memory_key_padding_mask": mask, "dout": dout}, desc, [],
                {"sqrt(Dh)": math.sqrt(dh)}, {"S = T": s == t})


def _run_xattn(rec, c):
    out, cache = rec.pair("cross_attention_forward",
                          rec.call("cross_attention_forward", c["x"], c["memory"], c["Wq"], c["Wk"], c["Wv"],
                                   c["Wo"], c["num_heads"], memory_key_padding_mask=c["memory_key_padding_mask"]),
                          "(out, cache)")
    rec.output("out", out)
    names = ["dx", "dmemory", "dWq", "dWk", "dWv", "dWo"]
    grads = rec.unpack("cross_attention_backward", rec.call("cross_attention_backward", c["dout"], cache), names)
    for name, g in zip(names, grads):
        rec.output(name, g)


def _ref_xattn():
    """The library's ``MultiheadAttention`` without biases, called ``attn(x, memory, memory,
    key_padding_mask=...)`` as ``TransformerDecoderLayer`` calls it; its backward's key and value
    gradients both belong to memory."""
    from .... import MultiheadAttention

    def cross_attention_forward(x, memory, Wq, Wk, Wv, Wo, num_heads, memory_key_padding_mask=None):
        attn = MultiheadAttention(x.shape[-1], num_heads, bias=False, batch_first=True, dtype=np.float64)
        attn.load_state_dict({"in_proj_weight": np.concatenate([Wq, Wk, Wv]), "out_proj.weight": Wo})
        out, _ = attn(x, memory, memory, key_padding_mask=memory_key_padding_mask, need_weights=False)
        return out, attn

    def cross_attention_backward(dout, attn):
        dq, dk, dv = attn.backward(dout)
        dWq, dWk, dWv = np.split(attn.in_proj_weight.grad, 3)
        return dq, dk + dv, dWq, dWk, dWv, attn.out_proj.weight.grad

    return SimpleNamespace(cross_attention_forward=cross_attention_forward,
                           cross_attention_backward=cross_attention_backward)


EXERCISE = Exercise(
    name="cross_attention", difficulty="hard", minutes=25,
    covers="the decoder's queries over the encoder's memory with its padding mask; dx and dmemory (the key "
           "and value paths)",
    aliases=('xattn', 'cross'),
    functions=("cross_attention_forward", "cross_attention_backward"),
    outputs=(("out", "cross_attention_forward"), ("dx", "cross_attention_backward"),
             ("dmemory", "cross_attention_backward"), ("dWq", "cross_attention_backward"),
             ("dWk", "cross_attention_backward"), ("dWv", "cross_attention_backward"),
             ("dWo", "cross_attention_backward")),
    library=("multi_head_attention_forward", "multi_head_attention_backward"),
    draw=_draw_xattn, run=_run_xattn, reference=_ref_xattn, n_edge=len(_XATTN_EDGES),
    topic="attention",
    exception_hints=(
        (r"broadcast|could not be broadcast",
         "the padding mask (B, T) must line up with the KEY axis of the (B, H, S, T) scores: "
         "mask[:, None, None, :]"),
    ),
)
