"""The causal_attention_kv_cache drill: one decoding step of causal self-attention with a KV cache (or a
chunk of S new positions): append, then attend with the causal mask aligned bottom-right; the output
equals the last S rows of the full causal attention. Its reference is the library's attention over the
concatenated keys and values."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from .... import functional as F
from ...engine.definition import Case, Exercise, describe, shape_text

#: its place in `drill list`
ORDER = 200
#: the ops it contains: their mistake families (drills/families/) apply to it
OPS = ('softmax', 'attention', 'positions')
#: how torch re-checks the reference (reference_torch/drill_oracle.py reads it)
ORACLE = {'adapter': 'causal_attention_kv_cache'}


_KV_EDGES = [
    dict(B=1, H=1, T=0, S=1, Dh=1, Dv=1),          # the first step: an empty cache
    dict(B=1, H=1, T=1, S=1, Dh=2, Dv=2),
    dict(B=2, H=2, T=4, S=1, Dh=3, Dv=2),
    dict(B=1, H=3, T=5, S=1, Dh=4, Dv=3),
    dict(B=1, H=2, T=3, S=3, Dh=2, Dv=2),          # a chunk of three new positions
    dict(B=2, H=1, T=0, S=4, Dh=3, Dv=4),          # the prompt itself: plain causal attention
]


def _draw_kv(rng, i):
    if i < len(_KV_EDGES):
        cfg = dict(_KV_EDGES[i])
    else:
        cfg = dict(B=int(rng.integers(1, 3)), H=int(rng.integers(1, 4)), T=int(rng.integers(0, 7)),
                   S=1 if rng.random() < 0.6 else int(rng.integers(2, 5)), Dh=int(rng.integers(1, 6)),
                   Dv=int(rng.integers(1, 5)))
    b, h, t, s, dh, dv = (cfg[k] for k in ("B", "H", "T", "S", "Dh", "Dv"))
    inputs = {"q": rng.standard_normal((b, h, s, dh)), "k_new": rng.standard_normal((b, h, s, dh)),
              "v_new": rng.standard_normal((b, h, s, dv)), "k_cache": rng.standard_normal((b, h, t, dh)),
              "v_cache": rng.standard_normal((b, h, t, dv))}
    tags = (["an empty cache (T = 0)"] if t == 0 else []) + (["S > 1 new positions (a chunk)"] if s > 1 else [])
    return Case(inputs, describe(f"q {shape_text(inputs['q'])}", f"cache {shape_text(inputs['k_cache'])}"), tags,
                {"sqrt(Dh)": math.sqrt(dh)}, {"S": "one new position (S = 1)" if s == 1 else "S > 1"})


def _run_kv(rec, c):
    res = rec.call("kv_cache_attention", c["q"], c["k_new"], c["v_new"], c["k_cache"], c["v_cache"])
    out, k_cache, v_cache = rec.unpack("kv_cache_attention", res, ["out", "k_cache", "v_cache"])
    rec.output("out", out)
    rec.output("k_cache", k_cache)
    rec.output("v_cache", v_cache)


def _ref_kv():
    """The library's attention of the new queries over the concatenated keys and values, with the causal
    mask of the last S rows (the library's bool mask: True = takes part)."""
    def kv_cache_attention(q, k_new, v_new, k_cache, v_cache):
        K = np.concatenate([k_cache, k_new], axis=2)
        Vv = np.concatenate([v_cache, v_new], axis=2)
        s, n = q.shape[-2], K.shape[-2]
        out, _ = F.scaled_dot_product_attention_forward(q, K, Vv, attn_mask=np.tril(np.ones((s, n), bool), n - s))
        return out, K, Vv
    return SimpleNamespace(kv_cache_attention=kv_cache_attention)


EXERCISE = Exercise(
    name="causal_attention_kv_cache", difficulty="medium", minutes=15,
    covers="one decoding step with a KV cache: append, then attend; the causal mask of the last S rows "
           "(bottom-right); equal to the full forward's last rows",
    aliases=('kv_cache', 'kv'),
    functions=("kv_cache_attention",),
    outputs=(("out", "kv_cache_attention"), ("k_cache", "kv_cache_attention"), ("v_cache", "kv_cache_attention")),
    library=("scaled_dot_product_attention_forward",),
    draw=_draw_kv, run=_run_kv, reference=_ref_kv, n_edge=len(_KV_EDGES),
    topic="inference",
    exception_hints=(
        (r"zero-size array|identity",
         "the cache may be empty (T = 0, the first step): append the new keys and values before taking "
         "the softmax's max"),
    ),
)
