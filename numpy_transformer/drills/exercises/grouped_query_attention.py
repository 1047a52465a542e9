"""The grouped_query_attention drill: query heads sharing key/value heads (multi-query when Hkv = 1),
the head mapping h // G and the group-summed backward; causal option."""

from __future__ import annotations

import math
from types import SimpleNamespace

from ... import functional as F
from .. import variants as V
from ._types import Case, Exercise, Mistake, _desc, _shape


_GQA_EDGES = [
    dict(B=1, Hkv=1, G=1, S=1, T=1, Dh=1, Dv=1, causal=False),
    dict(B=1, Hkv=1, G=4, S=3, T=3, Dh=2, Dv=2, causal=True),          # multi-query
    dict(B=2, Hkv=2, G=2, S=2, T=4, Dh=3, Dv=2, causal=False),
    dict(B=1, Hkv=3, G=1, S=4, T=4, Dh=4, Dv=3, causal=True),          # one key/value head per query head
    dict(B=1, Hkv=2, G=3, S=4, T=5, Dh=2, Dv=4, causal=False),
    dict(B=2, Hkv=3, G=2, S=5, T=3, Dh=3, Dv=2, causal=True),
]


def _draw_gqa(rng, i):
    if i < len(_GQA_EDGES):
        cfg = dict(_GQA_EDGES[i])
    else:
        cfg = dict(B=int(rng.integers(1, 3)), Hkv=int(rng.integers(1, 4)), G=int(rng.integers(1, 5)),
                   S=int(rng.integers(1, 6)), T=int(rng.integers(1, 6)), Dh=int(rng.integers(1, 6)),
                   Dv=int(rng.integers(1, 5)), causal=bool(rng.random() < 0.4))
    b, hkv, g, s, t, dh, dv = (cfg[k] for k in ("B", "Hkv", "G", "S", "T", "Dh", "Dv"))
    q = rng.standard_normal((b, hkv * g, s, dh))
    k = rng.standard_normal((b, hkv, t, dh))
    v = rng.standard_normal((b, hkv, t, dv))
    dout = rng.standard_normal((b, hkv * g, s, dv))
    tags = ["multi-query (Hkv = 1)"] if hkv == 1 and g > 1 else []
    desc = _desc(f"q {_shape(q)}", f"k {_shape(k)}", f"v {_shape(v)}", f"G={g}", "causal" if cfg["causal"] else "")
    return Case({"q": q, "k": k, "v": v, "causal": cfg["causal"], "dout": dout}, desc, tags,
                {"sqrt(Dh)": math.sqrt(dh), "G": g})


def _run_gqa(rec, c):
    out, cache = rec.pair("gqa_forward", rec.call("gqa_forward", c["q"], c["k"], c["v"], causal=c["causal"]),
                          "(out, cache)")
    rec.output("out", out)
    dq, dk, dv = rec.unpack("gqa_backward", rec.call("gqa_backward", c["dout"], cache), ["dq", "dk", "dv"])
    rec.output("dq", dq)
    rec.output("dk", dk)
    rec.output("dv", dv)


def _ref_gqa():
    """The library's attention with ``enable_gqa=True`` (torch's argument and head mapping)."""
    def gqa_forward(q, k, v, causal=False):
        return F.scaled_dot_product_attention_forward(q, k, v, is_causal=causal, enable_gqa=True)
    return SimpleNamespace(gqa_forward=gqa_forward, gqa_backward=F.scaled_dot_product_attention_backward)


GQA = Exercise(
    name="grouped_query_attention", difficulty="medium", minutes=20,
    covers="attention with Hkv < Hq key/value heads (multi-query at Hkv = 1): head h uses h // G; "
           "the shared heads' gradients summed over their group",
    functions=("gqa_forward", "gqa_backward"),
    outputs=(("out", "gqa_forward"), ("dq", "gqa_backward"), ("dk", "gqa_backward"), ("dv", "gqa_backward")),
    library=("scaled_dot_product_attention_forward", "scaled_dot_product_attention_backward"),
    draw=_draw_gqa, run=_run_gqa, reference=_ref_gqa, variant=V.gqa_impl, n_edge=len(_GQA_EDGES),
    exception_hints=(
        (r"broadcast|matmul|core dimension|not aligned",
         "q is (B, Hq, S, Dh) but k and v have Hkv heads: view q as (B, Hkv, G, S, Dh) and give k and v a "
         "group axis, k[:, :, None] (B, Hkv, 1, T, Dh), or repeat them to Hq heads; dk and dv must come "
         "back with Hkv heads"),
    ),
    mistakes=(
        Mistake("gqa_grad_one_member", "a shared head's gradient taken from one query head of its group",
                "k_j and v_j are used by all G query heads of group j; each use changes the loss, so their "
                "gradient is the sum over the group, not one member's.",
                "dk = dk_per_query_head.reshape(B, Hkv, G, T, Dh).sum(axis=2) (and the same for dv).",
                ({"reduce": "first"},)),
        Mistake("gqa_grad_mean", "a shared head's gradient averaged over its group instead of summed",
                "A broadcast in the forward is a sum in the backward: dk_j = sum_g dk_(j, g). The mean is "
                "that sum divided by G.",
                "Sum over the group axis: .sum(axis=2), not .mean(axis=2).",
                ({"reduce": "mean"},)),
        Mistake("gqa_head_mapping_modulo", "query head h paired with key/value head h % Hkv instead of h // G",
                "Consecutive query heads share a key/value head (torch's repeat_interleave: heads 0, 0, 1, 1 "
                "for Hkv = 2, G = 2); np.tile or torch's repeat gives 0, 1, 0, 1.",
                "q.reshape(B, Hkv, G, S, Dh) (not (B, G, Hkv, ...)), or np.repeat(k, G, axis=1), not np.tile.",
                ({"mapping": "modulo"},)),
        Mistake("gqa_no_scale", "no 1/sqrt(Dh) scaling",
                "Without the scale the scores grow like sqrt(Dh) and the softmax saturates.",
                "scores = q @ k^T / np.sqrt(Dh), with Dh = q.shape[-1] (and the same factor in the backward).",
                ({"scale": "none"},)),
        Mistake("gqa_backward_no_rowsum", "softmax backward missing the row-sum term",
                "dscores = P * dP forgets the softmax Jacobian's -P P^T part.",
                "dA = P * (dP - np.sum(dP * P, axis=-1, keepdims=True)).",
                ({"backward": "no_rowsum"},)),
    ),
)
