"""The multi_head_attention drill: project, split heads, attend, merge, project; the full backward."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from ... import functional as F
from .. import variants as V
from ._attention_mistakes import ATTENTION_MASK_MISTAKES, CAUSAL_MISTAKES
from ._types import Case, Exercise, Mistake, _desc, _shape


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
    desc = _desc(f"x {_shape(x)}", f"H={h} (Dh={dh})", f"mask {_shape(mask)}" if mask is not None else "no mask",
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
    from ... import MultiheadAttention

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


MHA = Exercise(
    name="multi_head_attention", difficulty="hard", minutes=30,
    covers="self-attention with H heads: project, split heads, attend, merge, project; full backward",
    functions=("mha_forward", "mha_backward"),
    outputs=(("out", "mha_forward"), ("dx", "mha_backward"), ("dWq", "mha_backward"), ("dWk", "mha_backward"),
             ("dWv", "mha_backward"), ("dWo", "mha_backward")),
    library=("multi_head_attention_forward", "multi_head_attention_backward",
             "scaled_dot_product_attention_backward"),
    draw=_draw_mha, run=_run_mha, reference=_ref_mha, variant=V.mha_impl, n_edge=len(_MHA_EDGES),
    mistakes=(
        Mistake("mha_reshape_only_split", "heads split with a reshape only (no transpose)",
                "(B, S, D).reshape(B, H, S, Dh) cuts the flat memory into H blocks that mix positions; "
                "a head is the Dh-wide slice of every position: reshape to (B, S, H, Dh), then transpose.",
                "q.reshape(B, S, H, Dh).transpose(0, 2, 1, 3); merge back with .transpose(0, 2, 1, 3)"
                ".reshape(B, S, D).",
                ({"split": "reshape", "merge": "reshape"}, {"split": "reshape"})),
        Mistake("mha_merge_without_transpose", "heads merged without the transpose",
                "(B, H, S, Dh).reshape(B, S, D) interleaves positions of one head instead of concatenating "
                "the heads of one position.",
                "ctx.transpose(0, 2, 1, 3).reshape(B, S, D).",
                ({"merge": "reshape"},)),
        Mistake("mha_no_scale", "no 1/sqrt(Dh) scaling",
                "The scores need the 1/sqrt(Dh) factor (Dh = D/H, the head width).",
                "scores = qh @ kh^T / np.sqrt(Dh).",
                ({"scale": "none"},)),
        Mistake("mha_scale_1_over_dh", "scaled by 1/Dh instead of 1/sqrt(Dh)",
                "The dot product's std grows like sqrt(Dh), so the scale is 1/sqrt(Dh).",
                "scores = qh @ kh^T / np.sqrt(Dh).",
                ({"scale": "dh"},)),
        Mistake("mha_scale_sqrt_d", "scaled by 1/sqrt(D) (model width) instead of 1/sqrt(Dh) (head width)",
                "Each head's dot product has Dh = D/H terms: the scale uses the head width.",
                "scores = qh @ kh^T / np.sqrt(D // H).",
                ({"scale": "sqrt_d"},)),
        Mistake("mha_weights_untransposed", "projections computed as x @ W instead of x @ W.T",
                "Weights have torch's layout (Dout, Din): q = x @ Wq.T.",
                "q = x @ Wq.T, ..., out = ctx @ Wo.T; then dW = dy2.T @ x2.",
                ({"weights": "untransposed"},)),
        Mistake("mha_backward_qkv_not_summed", "dx only from one projection (x feeds q, k and v)",
                "x is used three times (q = x Wq^T, k = x Wk^T, v = x Wv^T): its gradient is the sum of the "
                "three paths.",
                "dx = dq @ Wq + dk @ Wk + dv @ Wv (with dq, dk, dv merged back to (B, S, D)).",
                ({"backward": "no_sum_qkv"},)),
        Mistake("mha_backward_no_rowsum", "softmax backward missing the row-sum term",
                "dscores = P * dP forgets the softmax Jacobian's -P P^T part.",
                "dscores = P * (dP - np.sum(dP * P, axis=-1, keepdims=True)).",
                ({"backward": "no_rowsum"},)),
        *ATTENTION_MASK_MISTAKES, *CAUSAL_MISTAKES,
    ),
)
