"""The modules' cases: how to draw a configuration, build the NumPy module, make its inputs, call it
and collect its input gradients. The torch side (``torch.nn``'s module or the hand-written twin, with
the NumPy weights copied in) is built by ``reference_torch.table.torch_module`` from the module itself.

A configuration is a plain dict (``kind``, ``dtype``, ``seed``, ``dropout`` and the kind's sizes and
options), so a failure can be printed and replayed. ``call`` is the same for both sides: the torch
side converts the masks first (``reference_torch.table.torch_call``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict

import numpy as np

from .. import nn
from ..models.gpt_config import POSITIONS
from ..nn.activations import ACTIVATION_NAMES
from ..nn.block import FFNS, GATED_FFNS, NORMS
from .blocks import BLOCK_KINDS, block_call_args, block_input_grads, build_block, draw_block, make_block_inputs
from .decoders import (
    DECODER_KINDS,
    build_decoder,
    decoder_call_args,
    decoder_input_grads,
    draw_decoder,
    make_decoder_inputs,
)
from .masks import CROSS_MASKS, SELF_MASKS, make_masks, without_causal_hint

__all__ = ["ModuleCase", "MODULES", "KINDS", "TWIN_KINDS", "MIN_LAYER_NORM_D", "FLOAT32_SIZES", "draw_config",
           "build", "make_inputs", "call", "call_args", "input_grads"]

# LayerNorm over D <= 2 features is ill-conditioned: for D = 1 the output is x - mean(x) = 0 computed
# as a difference (torch returns rounding noise times 1/sqrt(eps)), for D = 2 the normalised output is
# +-1 whatever x is, so d out / d x is an O(eps) difference of O(1/|x1 - x2|) terms. Neither tells a
# correct implementation from a wrong one, so modules with a LayerNorm use D >= 3.
MIN_LAYER_NORM_D = 3

# Float32 runs: in the tiniest configurations a gradient entry is often a near-total cancellation
# (a dot product of O(1) terms summing to 1e-4), whose float32 rounding alone exceeds the 1e-4
# relative tolerance on both sides, bug or no bug.
FLOAT32_SIZES = dict(min_width=4, min_len=2)


@dataclass(frozen=True)
class ModuleCase:
    """A module kind (its class name, also its key in ``reference_torch.table.MODULES``)."""
    name: str
    draw: Callable                 # (chooser, cfg, min_width, min_len, **options) -> fills cfg
    build: Callable                # (cfg) -> the NumPy module
    examples: tuple = (("", {}),)  # gradcheck report rows: (label suffix, options)
    twin: bool = False             # reference_torch has a hand-written twin (compared with dropout on)

    def label(self, suffix):
        return f"{self.name} ({suffix})" if suffix else self.name


def _lead_shape(c):
    return tuple(c.integers(1, 3) for _ in range(c.integers(0, 2)))


def _pick(c, options, given):
    return c.choice(options) if given is None else given


def _draw_linear(c, cfg, min_width, min_len):
    cfg.update(lead=_lead_shape(c), in_features=c.integers(min_width, 6), out_features=c.integers(1, 6),
               bias=c.boolean())


def _draw_embedding(c, cfg, min_width, min_len, padding_idx="draw", max_norm="draw", scale_grad_by_freq=None):
    v = c.integers(1, 8)
    pad = c.choice((None, c.integers(-v, v - 1))) if padding_idx == "draw" else padding_idx
    if max_norm == "draw":                     # rows are N(0, 1) (+ the checker's noise): some norms above it
        max_norm = c.choice((None, c.log_uniform(0.3, 3.0)))
    cfg.update(V=v, D=c.integers(1, 6), ids_shape=(c.integers(1, 3), c.integers(1, 6)), padding_idx=pad,
               max_norm=max_norm, norm_type=2.0 if max_norm is None else c.choice((2.0, 1.0, 3.0, np.inf)),
               scale_grad_by_freq=c.boolean() if scale_grad_by_freq is None else scale_grad_by_freq)


def _draw_layer_norm(c, cfg, min_width, min_len, dims=None):
    affine = c.boolean()
    dims = c.integers(1, 2) if dims is None else dims
    if dims == 1:                                        # normalized_shape given as D or as (D,)
        d = c.integers(max(min_width, MIN_LAYER_NORM_D), 8)
        shape = c.choice((d, (d,)))
    else:                                                # e.g. (S, D): n = S * D >= 4 elements
        shape = tuple(c.integers(max(min_width, 2), 4) for _ in range(dims))
    cfg.update(lead=_lead_shape(c), shape=shape, eps=c.log_uniform(1e-12, 1e-1),
               elementwise_affine=affine, bias=c.boolean() if affine else True)


def _draw_rms_norm(c, cfg, min_width, min_len):
    cfg.update(lead=_lead_shape(c), shape=tuple(c.integers(max(min_width, 2), 6) for _ in range(c.integers(1, 2))),
               eps=c.choice((None, c.log_uniform(1e-12, 1e-1))), elementwise_affine=c.boolean())


def _attention(c, cfg, cross_allowed=True, min_width=1, min_len=1, mode=None, mask=None, kdim="draw",
               unbatched=None):
    h = c.integers(1, 3)
    cfg.update(B=c.integers(1, 3), S=c.integers(min_len, 5), H=h, Dh=c.integers(-(-min_width // h), 4),
               bias=c.boolean(), batch_first=c.boolean())
    cfg["unbatched"] = c.choice((False, False, True)) if unbatched is None else unbatched  # (S, D) inputs
    if cfg["unbatched"]:
        cfg["B"] = 1
    cfg["D"] = cfg["H"] * cfg["Dh"]
    cfg["mode"] = _pick(c, ("self", "cross", "cross_kv_same") if cross_allowed else ("self",), mode)
    if cfg["mode"] == "self":
        cfg.update(T=cfg["S"], kdim=None, vdim=None, mask=_pick(c, SELF_MASKS, mask))
    else:
        cfg["T"] = c.integers(min_len, 5)
        if cfg["mode"] == "cross":                       # kdim given: None, or a (kdim, vdim) pair
            cfg["kdim"] = c.choice((None, c.integers(1, 6))) if kdim == "draw" else (kdim and kdim[0])
            cfg["vdim"] = c.choice((None, c.integers(1, 6))) if kdim == "draw" else (kdim and kdim[1])
        else:
            cfg["kdim"] = cfg["vdim"] = c.choice((None, c.integers(1, 6))) if kdim == "draw" else kdim
        cfg["mask"] = _pick(c, CROSS_MASKS, mask)


def _draw_mha(c, cfg, min_width, min_len, add_bias_kv=None, add_zero_attn=None, **options):
    _attention(c, cfg, min_width=min_width, min_len=min_len, **options)
    cfg.update(need_weights=c.boolean(), average_attn_weights=c.boolean(),
               add_bias_kv=_pick(c, (False, True), add_bias_kv), add_zero_attn=_pick(c, (False, True), add_zero_attn))


def _draw_layer(c, cfg, min_width, min_len, activation=None, norm_first=None, mask=None, unbatched=None):
    _attention(c, cfg, cross_allowed=False, min_width=max(min_width, MIN_LAYER_NORM_D), min_len=min_len, mask=mask,
               unbatched=unbatched)
    cfg.update(F=c.integers(min_width, 8), activation=_pick(c, ACTIVATION_NAMES, activation),
               norm_first=_pick(c, (False, True), norm_first), eps=c.log_uniform(1e-12, 1e-2))


def _draw_encoder(c, cfg, min_width, min_len, final_norm=None, num_layers=None, **options):
    _draw_layer(c, cfg, min_width, min_len, **options)
    cfg.update(num_layers=_pick(c, (2, 3), num_layers), final_norm=_pick(c, (False, True), final_norm))


def _draw_token_embedding(c, cfg, min_width, min_len):
    cfg.update(V=c.integers(2, 8), D=c.integers(1, 6), ids_shape=(c.integers(1, 3), c.integers(1, 6)))


def _draw_positional(c, cfg, min_width, min_len):
    cfg.update(B=c.integers(1, 3), S=c.integers(1, 6), D=c.integers(1, 6), max_len=c.integers(6, 12))


def _draw_silu(c, cfg, min_width, min_len):
    cfg.update(lead=_lead_shape(c) + (c.integers(min_width, 6),))


def _draw_gated(c, cfg, min_width, min_len, bias=None):
    cfg.update(lead=_lead_shape(c), D=c.integers(min_width, 6), F=c.integers(min_width, 8),
               bias=_pick(c, (False, True), bias))


def _draw_gpt(c, cfg, min_width, min_len, positions=None, tie_word_embeddings=None, ffn=None, norm=None,
              num_kv_heads="draw", s=None):
    h = c.integers(1, 4)
    b, s = c.integers(1, 3), c.integers(max(min_len, 1), 6) if s is None else s
    positions = _pick(c, POSITIONS, positions)
    dh = c.integers(-(-max(min_width, MIN_LAYER_NORM_D) // h), 4)
    dh += dh % 2 if positions == "rope" else 0                  # rotary pairs need an even head width
    kv = c.choice([k for k in range(1, h + 1) if h % k == 0]) if num_kv_heads == "draw" else num_kv_heads
    buckets = c.integers(2, 8)                                  # causal: max_distance above the exact buckets
    cfg.update(V=c.integers(2, 9), H=h, D=h * dh, F=c.integers(min_width, 8), n_layer=c.integers(1, 2),
               ids_shape=(b, s), block_size=s + c.integers(0, 2), bias=c.boolean(), eps=c.log_uniform(1e-12, 1e-2),
               ffn=_pick(c, FFNS, ffn), positions=positions,
               norm=_pick(c, tuple(NORMS), norm), num_kv_heads=kv,
               buckets=buckets, max_distance=c.integers(buckets // 2 + 1, 10),
               tie_word_embeddings=_pick(c, (True, False), tie_word_embeddings))


def _draw_relative_position_bias(c, cfg, min_width, min_len, bidirectional=None):
    bidirectional = _pick(c, (True, False), bidirectional)
    nb = c.integers(4 if bidirectional else 2, 12)
    half = nb // 2 if bidirectional else nb
    s = c.integers(min_len, 6)
    cfg.update(H=c.integers(1, 4), num_buckets=nb, max_distance=c.integers(half // 2 + 1, 10),
               bidirectional=bidirectional, S=s, T=c.choice((s, c.integers(min_len, 7))),
               offset=c.choice((None, 0, c.integers(-2, 5))))


def _build_gpt(cfg):
    from ..models.gpt import GPT, GPTConfig
    return GPT(GPTConfig(cfg["V"], block_size=cfg["block_size"], n_layer=cfg["n_layer"], n_head=cfg["H"],
                         n_embd=cfg["D"], n_inner=cfg["F"], dropout=cfg["dropout"], bias=cfg["bias"],
                         ffn=cfg["ffn"], layer_norm_eps=cfg["eps"], positions=cfg["positions"], norm=cfg["norm"],
                         num_kv_heads=cfg["num_kv_heads"], relative_attention_num_buckets=cfg["buckets"],
                         relative_attention_max_distance=cfg["max_distance"],
                         tie_word_embeddings=cfg["tie_word_embeddings"], dtype=cfg["dtype"]), seed=cfg["seed"])


def _dt(cfg):
    return np.dtype(cfg["dtype"])


def _build_layer(cfg):
    return nn.TransformerEncoderLayer(cfg["D"], cfg["H"], dim_feedforward=cfg["F"], dropout=cfg["dropout"],
                                      activation=cfg["activation"], layer_norm_eps=cfg["eps"],
                                      batch_first=cfg["batch_first"], norm_first=cfg["norm_first"],
                                      bias=cfg["bias"], dtype=_dt(cfg), seed=cfg["seed"])


def _build_encoder(cfg):
    norm = nn.LayerNorm(cfg["D"], eps=cfg["eps"], bias=cfg["bias"], dtype=_dt(cfg)) if cfg["final_norm"] else None
    return nn.TransformerEncoder(_build_layer(cfg), cfg["num_layers"], norm=norm, enable_nested_tensor=False,
                                 seed=cfg["seed"] + 1)


# the decoder kinds' gradcheck rows: small enough for quick finite differences, S != T, two heads
_SMALL = dict(B=2, S=3, T=2, H=2, Dh=2, F=3)


def _draw_rotary(c, cfg, min_width, min_len, interleaved=None, positions=None):
    """x (lead..., S, D) heads, D even; positions default (arange(S)) or an offset (S,) array."""
    cfg.update(lead=_lead_shape(c), S=c.integers(max(min_len, 1), 4),
               D=2 * c.integers(max(1, (min_width + 1) // 2), 3), base=c.choice((10000.0, 100.0)),
               interleaved=_pick(c, (False, True), interleaved),
               positions=c.boolean() if positions is None else positions, offset=c.integers(0, 30))


MODULES = {case.name: case for case in [
    ModuleCase("Linear", _draw_linear, lambda cfg: nn.Linear(cfg["in_features"], cfg["out_features"], bias=cfg["bias"],
                                                            dtype=_dt(cfg), seed=cfg["seed"])),
    ModuleCase("Embedding", _draw_embedding,
               lambda cfg: nn.Embedding(cfg["V"], cfg["D"], padding_idx=cfg["padding_idx"], max_norm=cfg["max_norm"],
                                        norm_type=cfg["norm_type"], scale_grad_by_freq=cfg["scale_grad_by_freq"],
                                        dtype=_dt(cfg), seed=cfg["seed"]),
               # finite differences: max_norm and scale_grad_by_freq off (their gradients are, by design,
               # not the derivative of the forward; the torch comparisons cover them)
               examples=(("", {"padding_idx": None, "max_norm": None, "scale_grad_by_freq": False}),
                         ("padding_idx=1, FD skips the frozen row",
                          {"padding_idx": 1, "max_norm": None, "scale_grad_by_freq": False}))),
    ModuleCase("LayerNorm", _draw_layer_norm,
               lambda cfg: nn.LayerNorm(cfg["shape"], eps=cfg["eps"], elementwise_affine=cfg["elementwise_affine"],
                                        bias=cfg["bias"], dtype=_dt(cfg)),
               examples=(("", {"dims": 1}), ("2 dims", {"dims": 2}))),
    ModuleCase("RMSNorm", _draw_rms_norm,
               lambda cfg: nn.RMSNorm(cfg["shape"], eps=cfg["eps"], elementwise_affine=cfg["elementwise_affine"],
                                      dtype=_dt(cfg))),
    ModuleCase("MultiheadAttention", _draw_mha,
               lambda cfg: nn.MultiheadAttention(cfg["D"], cfg["H"], dropout=cfg["dropout"], bias=cfg["bias"],
                                                 add_bias_kv=cfg["add_bias_kv"], add_zero_attn=cfg["add_zero_attn"],
                                                 kdim=cfg["kdim"], vdim=cfg["vdim"], batch_first=cfg["batch_first"],
                                                 dtype=_dt(cfg), seed=cfg["seed"]),
               examples=(("self, causal", {"mode": "self", "mask": "causal_bool+padding", "unbatched": False,
                                           "add_bias_kv": False, "add_zero_attn": False}),
                         ("cross, bool masks", {"mode": "cross", "mask": "per_head+padding", "kdim": None,
                                                "unbatched": False, "add_bias_kv": False, "add_zero_attn": False}),
                         ("kdim=3, vdim=5", {"mode": "cross", "mask": "float", "kdim": (3, 5), "unbatched": False,
                                             "add_bias_kv": False, "add_zero_attn": False}),
                         ("add_bias_kv, add_zero_attn, unbatched", {"mode": "self", "mask": "per_head+padding",
                                                                    "unbatched": True, "add_bias_kv": True,
                                                                    "add_zero_attn": True})),
               twin=True),
    ModuleCase("TransformerEncoderLayer", _draw_layer, _build_layer,
               # min_len, min_width: one token (dq = dk = 0) or one ReLU unit (dead for every token) checks nothing
               examples=tuple((f"{act}, {'pre' if nf else 'post'}-LN", {"activation": act, "norm_first": nf,
                                                                         "mask": mask, "min_len": 2, "min_width": 2})
                              for act, nf, mask in (("relu", False, "padding"), ("gelu", False, "none"),
                                                    ("relu", True, "is_causal"), ("gelu", True, "padding"))),
               twin=True),
    ModuleCase("TransformerEncoder", _draw_encoder, _build_encoder,
               examples=(("2 layers, final norm, causal",
                          {"mask": "causal_bool", "final_norm": True, "num_layers": 2}),), twin=True),
    # the decoder kinds: testing/decoders.py
    ModuleCase("TransformerDecoderLayer", draw_decoder, build_decoder,
               examples=(("pre-LN, gelu, causal tgt, per-head memory mask",
                          {"norm_first": True, "activation": "gelu", "tgt_mask": "causal_bool+padding",
                           "memory_mask": "per_head+padding", "unbatched": False, "sizes": _SMALL}),),
               twin=True),
    ModuleCase("TransformerDecoder", draw_decoder, build_decoder,
               examples=(("2 layers, final norm, causal", {"tgt_mask": "is_causal", "memory_mask": "float",
                                                           "num_layers": 2, "final_norm": True,
                                                           "unbatched": False, "sizes": _SMALL}),), twin=True),
    ModuleCase("Transformer", draw_decoder, build_decoder,
               examples=(("1+1 layers, causal tgt, padded src", {"src_mask": "padding", "tgt_mask": "causal_float",
                                                                 "memory_mask": "padding", "num_layers": 1,
                                                                 "num_encoder_layers": 1, "custom": None,
                                                                 "unbatched": False, "sizes": _SMALL}),),
               twin=True),
    # the modern blocks (GQA, rotary, additive bias, SwiGLU, RMSNorm): testing/blocks.py
    ModuleCase("GroupedQueryAttention", draw_block, build_block,
               examples=(("H=4, Hkv=2, rotary, causal, shared bias",
                          {"num_kv_heads": 2, "rope": True, "is_causal": True, "bias_kind": "shared",
                           "padding": False}),
                         ("multi-query, padding, per-batch bias", {"num_kv_heads": 1, "rope": False,
                                                                   "is_causal": False, "bias_kind": "per_batch",
                                                                   "padding": True})),
               twin=True),
    ModuleCase("TransformerBlock", draw_block, build_block,
               examples=(("Llama-style: RMSNorm, rotary, SwiGLU, GQA, causal",
                          {"num_kv_heads": 1, "rope": True, "ffn": "swiglu", "norm": "rmsnorm", "norm_first": True,
                           "is_causal": True, "bias_kind": None, "padding": False, "min_len": 2}),
                         ("post-LN, silu, relative-style bias", {"ffn": "silu", "norm": "layernorm",
                                                                 "norm_first": False, "is_causal": False,
                                                                 "bias_kind": "shared", "padding": True,
                                                                 "min_len": 2})),   # S = 1: dq = dk = 0
               twin=True),
    ModuleCase("TokenEmbedding", _draw_token_embedding,
               lambda cfg: nn.TokenEmbedding(cfg["V"], cfg["D"], dtype=_dt(cfg), seed=cfg["seed"])),
    ModuleCase("PositionalEncoding", _draw_positional,
               lambda cfg: nn.PositionalEncoding(cfg["D"], max_len=cfg["max_len"], dtype=_dt(cfg))),
    ModuleCase("RotaryEmbedding", _draw_rotary,
               lambda cfg: nn.RotaryEmbedding(cfg["D"], base=cfg["base"], interleaved=cfg["interleaved"]),
               examples=(("rotate half", {"interleaved": False}),
                         ("interleaved, positions", {"interleaved": True, "positions": True}))),
    ModuleCase("LearnedPositionalEmbedding", _draw_positional,
               lambda cfg: nn.LearnedPositionalEmbedding(cfg["max_len"], cfg["D"], dtype=_dt(cfg), seed=cfg["seed"])),
    ModuleCase("SiLU", _draw_silu, lambda cfg: nn.SiLU()),
    # the gated feed-forwards (nt.SwiGLU ...): a case for every class of the ffn vocabulary (nn.block.GATED_FFNS)
    *[ModuleCase(cls.__name__, _draw_gated,
                 lambda cfg, cls=cls: cls(cfg["D"], cfg["F"], bias=cfg["bias"], dtype=_dt(cfg), seed=cfg["seed"]),
                 examples=(("no bias", {"bias": False}), ("bias", {"bias": True}))) for cls in GATED_FFNS.values()],
    # ids in, logits out: every parameter's gradient (the tied wte/lm_head weight: the sum of both uses)
    ModuleCase("GPT", _draw_gpt, _build_gpt,
               examples=(("learned, tied", {"positions": "learned", "tie_word_embeddings": True, "ffn": "gelu",
                                            "norm": "layernorm", "num_kv_heads": None}),
                         ("sinusoidal, untied, relu", {"positions": "sinusoidal", "tie_word_embeddings": False,
                                                       "ffn": "relu", "norm": "layernorm", "num_kv_heads": None}),
                         ("Llama-style: rope, RMSNorm, SwiGLU, MQA", {"positions": "rope", "norm": "rmsnorm",
                                                                      "ffn": "swiglu", "num_kv_heads": 1,
                                                                      "tie_word_embeddings": False, "s": 4}),
                         ("relative bias, tied", {"positions": "relative", "norm": "layernorm", "ffn": "gelu",
                                                  "num_kv_heads": None, "tie_word_embeddings": True, "s": 5})),
               twin=True),
    # (s, t) in, (H, S, T) out: the gradient of relative_attention_bias.weight (buckets shared by many pairs)
    ModuleCase("RelativePositionBias", _draw_relative_position_bias,
               lambda cfg: nn.RelativePositionBias(cfg["H"], cfg["num_buckets"], cfg["max_distance"],
                                                   cfg["bidirectional"], dtype=_dt(cfg), seed=cfg["seed"]),
               examples=(("bidirectional", {"bidirectional": True}), ("causal", {"bidirectional": False}))),
]}

KINDS = tuple(MODULES)
GATED_KINDS = tuple(cls.__name__ for cls in GATED_FFNS.values())
TWIN_KINDS = tuple(k for k, m in MODULES.items() if m.twin)


def draw_config(kind, c, dtype="float64", dropout=0.0, min_width=1, min_len=1, **options):
    """A random configuration (a plain dict) for module ``kind``, drawn with chooser ``c``; ``options``
    fix some of the kind's choices (what the gradcheck report's rows do)."""
    if kind not in MODULES:
        raise ValueError(f"unknown module kind {kind!r}")
    cfg: Dict[str, Any] = {"kind": kind, "dtype": dtype, "seed": c.integers(0, 2**31 - 1), "dropout": dropout}
    MODULES[kind].draw(c, cfg, min_width, min_len, **options)
    return cfg


def build(cfg):
    """The NumPy module of a configuration."""
    return MODULES[cfg["kind"]].build(cfg)


def _seq(cfg, b, s, d, rng):
    """A (B, S, d) array, or (S, B, d) when not batch_first, or (S, d) when unbatched."""
    shape = (s, d) if cfg.get("unbatched") else (b, s, d) if cfg.get("batch_first", True) else (s, b, d)
    return rng.standard_normal(shape).astype(_dt(cfg))


def make_inputs(cfg, rng):
    """``(differentiable inputs, other inputs)``: dicts of NumPy arrays (masks in the modules' convention,
    torch's: bool True = may NOT attend)."""
    dt = _dt(cfg)
    k = cfg["kind"]
    if k == "Linear":
        return {"input": rng.standard_normal(cfg["lead"] + (cfg["in_features"],)).astype(dt)}, {}
    if k in ("Embedding", "TokenEmbedding", "GPT"):
        ids = rng.integers(0, cfg["V"], size=cfg["ids_shape"])
        ids.flat[-1] = ids.flat[0]                                   # at least one repeated id
        return {}, {"ids": ids}
    if k in ("LayerNorm", "RMSNorm"):
        shape = cfg["lead"] + (cfg["shape"] if isinstance(cfg["shape"], tuple) else (cfg["shape"],))
        return {"input": (rng.standard_normal(shape) * 2 + 0.5).astype(dt)}, {}
    if k in ("PositionalEncoding", "LearnedPositionalEmbedding"):
        return {"x": rng.standard_normal((cfg["B"], cfg["S"], cfg["D"])).astype(dt)}, {}
    if k == "RotaryEmbedding":
        s = cfg["S"]
        pos = cfg["offset"] + rng.permutation(s) if cfg["positions"] else None
        return {"x": rng.standard_normal(cfg["lead"] + (s, cfg["D"])).astype(dt)}, {"positions": pos}
    if k == "RelativePositionBias":
        return {}, {"s": cfg["S"], "t": cfg["T"], "offset": cfg["offset"]}
    if k == "SiLU":
        return {"input": (rng.standard_normal(cfg["lead"]) * 3).astype(dt)}, {}
    if k in GATED_KINDS:
        return {"x": rng.standard_normal(cfg["lead"] + (cfg["D"],)).astype(dt)}, {}
    if k in DECODER_KINDS:
        return make_decoder_inputs(cfg, rng)
    if k in BLOCK_KINDS:
        return make_block_inputs(cfg, rng)
    b, s, t, d = cfg["B"], cfg["S"], cfg["T"], cfg["D"]
    am, kpm, causal = make_masks(cfg["mask"], b, cfg["H"], s, t, dt, rng)
    if cfg.get("add_bias_kv") or cfg.get("add_zero_attn"):        # appended keys refuse the hint
        am, causal = without_causal_hint(am, causal, s, t)
    if cfg.get("unbatched") and kpm is not None:
        kpm = kpm[0]                                                 # (T,); a per-head mask is (H, S, T)
    other = {"attn_mask": am, "key_padding_mask": kpm, "is_causal": causal}
    if k != "MultiheadAttention" or cfg["mode"] == "self":
        return {"src" if k != "MultiheadAttention" else "x": _seq(cfg, b, s, d, rng)}, other
    kdim = d if cfg["kdim"] is None else cfg["kdim"]
    vdim = d if cfg["vdim"] is None else cfg["vdim"]
    if cfg["mode"] == "cross_kv_same":
        return {"query": _seq(cfg, b, s, d, rng), "key_value": _seq(cfg, b, t, kdim, rng)}, other
    return {"query": _seq(cfg, b, s, d, rng), "key": _seq(cfg, b, t, kdim, rng),
            "value": _seq(cfg, b, t, vdim, rng)}, other


def _qkv(x):
    if "x" in x:
        return x["x"], x["x"], x["x"]
    if "key_value" in x:
        return x["query"], x["key_value"], x["key_value"]
    return x["query"], x["key"], x["value"]


def call_args(cfg, x, other):
    """``(positional args, keyword args)`` of the module's ``forward`` for the drawn inputs."""
    k = cfg["kind"]
    if k in ("Linear", "LayerNorm", "RMSNorm", "SiLU"):
        return [x["input"]], {}
    if k in ("Embedding", "TokenEmbedding", "GPT"):
        return [other["ids"]], {}
    if k in ("PositionalEncoding", "LearnedPositionalEmbedding", *GATED_KINDS):
        return [x["x"]], {}
    if k == "RotaryEmbedding":
        return [x["x"]], {"positions": other["positions"]}
    if k == "RelativePositionBias":
        return [other["s"]], {"t": other["t"], "offset": other["offset"]}
    if k in DECODER_KINDS:
        return decoder_call_args(cfg, x, other)
    if k in BLOCK_KINDS:
        return block_call_args(cfg, x, other)
    am, kpm, causal = other["attn_mask"], other["key_padding_mask"], other["is_causal"]
    if k == "MultiheadAttention":
        return list(_qkv(x)), dict(key_padding_mask=kpm, need_weights=cfg["need_weights"], attn_mask=am,
                                   average_attn_weights=cfg["average_attn_weights"], is_causal=causal)
    if k == "TransformerEncoderLayer":
        return [x["src"]], dict(src_mask=am, src_key_padding_mask=kpm, is_causal=causal)
    # TransformerEncoder: is_causal=None (auto-detect) unless the is_causal hint is what is tested
    return [x["src"]], dict(mask=am, src_key_padding_mask=kpm, is_causal=True if causal else None)


def call(module, cfg, x, other):
    """Run ``module`` (ours, or a torch module given tensors) on the inputs; ``(output, {extras})``."""
    args, kwargs = call_args(cfg, x, other)
    out = module(*args, **kwargs)
    if cfg["kind"] == "MultiheadAttention":
        out, w = out
        return out, ({"weights": w} if cfg["need_weights"] else {})
    return out, {}


def input_grads(module, cfg, dout, x):
    """Our backward; returns ``{input name: gradient}`` (parameters' gradients land in ``p.grad``)."""
    g = module.backward(dout)
    if cfg["kind"] in ("Embedding", "TokenEmbedding", "GPT", "RelativePositionBias"):
        return {}
    if cfg["kind"] in DECODER_KINDS:
        return decoder_input_grads(g, x)
    if cfg["kind"] in BLOCK_KINDS:
        return block_input_grads(g, x)
    if cfg["kind"] != "MultiheadAttention":
        return {next(iter(x)): g}
    dq, dk, dv = g
    if "x" in x:
        return {"x": dq + dk + dv}                 # self-attention: one input used three times
    if "key_value" in x:
        return {"query": dq, "key_value": dk + dv}
    return {"query": dq, "key": dk, "value": dv}
