"""The decoder modules' cases (``TransformerDecoderLayer``, ``TransformerDecoder``, ``Transformer``):
drawing a configuration, building, inputs, call arguments and input gradients. ``testing/modules.py``
lists them in :data:`~.modules.MODULES` and hands these kinds to the functions here.

Each of the mask arguments gets its own drawn mask kind: ``tgt_mask`` (with ``tgt_key_padding_mask``
and ``tgt_is_causal``) from :data:`SELF_MASKS` over (S, S), ``memory_mask`` (with
``memory_key_padding_mask``, ``memory_is_causal``) from :data:`MEMORY_MASKS` over (S, T), and for
``Transformer`` ``src_mask`` (``src_key_padding_mask``, ``src_is_causal``) from :data:`SELF_MASKS`
over (T, T). S is the target length, T >= 2 the memory's (the source's), drawn independently (a memory of
one key, whose softmax is constant, is tested in ``tests/nn/test_decoder.py``).
"""

from __future__ import annotations

import numpy as np

from .. import nn
from ..nn.activations import ACTIVATION_NAMES
from .masks import CROSS_MASKS, SELF_MASKS, make_masks

__all__ = ["DECODER_KINDS", "MEMORY_MASKS", "draw_decoder", "build_decoder", "make_decoder_inputs",
           "decoder_call_args", "decoder_input_grads"]

DECODER_KINDS = ("TransformerDecoderLayer", "TransformerDecoder", "Transformer")
# cross-attention masks, and the causal hint on the rectangular (S, T) memory mask (query i sees keys 0..i)
MEMORY_MASKS = CROSS_MASKS + ("is_causal", "causal_bool", "is_causal+padding")
CUSTOM = (None, "encoder", "decoder")     # Transformer: which part is a custom_encoder / custom_decoder


def _pick(c, options, given):
    return c.choice(options) if given is None else given


def draw_decoder(c, cfg, min_width, min_len, activation=None, norm_first=None, tgt_mask=None, memory_mask=None,
                 src_mask=None, unbatched=None, num_layers=None, final_norm=None, custom="draw",
                 num_encoder_layers=None, sizes=None):
    """Fill ``cfg`` for a decoder kind: sizes (B, S, T, H, Dh, F), options and one mask kind per argument.
    ``sizes`` fixes some sizes (the gradcheck report's rows keep finite differences quick)."""
    h = c.integers(1, 3)
    # float32 runs (min_len >= 2, FLOAT32_SIZES): B >= 2 batched. The deepest stacks with dropout 0.9 on
    # a single (3, 4) sequence keep one entry of a block's output, and the gradients behind it are
    # near-total cancellations whose float32 rounding is the result (ours and torch's alike).
    cfg.update(B=c.integers(2 if min_len >= 2 else 1, 3), S=c.integers(min_len, 5), T=c.integers(max(min_len, 2), 5),
               H=h, Dh=c.integers(-(-max(min_width, 3) // h), 4), bias=c.boolean(), batch_first=c.boolean())
    cfg["unbatched"] = c.choice((False, False, True)) if unbatched is None else unbatched
    if cfg["unbatched"]:
        cfg["B"] = 1
    cfg["F"] = c.integers(min_width, 8)
    cfg.update(sizes or {})
    cfg["D"] = cfg["H"] * cfg["Dh"]
    cfg.update( activation=_pick(c, ACTIVATION_NAMES, activation),
               norm_first=_pick(c, (False, True), norm_first), eps=c.log_uniform(1e-12, 1e-2),
               tgt_mask=_pick(c, SELF_MASKS, tgt_mask), memory_mask=_pick(c, MEMORY_MASKS, memory_mask))
    if "causal" in cfg["memory_mask"] and cfg["S"] == 1:
        cfg["S"] = 2                     # one query seeing key 0 alone: see _masks
    kind = cfg["kind"]
    if kind == "TransformerDecoder":
        cfg.update(num_layers=_pick(c, (2, 3), num_layers), final_norm=_pick(c, (False, True), final_norm))
    elif kind == "Transformer":
        cfg.update(num_encoder_layers=_pick(c, (1, 2), num_encoder_layers),
                   num_decoder_layers=_pick(c, (1, 2), num_layers),
                   src_mask=_pick(c, SELF_MASKS, src_mask), custom=c.choice(CUSTOM) if custom == "draw" else custom,
                   final_norm=_pick(c, (False, True), final_norm))
        if min_len >= 2 and cfg["dropout"] > 0.5 and cfg["norm_first"] and cfg["custom"] == "encoder":
            # float32 with dropout 0.9: a pre-LN encoder without its final norm hands the decoder a memory
            # scaled up by 1/(1-p) = 10, whose cross-attention rows saturate; there our float32 softmax
            # backward (delta = rowsum(dO * O)) is rounding noise where torch's is exactly 0 (the float64
            # runs and the dropout-free float32 runs keep this case)
            cfg["final_norm"] = True


def _dt(cfg):
    return np.dtype(cfg["dtype"])


def _layer_kwargs(cfg):
    return dict(dim_feedforward=cfg["F"], dropout=cfg["dropout"], activation=cfg["activation"],
                layer_norm_eps=cfg["eps"], batch_first=cfg["batch_first"], norm_first=cfg["norm_first"],
                bias=cfg["bias"], dtype=_dt(cfg))


def _norm(cfg, on=True):
    return nn.LayerNorm(cfg["D"], eps=cfg["eps"], bias=cfg["bias"], dtype=_dt(cfg)) if on else None


def build_decoder(cfg):
    """The NumPy module of a decoder configuration."""
    kind, d, h, seed = cfg["kind"], cfg["D"], cfg["H"], cfg["seed"]
    if kind == "TransformerDecoderLayer":
        return nn.TransformerDecoderLayer(d, h, seed=seed, **_layer_kwargs(cfg))
    if kind == "TransformerDecoder":
        layer = nn.TransformerDecoderLayer(d, h, seed=seed, **_layer_kwargs(cfg))
        return nn.TransformerDecoder(layer, cfg["num_layers"], norm=_norm(cfg, cfg["final_norm"]), seed=seed + 1)
    encoder = decoder = None             # a custom part: its final norm drawn (torch's own always has one)
    if cfg["custom"] == "encoder":
        encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, h, seed=seed + 2, **_layer_kwargs(cfg)),
                                        cfg["num_encoder_layers"], norm=_norm(cfg, cfg["final_norm"]),
                                        enable_nested_tensor=False, seed=seed + 3)
    elif cfg["custom"] == "decoder":
        decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(d, h, seed=seed + 2, **_layer_kwargs(cfg)),
                                        cfg["num_decoder_layers"], norm=_norm(cfg, cfg["final_norm"]), seed=seed + 3)
    kw = _layer_kwargs(cfg)
    return nn.Transformer(d, h, num_encoder_layers=cfg["num_encoder_layers"],
                          num_decoder_layers=cfg["num_decoder_layers"], custom_encoder=encoder,
                          custom_decoder=decoder, seed=seed, **kw)


def _seq(cfg, b, s, d, rng):
    shape = (s, d) if cfg["unbatched"] else (b, s, d) if cfg["batch_first"] else (s, b, d)
    return rng.standard_normal(shape).astype(_dt(cfg))


def _keep_key1(mask):
    """``mask`` with key 1 never masked (bool False, float -inf -> 0)."""
    mask = mask.copy()
    col = mask[..., 1]
    mask[..., 1] = False if mask.dtype == np.bool_ else np.where(np.isneginf(col), 0, col)
    return mask


def _masks(cfg, kind, s, t, rng, memory=False):
    am, kpm, causal = make_masks(kind, cfg["B"], cfg["H"], s, t, _dt(cfg), rng)
    if memory and t >= 2:
        # Cross-attention queries seeing one key alone get an output independent of the query, so the
        # query path's gradients (norm2's in pre-LN) are exact zeros computed as rounding noise; keeping
        # key 1 too (outside the causal kinds) keeps every draw informative. T = 1 is tested on its own.
        am = am if am is None or "causal" in kind else _keep_key1(am)
        kpm = None if kpm is None else _keep_key1(kpm)
    if cfg["unbatched"] and kpm is not None:
        kpm = kpm[0]                                                 # (T,); a per-head mask is (H, S, T)
    return am, kpm, causal


def make_decoder_inputs(cfg, rng):
    """``(differentiable inputs, other inputs)``: ``tgt``, ``memory`` (or ``src``, ``tgt``) and the masks
    (the modules' convention: bool True = may NOT attend), keyed by the forward's argument names."""
    b, s, t, d = cfg["B"], cfg["S"], cfg["T"], cfg["D"]
    other = {}
    if cfg["kind"] == "Transformer":
        src_masks = _masks(cfg, cfg["src_mask"], t, t, rng)
        other["src_mask"], other["src_key_padding_mask"], other["src_is_causal"] = src_masks
    other["tgt_mask"], other["tgt_key_padding_mask"], other["tgt_is_causal"] = _masks(cfg, cfg["tgt_mask"], s, s, rng)
    other["memory_mask"], other["memory_key_padding_mask"], other["memory_is_causal"] = _masks(
        cfg, cfg["memory_mask"], s, t, rng, memory=True)
    if cfg["kind"] == "Transformer":
        return {"src": _seq(cfg, b, t, d, rng), "tgt": _seq(cfg, b, s, d, rng)}, other
    return {"tgt": _seq(cfg, b, s, d, rng), "memory": _seq(cfg, b, t, d, rng)}, other


def decoder_call_args(cfg, x, other):
    """``(positional args, keyword args)`` of the forward. The stacks get ``tgt_is_causal`` (and
    ``src_is_causal``) None -- detect a causal mask, as torch -- unless the hint is what is tested."""
    kw = dict(other)
    if cfg["kind"] != "TransformerDecoderLayer":
        for hint in ("tgt_is_causal", "src_is_causal"):
            if hint in kw:
                kw[hint] = True if kw[hint] else None
    return list(x.values()), kw


def decoder_input_grads(grads, x):
    """Our backward's ``(dtgt, dmemory)`` (``(dsrc, dtgt)`` for Transformer) by input name."""
    return dict(zip(x, grads))
