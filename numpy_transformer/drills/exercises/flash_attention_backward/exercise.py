"""The flash_attention_backward drill: the backward of tiled attention from the forward's output and
log-sum-exp, tile by tile (P = exp(s - lse), the row sum delta = rowsum(dout * out) once per row, dk
and dv accumulated over the query tiles). Its reference is the library's ``F.flash_attention_backward``
on the forward's cache; the case's out and lse come from ``F.flash_attention_forward``."""

from __future__ import annotations

import math
from types import SimpleNamespace

from .... import functional as F
from ...engine.definition import Case, Exercise, describe, shape_text

#: its place in `drill list`
ORDER = 230
#: the ops it contains: their mistake families (drills/families/) apply to it
OPS = ('softmax', 'attention')
#: how torch re-checks the reference (reference_torch/drill_oracle.py reads it)
ORACLE = {'op': 'scaled_dot_product_attention',
          'inputs': {'query': 'q', 'key': 'k', 'value': 'v'},
          'options': {'is_causal': 'causal'},
          'upstream': 'dout',
          'outputs': {'dq': 'query', 'dk': 'key', 'dv': 'value'}}


_FLASH_EDGES = [
    dict(B=1, H=1, S=1, T=1, Dh=1, Dv=1, causal=False, bq=2, bk=2),
    dict(B=1, H=1, S=4, T=4, Dh=2, Dv=2, causal=False, bq=2, bk=2),
    dict(B=1, H=2, S=5, T=7, Dh=3, Dv=2, causal=False, bq=2, bk=3),
    dict(B=2, H=1, S=6, T=6, Dh=2, Dv=3, causal=True, bq=2, bk=2),
    dict(B=1, H=2, S=3, T=5, Dh=4, Dv=2, causal=True, bq=1, bk=2),
    dict(B=1, H=1, S=3, T=3, Dh=2, Dv=2, causal=False, bq=4, bk=4),      # one tile: blocks larger than S, T
]


def _draw_flash(rng, i):
    if i < len(_FLASH_EDGES):
        cfg = dict(_FLASH_EDGES[i])
    else:
        cfg = dict(B=int(rng.integers(1, 3)), H=int(rng.integers(1, 3)), S=int(rng.integers(1, 8)),
                   T=int(rng.integers(1, 9)), Dh=int(rng.integers(1, 5)), Dv=int(rng.integers(1, 4)),
                   causal=bool(rng.random() < 0.4), bq=int(rng.integers(1, 4)), bk=int(rng.integers(1, 4)))
    b, h, s, t, dh, dv = (cfg[k] for k in ("B", "H", "S", "T", "Dh", "Dv"))
    q, k, v = rng.standard_normal((b, h, s, dh)), rng.standard_normal((b, h, t, dh)), rng.standard_normal((b, h, t, dv))
    out, cache = F.flash_attention_forward(q, k, v, is_causal=cfg["causal"], block_q=cfg["bq"], block_k=cfg["bk"])
    dout = rng.standard_normal(out.shape)
    tags = ["one tile per row" if t <= cfg["bk"] else "several key tiles per row"]
    desc = describe(f"q {shape_text(q)}", f"k {shape_text(k)}", f"tiles {cfg['bq']}x{cfg['bk']}",
                 "causal" if cfg["causal"] else "")
    return Case({"q": q, "k": k, "v": v, "out": out, "lse": cache.lse, "dout": dout, "causal": cfg["causal"],
                 "block_q": cfg["bq"], "block_k": cfg["bk"]}, desc, tags, {"sqrt(Dh)": math.sqrt(dh)},
                {"block_q": "several query tiles" if s > cfg["bq"] else "one query tile",
                 "block_k": "several key tiles" if t > cfg["bk"] else "one key tile"})


def _run_flash(rec, c):
    res = rec.call("flash_attention_backward", c["q"], c["k"], c["v"], c["out"], c["lse"], c["dout"],
                   causal=c["causal"], block_q=c["block_q"], block_k=c["block_k"])
    dq, dk, dv = rec.unpack("flash_attention_backward", res, ["dq", "dk", "dv"])
    rec.output("dq", dq)
    rec.output("dk", dk)
    rec.output("dv", dv)


def _ref_flash():
    """``F.flash_attention_backward`` on the cache the forward would have saved (the case's out, lse)."""
    def flash_attention_backward(q, k, v, out, lse, dout, causal=False, block_q=2, block_k=2):
        cache = F.FlashAttentionCache(q, k, v, out, lse, None, causal, 1.0 / math.sqrt(q.shape[-1]),
                                      block_q, block_k, None)
        return F.flash_attention_backward(dout, cache)
    return SimpleNamespace(flash_attention_backward=flash_attention_backward)


EXERCISE = Exercise(
    name="flash_attention_backward", difficulty="hard", minutes=30,
    covers="tiled attention's backward from the saved lse: P = exp(s - lse) per tile, delta = "
           "rowsum(dout * out), dk and dv summed over query tiles",
    aliases=('flash', 'flash_attention'),
    functions=("flash_attention_backward",),
    outputs=(("dq", "flash_attention_backward"), ("dk", "flash_attention_backward"),
             ("dv", "flash_attention_backward")),
    library=("flash_attention_forward", "flash_attention_backward"),
    draw=_draw_flash, run=_run_flash, reference=_ref_flash, n_edge=len(_FLASH_EDGES),
    topic="attention",
)
