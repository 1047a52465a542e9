"""The modern blocks' cases (``GroupedQueryAttention``, ``TransformerBlock``): drawing a configuration,
building, inputs, call arguments and input gradients. ``testing/modules.py`` lists them in
:data:`~.modules.MODULES` and hands these kinds to the functions here.

Drawn: B, S, Hkv and the group size G = H / Hkv (so multi-query Hkv = 1 and plain multi-head G = 1
both occur), Dh (even when rotary), rotary on/off and its layout, an additive ``attn_bias`` (H, S, S)
or (B, H, S, S) that is a differentiable input (its gradient is compared), the causal flag, and a
padding-style additive ``attn_mask`` (-inf at some keys of each row, never all); for the block also
the feed-forward (ReLU, GELU, SiLU, SwiGLU), the norm (LayerNorm, RMSNorm), pre-/post-LN and biases.
"""

from __future__ import annotations

import numpy as np

from .. import nn
from ..nn.block import FFNS, NORMS

__all__ = ["BLOCK_KINDS", "draw_block", "build_block", "make_block_inputs", "block_call_args", "block_input_grads"]

BLOCK_KINDS = ("GroupedQueryAttention", "TransformerBlock")


def _pick(c, options, given):
    return c.choice(options) if given is None else given


def draw_block(c, cfg, min_width, min_len, rope=None, ffn=None, norm=None, norm_first=None, bias_kind=None,
               is_causal=None, padding=None, num_kv_heads=None):
    """Fill ``cfg`` for a block kind; the keywords fix choices (the gradcheck report's rows)."""
    hkv = c.integers(1, 2) if num_kv_heads is None else num_kv_heads
    g = c.integers(1, 3)
    rope = _pick(c, (False, True), rope)
    dh = 2 * c.integers(1, 2) if rope else c.integers(max(1, -(-min_width // (hkv * g))), 4)
    cfg.update(B=c.integers(1, 3), S=c.integers(max(min_len, 1), 5), H=hkv * g, Hkv=hkv, Dh=dh, D=hkv * g * dh,
               rope=rope, rope_interleaved=c.boolean(), rope_base=c.choice((10000.0, 100.0)),
               bias=c.boolean(), is_causal=_pick(c, (False, True), is_causal),
               bias_kind=_pick(c, (None, "shared", "per_batch"), bias_kind),
               padding=_pick(c, (False, True), padding))
    if cfg["kind"] == "TransformerBlock":
        cfg.update(F=c.integers(max(min_width, 1), 8), ffn=_pick(c, FFNS, ffn),
                   norm=_pick(c, tuple(NORMS), norm), norm_first=_pick(c, (False, True), norm_first),
                   eps=c.log_uniform(1e-12, 1e-2))
        if cfg["D"] < 3 and cfg["norm"] == "layernorm":        # LayerNorm over D <= 2 is ill-conditioned
            cfg["norm"] = "rmsnorm"


def build_block(cfg):
    dt = np.dtype(cfg["dtype"])
    rope = dict(rope=cfg["rope"], rope_base=cfg["rope_base"], rope_interleaved=cfg["rope_interleaved"])
    if cfg["kind"] == "GroupedQueryAttention":
        return nn.GroupedQueryAttention(cfg["D"], cfg["H"], cfg["Hkv"], bias=cfg["bias"], dropout=cfg["dropout"],
                                        dtype=dt, seed=cfg["seed"], **rope)
    return nn.TransformerBlock(cfg["D"], cfg["H"], cfg["F"], num_kv_heads=cfg["Hkv"], dropout=cfg["dropout"],
                               ffn=cfg["ffn"], norm=cfg["norm"], norm_first=cfg["norm_first"], bias=cfg["bias"],
                               layer_norm_eps=cfg["eps"], dtype=dt, seed=cfg["seed"], **rope)


def make_block_inputs(cfg, rng):
    """``(differentiable inputs, other inputs)``: ``x`` and, when drawn, ``attn_bias``; the constant
    padding mask (additive, -inf at padded keys; key 0 is never padded, so no row is empty)."""
    dt = np.dtype(cfg["dtype"])
    b, s, h = cfg["B"], cfg["S"], cfg["H"]
    x = {"x": rng.standard_normal((b, s, cfg["D"])).astype(dt)}
    if cfg["bias_kind"] is not None:
        shape = (h, s, s) if cfg["bias_kind"] == "shared" else (b, h, s, s)
        x["attn_bias"] = rng.standard_normal(shape).astype(dt)
    mask = None
    if cfg["padding"]:
        pad = rng.random((b, s)) < 0.3
        pad[:, 0] = False
        mask = np.where(pad, -np.inf, 0.0).astype(dt)[:, None, None, :]         # (B, 1, 1, S)
    return x, {"attn_mask": mask}


def block_call_args(cfg, x, other):
    """``attn_bias`` is positional when drawn: a differentiable input (``backward`` returns its gradient)."""
    args = [x["x"]] + ([x["attn_bias"]] if "attn_bias" in x else [])
    return args, dict(is_causal=cfg["is_causal"], attn_mask=other["attn_mask"])


def block_input_grads(g, x):
    if "attn_bias" in x:
        dx, dbias = g
        return {"x": dx, "attn_bias": dbias}
    return {"x": g}
