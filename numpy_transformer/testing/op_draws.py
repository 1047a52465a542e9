"""The draws of the op cases (:mod:`.ops`): random shapes and options for each op, through a
:mod:`chooser <.choosers>` (``draw(c, dtype, **options) -> Draw``); an option given is fixed, one left
``None`` is drawn. Each function has the name of its op (``op_draws.layer_norm`` draws ``layer_norm``'s
inputs); the masks come in the op's own convention (:mod:`.masks`).
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

from .. import functional as F
from .masks import CROSS_MASKS, FLASH_MASKS, SDPA_MASKS, make_masks, sdpa_mask, without_causal_hint

__all__ = ["Draw", "linear", "embedding", "layer_norm", "rms_norm", "softmax", "cross_entropy", "relu", "gelu",
           "silu", "gated", "dropout", "sdpa", "flash", "sdpa_gqa", "flash_gqa", "mha", "rope",
           "relative_position_bias"]


class Draw(NamedTuple):
    """One drawn case: ``inputs`` (float arrays are differentiated; ``nondiff`` ones are not),
    ``static`` (constants: masks in the op's own convention (see :mod:`.masks`), axis, eps, ...),
    ``fd_exclude`` (elements finite differences must skip, e.g. a frozen padding row)."""
    inputs: dict
    static: dict
    fd_exclude: Optional[dict] = None


def _n(rng, shape, dtype, scale=1.0):
    return (scale * rng.standard_normal(shape)).astype(dtype)


def _lead(c, max_len=2, hi=3):
    return tuple(c.integers(1, hi) for _ in range(c.integers(0, max_len)))


# --------------------------------------------------------------------------------------------------
# the draws
# --------------------------------------------------------------------------------------------------

def linear(c, dtype, bias=None):
    rng = c.rng()
    lead, din, dout = _lead(c), c.integers(1, 4), c.integers(1, 4)
    bias = c.boolean() if bias is None else bias
    inputs = {"x": _n(rng, lead + (din,), dtype), "weight": _n(rng, (dout, din), dtype)}
    if bias:
        inputs["bias"] = _n(rng, (dout,), dtype)
    return Draw(inputs, {})


def embedding(c, dtype, padding_idx="draw", max_norm="draw", scale_grad_by_freq=None):
    rng = c.rng()
    v, d = c.integers(1, 6), c.integers(1, 4)
    ids = rng.integers(0, v, size=(c.integers(1, 3), c.integers(1, 6)))
    ids.flat[-1] = ids.flat[0]                          # a repeated id: its gradient rows must add up
    if padding_idx == "draw":
        padding_idx = c.choice((None, c.integers(0, v - 1)))
    elif padding_idx is not None:
        padding_idx = min(padding_idx, v - 1)
    static = {} if padding_idx is None else {"padding_idx": padding_idx}
    if max_norm == "draw":                              # rows are N(0, 1): norms around sqrt(D), some above
        max_norm = c.choice((None, c.log_uniform(0.3, 3.0)))
    if max_norm is not None:
        static.update(max_norm=max_norm, norm_type=c.choice((2.0, 1.0, 3.0, np.inf)))
    if c.boolean() if scale_grad_by_freq is None else scale_grad_by_freq:
        static["scale_grad_by_freq"] = True
    exclude = None if padding_idx is None else {"weight": padding_idx}     # the frozen row: not a derivative
    return Draw({"ids": ids, "weight": _n(rng, (v, d), dtype)}, static, exclude)


def layer_norm(c, dtype, affine=None, dims=None):
    # n >= 3 normalised elements: for n <= 2 LayerNorm is ill-conditioned (see registry.modules.MIN_LAYER_NORM_D).
    rng = c.rng()
    dims = c.integers(1, 2) if dims is None else dims
    norm_shape = (c.integers(3, 8),) if dims == 1 else tuple(c.integers(2, 4) for _ in range(dims))
    affine = c.choice(("both", "weight", "bias", "none")) if affine is None else affine
    x = (_n(rng, _lead(c) + norm_shape, dtype, 2.0) + dtype(0.5))
    inputs = {"x": x}
    if affine in ("both", "weight"):
        inputs["weight"] = _n(rng, norm_shape, dtype)
    if affine in ("both", "bias"):
        inputs["bias"] = _n(rng, norm_shape, dtype)
    static = {"eps": c.log_uniform(1e-12, 1e-1)}
    if affine == "none" or c.boolean():          # without weight and bias it is the only way to say ns
        static["normalized_shape"] = norm_shape
    return Draw(inputs, static)


def rms_norm(c, dtype, weight=None, dims=None):
    rng = c.rng()
    dims = c.integers(1, 2) if dims is None else dims
    norm_shape = tuple(c.integers(2, 5) for _ in range(dims))
    x = _n(rng, _lead(c) + norm_shape, dtype, 2.0) + dtype(0.5)
    static = {"eps": c.choice((None, c.log_uniform(1e-12, 1e-1)))}
    inputs = {"x": x}
    if c.boolean() if weight is None else weight:
        inputs["weight"] = _n(rng, norm_shape, dtype) + dtype(1.0)
    else:
        static["normalized_shape"] = norm_shape
    return Draw(inputs, static)


def softmax(c, dtype, axis=None, with_neginf=None, axis_len=None):
    rng = c.rng()
    shape = tuple(c.integers(1, 4) for _ in range(c.integers(1 if axis is None else 3, 4)))
    axis = c.integers(-len(shape), len(shape) - 1) if axis is None else axis
    if axis_len is not None:                     # the report's rows: a softmax over one element checks nothing
        shape = shape[:axis % len(shape)] + (axis_len,) + shape[axis % len(shape) + 1:]
    x = _n(rng, shape, dtype, 3.0)
    if c.boolean() if with_neginf is None else with_neginf:
        neg = rng.random(shape) < 0.3            # masked entries, but never a whole slice (torch: NaN)
        first = [slice(None)] * len(shape)
        first[axis] = 0
        neg[tuple(first)] = False
        x[neg] = -np.inf
    return Draw({"x": x}, {"axis": axis})


_CE_LAYOUTS = {"C": 0, "NC": 0, "NCd": 1, "NCdd": 2}          # layout -> number of extra dims d1, d2


def cross_entropy(c, dtype, layout=None, target=None, weight=None, ignore=None, smoothing=None,
                        reduction=None, classes=None):
    """Torch's layouts (C,), (N, C), (N, C, d1), (N, C, d1, d2); index targets (some ignored, with the
    default -100 or a real class id as ignore_index) or probability targets (not normalised: torch does
    not ask them to sum to 1); a per-class weight; smoothing; every reduction. At least one index
    target is kept, so that "mean" is finite."""
    rng = c.rng()
    layout = c.choice(tuple(_CE_LAYOUTS)) if layout is None else layout
    n_cls = c.integers(1, 5) if classes is None else classes
    lo = 1 if classes is None else 2                           # the report's rows: no size-1 axis
    shape = (n_cls,) if layout == "C" else (c.integers(lo, 3), n_cls) + tuple(c.integers(lo, 3) for _ in
                                                                                  range(_CE_LAYOUTS[layout]))
    target = c.choice(("index", "prob")) if target is None else target
    static = {"reduction": c.choice(("mean", "sum", "none")) if reduction is None else reduction,
              "label_smoothing": c.choice((0.0, 0.1, 0.5, 1.0)) if smoothing is None else smoothing}
    if c.boolean() if weight is None else weight:
        static["weight"] = rng.uniform(0.5, 2.0, n_cls).astype(dtype)
    if target == "prob":
        t = rng.random(shape).astype(dtype)
        if c.boolean():
            t = (t / t.sum(axis=0 if layout == "C" else 1, keepdims=True)).astype(dtype)
    else:
        t = rng.integers(0, n_cls, size=() if layout == "C" else shape[:1] + shape[2:])
        ignore = c.choice(("none", "default", "class")) if ignore is None else ignore
        if ignore == "class" and n_cls > 1:
            static["ignore_index"] = c.integers(0, n_cls - 1)
        if ignore != "none":
            ii = static.get("ignore_index", -100)
            t = np.where(rng.random(t.shape) < 0.3, ii, t)
            if (t == ii).all():
                t.flat[0] = (ii + 1) % n_cls if ii >= 0 else 0        # keep one: "mean" stays finite
    return Draw({"input": _n(rng, shape, dtype, 2.0), "target": t}, static)


def _away_from_zero(x, margin=0.1):
    """Keep a ReLU's input clear of its kink (a finite difference across it is meaningless)."""
    return np.sign(x) * (np.abs(x) + margin) + (x == 0) * margin


def _elementwise_shape(c):
    return tuple(c.integers(1, 5) for _ in range(c.integers(1, 3)))


def relu(c, dtype, zeros=None):
    rng = c.rng()
    shape = _elementwise_shape(c)
    x = _away_from_zero(_n(rng, shape, dtype)).astype(dtype)
    if c.boolean() if zeros is None else zeros:
        x[rng.random(shape) < 0.2] = 0           # torch's slope at exactly 0 is 0 (no finite difference there)
    return Draw({"x": x}, {})


def gelu(c, dtype, approximate=None):
    approximate = c.choice(("none", "tanh")) if approximate is None else approximate
    scale = c.choice((1.0, 4.0))
    x = _n(c.rng(), _elementwise_shape(c), dtype, scale)
    # The metric is normwise: give it one O(1) entry. An array made only of far-negative entries would
    # compare torch's cancelling 1 + erf (or 1 + tanh) against ours entry by entry; the tail is tested
    # elementwise against mpmath in tests/functional/test_functional_vs_torch.py.
    x.flat[0] = 1.0
    return Draw({"x": x}, {"approximate": approximate})


def silu(c, dtype, extreme=None):
    x = _n(c.rng(), _elementwise_shape(c), dtype, c.choice((1.0, 4.0)))
    if c.boolean() if extreme is None else extreme:     # the overflow-free sigmoid's far tails
        x.flat[0] = c.choice((-1000.0, -60.0, 60.0, 1000.0))
        x.flat[-1] = 1.0                                # one O(1) entry for the normwise metric
    return Draw({"x": x}, {})


def gated(c, dtype, bias=None, **static):
    """A gated feed-forward's inputs (x, the three weights, optionally the biases); ``static`` (e.g. GELU's
    ``approximate``) passes through to the op."""
    rng = c.rng()
    lead, d, f = _lead(c), c.integers(1, 5), c.integers(1, 6)
    inputs = {"x": _n(rng, lead + (d,), dtype), "w_gate": _n(rng, (f, d), dtype), "w_up": _n(rng, (f, d), dtype),
              "w_down": _n(rng, (d, f), dtype)}
    if c.boolean() if bias is None else bias:
        inputs.update(b_gate=_n(rng, (f,), dtype), b_up=_n(rng, (f,), dtype), b_down=_n(rng, (d,), dtype))
    return Draw(inputs, dict(static))


def dropout(c, dtype, p=None):
    rng = c.rng()
    shape = _elementwise_shape(c)
    p = c.choice((0.0, 0.3, 0.5, 1.0)) if p is None else p
    return Draw({"x": _n(rng, shape, dtype)}, {"p": p, "mask": rng.random(shape) >= p, "training": True})


def sdpa(c, dtype, mask=None, blocks=None, seq=None):
    rng = c.rng()
    lead = c.choice(((), (2,), (2, 3), (1, 2)))
    s, t, dh, dv = c.integers(1, 4), c.integers(1, 5), c.integers(1, 4), c.integers(1, 4)
    if seq is not None:                          # the report's rows: with T = 1 dquery = dkey = 0, nothing checked
        s, t = seq
    kinds = SDPA_MASKS if blocks is None else FLASH_MASKS   # only the tiled path takes a mask with is_causal
    attn_mask, is_causal = sdpa_mask(c.choice(kinds) if mask is None else mask, lead, s, t, dtype, rng)
    static = {"attn_mask": attn_mask, "is_causal": is_causal, "scale": c.choice((None, 0.3))}
    if blocks is not None:                                  # the tiled path: its tile sizes
        static.update(block_q=blocks[0], block_k=blocks[1])
    inputs = {"query": _n(rng, lead + (s, dh), dtype), "key": _n(rng, lead + (t, dh), dtype),
              "value": _n(rng, lead + (t, dv), dtype)}
    return Draw(inputs, static)


def flash(c, dtype, mask=None, blocks=None, seq=None):
    blocks = (c.integers(1, 4), c.integers(1, 4)) if blocks is None else blocks
    return sdpa(c, dtype, mask, blocks, seq)


def sdpa_gqa(c, dtype, mask=None, blocks=None, kv_heads=None, groups=None, seq=None):
    """Grouped-query attention: Hq = Hkv * G query heads; Hkv = 1 (multi-query) and G = 1 (one key/value
    head per query head) among the draws; the value's heads may differ from the key's (torch allows it)
    except on the tiled path."""
    rng = c.rng()
    batch = c.choice(((), (2,), (1,)))
    hkv = c.choice((1, 2)) if kv_heads is None else kv_heads
    g = c.integers(1, 3) if groups is None else groups
    hq = hkv * g
    hv = hkv if blocks is not None or hq == 1 else c.choice((hkv, 1, hq))
    s, t = (c.integers(1, 4), c.integers(1, 5)) if seq is None else seq
    dh, dv = c.integers(1, 4), c.integers(1, 4)
    kinds = SDPA_MASKS if blocks is None else FLASH_MASKS
    attn_mask, is_causal = sdpa_mask(c.choice(kinds) if mask is None else mask, batch + (hq,), s, t, dtype, rng)
    static = {"attn_mask": attn_mask, "is_causal": is_causal, "scale": c.choice((None, 0.3)), "enable_gqa": True}
    if blocks is not None:
        static.update(block_q=blocks[0], block_k=blocks[1])
    inputs = {"query": _n(rng, batch + (hq, s, dh), dtype), "key": _n(rng, batch + (hkv, t, dh), dtype),
              "value": _n(rng, batch + (hv, t, dv), dtype)}
    return Draw(inputs, static)


def flash_gqa(c, dtype, mask=None, blocks=None, kv_heads=None, groups=None, seq=None):
    blocks = (c.integers(1, 4), c.integers(1, 4)) if blocks is None else blocks
    return sdpa_gqa(c, dtype, mask, blocks, kv_heads, groups, seq)


_SELF_MHA_MASKS = ("none", "is_causal", "causal_bool", "float", "padding", "per_head", "causal_bool+padding",
                   "float+padding", "padding_float")


def mha(c, dtype, mode=None, mask=None, bias=None, packed=None, bias_kv=None, zero_attn=None, t=None):
    rng = c.rng()
    b, s, h, dh = c.integers(1, 3), c.integers(1, 4), c.integers(1, 3), c.integers(1, 4)
    d = h * dh
    mode = c.choice(("self", "cross")) if mode is None else mode
    t = (s if mode == "self" else c.integers(1, 4)) if t is None else t     # the report's cross rows: T >= 2
    packed = (c.boolean() if mode == "cross" else True) if packed is None else packed
    kdim = c.integers(1, 5) if not packed else d
    vdim = c.integers(1, 5) if not packed else d
    mask = c.choice(_SELF_MHA_MASKS if mode == "self" else CROSS_MASKS[:3] + ("padding", "per_head",
                                                                               "per_head+padding")) \
        if mask is None else mask
    inputs = {"x": _n(rng, (b, s, d), dtype)} if mode == "self" else {
        "query": _n(rng, (b, s, d), dtype), "key": _n(rng, (b, t, kdim), dtype), "value": _n(rng, (b, t, vdim), dtype)}
    if packed:
        inputs["in_proj_weight"] = _n(rng, (3 * d, d), dtype, 0.5)
    else:
        inputs.update(q_proj_weight=_n(rng, (d, d), dtype, 0.5), k_proj_weight=_n(rng, (d, kdim), dtype, 0.5),
                      v_proj_weight=_n(rng, (d, vdim), dtype, 0.5))
    if c.boolean() if bias is None else bias:
        inputs.update(in_proj_bias=_n(rng, (3 * d,), dtype, 0.5), out_proj_bias=_n(rng, (d,), dtype, 0.5))
    inputs["out_proj_weight"] = _n(rng, (d, d), dtype, 0.5)
    if c.boolean() if bias_kv is None else bias_kv:         # add_bias_kv: one more key and value
        inputs.update(bias_k=_n(rng, (1, 1, d), dtype), bias_v=_n(rng, (1, 1, d), dtype))
    am, kpm, is_causal = make_masks(mask, b, h, s, t, dtype, rng)
    static = {"num_heads": h, "attn_mask": am, "key_padding_mask": kpm, "is_causal": is_causal,
              "need_weights": c.boolean(), "average_attn_weights": c.boolean(),
              "add_zero_attn": c.boolean() if zero_attn is None else zero_attn}
    if "bias_k" in inputs or static["add_zero_attn"]:    # appended keys refuse the hint: the mask itself
        static["attn_mask"], static["is_causal"] = without_causal_hint(am, is_causal, s, t)
    return Draw(inputs, static)


def rope(c, dtype, positions=None, interleaved=None, s=None):
    """x (lead..., S, Dh) with Dh even; positions the default arange(S), a shuffled or offset (S,) array
    (negative ones included: a decode step at offset t, a left-padded row), or per-sequence positions
    (lead[0], 1.., S) broadcast over the other leading axes; a base from 2 to 1e6."""
    rng = c.rng()
    lead, s, dh = _lead(c), c.integers(1, 5) if s is None else s, 2 * c.integers(1, 4)
    positions = c.choice(("default", "offset", "batch")) if positions is None else positions
    static = {"base": c.choice((10000.0, 2.0, c.log_uniform(10.0, 1e6))),
              "interleaved": c.boolean() if interleaved is None else interleaved}
    if positions == "offset":
        static["positions"] = rng.permutation(s) + c.integers(-3, 50)
    elif positions == "batch":
        lead = lead or (2,)
        static["positions"] = rng.integers(-2, 40, size=lead[:1] + (1,) * (len(lead) - 1) + (s,))
    return Draw({"x": _n(rng, lead + (s, dh), dtype)}, static)


def relative_position_bias(c, dtype, bidirectional=None, s=None, t=None):
    """T5's lookup for the buckets of S queries against T keys (small ``max_distance``: pairs share
    buckets, so the scatter-add must add), some bucket rows never used."""
    rng = c.rng()
    bidirectional = c.boolean() if bidirectional is None else bidirectional
    nb = c.integers(4 if bidirectional else 2, 12)
    half = nb // 2 if bidirectional else nb
    s = c.integers(1, 6) if s is None else s
    t = c.integers(1, 7) if t is None else t
    rel = F.relative_positions(s, t, c.choice((None, 0, c.integers(-3, 6))))
    buckets = F.relative_position_bucket(rel, bidirectional, nb, c.integers(half // 2 + 1, 10))
    return Draw({"weight": _n(rng, (nb, c.integers(1, 4)), dtype), "buckets": buckets}, {})
