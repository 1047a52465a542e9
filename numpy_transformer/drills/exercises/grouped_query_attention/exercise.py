"""The grouped_query_attention drill: query heads sharing key/value heads (multi-query when Hkv = 1),
the head mapping h // G and the group-summed backward; causal option."""

from __future__ import annotations

import math
from types import SimpleNamespace

from .... import functional as F
from ...engine.definition import Case, Exercise, describe, shape_text

#: its place in `drill list`
ORDER = 190
#: the ops it contains: their mistake families (drills/families/) apply to it
OPS = ('softmax', 'attention')
#: how torch re-checks the reference (reference_torch/drill_oracle.py reads it)
ORACLE = {'op': 'scaled_dot_product_attention_gqa',
          'inputs': {'query': 'q', 'key': 'k', 'value': 'v'},
          'static': {'enable_gqa': True},
          'options': {'is_causal': 'causal'},
          'upstream': 'dout',
          'outputs': {'out': 'out', 'dq': 'query', 'dk': 'key', 'dv': 'value'}}


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
    desc = describe(f"q {shape_text(q)}", f"k {shape_text(k)}", f"v {shape_text(v)}", f"G={g}",
                    "causal" if cfg["causal"] else "")
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


EXERCISE = Exercise(
    name="grouped_query_attention", difficulty="medium", minutes=20,
    covers="attention with Hkv < Hq key/value heads (multi-query at Hkv = 1): head h uses h // G; "
           "the shared heads' gradients summed over their group",
    aliases=('gqa', 'mqa'), topic="attention",
    functions=("gqa_forward", "gqa_backward"),
    outputs=(("out", "gqa_forward"), ("dq", "gqa_backward"), ("dk", "gqa_backward"), ("dv", "gqa_backward")),
    library=("scaled_dot_product_attention_forward", "scaled_dot_product_attention_backward"),
    draw=_draw_gqa, run=_run_gqa, reference=_ref_gqa, n_edge=len(_GQA_EDGES),
    exception_hints=(
        (r"broadcast|matmul|core dimension|not aligned",
         "q is (B, Hq, S, Dh) but k and v have Hkv heads: view q as (B, Hkv, G, S, Dh) and give k and v a "
         "group axis, k[:, :, None] (B, Hkv, 1, T, Dh), or repeat them to Hq heads; dk and dv must come "
         "back with Hkv heads"),
    ),
)
