"""Attention masks for the registry's cases, each in the convention of the op or module it feeds:

* :func:`make_masks` -- the modules' and ``multi_head_attention``'s (as ``torch.nn.MultiheadAttention``):
  bool True = may NOT attend, float = added;
* :func:`sdpa_mask` -- ``scaled_dot_product_attention``'s and ``flash_attention``'s (as
  ``torch.nn.functional.scaled_dot_product_attention``): bool True = takes part, float = added.

The torch table hands each to torch unchanged. Key 0 is never masked unless a kind says so, so no
query row loses every key (``torch.nn`` gives NaN there, we give zeros: tests/functional/test_numerics.py covers
that case; torch's function gives zeros too, and ``fully_masked_rows`` tests it).
"""

from __future__ import annotations

import numpy as np

from .. import functional as F

__all__ = ["SELF_MASKS", "CROSS_MASKS", "SDPA_MASKS", "FLASH_MASKS", "make_masks", "sdpa_mask"]

SELF_MASKS = ("none", "is_causal", "causal_bool", "causal_float", "bool", "float", "padding",
              "padding_float", "per_head", "causal_bool+padding", "is_causal+padding", "float+padding",
              "per_head+padding")
CROSS_MASKS = ("none", "bool", "float", "padding", "padding_float", "per_head", "float+padding",
               "per_head+padding")
SDPA_MASKS = ("none", "bool", "bool_full", "float", "float_full", "is_causal", "fully_masked_rows")
# flash_attention_forward also takes a mask together with is_causal (torch's function refuses that)
FLASH_MASKS = SDPA_MASKS + ("causal+bool", "causal+float")


def make_masks(kind, b, h, s, t, dtype, rng):
    """``(attn_mask, key_padding_mask, is_causal)`` for mask ``kind`` (parts joined by ``+``)."""
    attn_mask = key_padding_mask = None
    is_causal = False
    keep0 = np.zeros(t, dtype=bool)
    keep0[0] = True
    for part in kind.split("+"):
        if part == "none":
            pass
        elif part == "is_causal":
            is_causal = True
        elif part == "causal_bool":
            attn_mask = F.causal_mask(s, t)
        elif part == "causal_float":
            attn_mask = np.where(F.causal_mask(s, t), -np.inf, 0.0).astype(dtype)
        elif part == "bool":
            attn_mask = (rng.random((s, t)) < 0.4) & ~keep0
        elif part == "float":
            attn_mask = rng.standard_normal((s, t)).astype(dtype)
            attn_mask[(rng.random((s, t)) < 0.2) & ~keep0] = -np.inf
        elif part == "per_head":
            attn_mask = (rng.random((b * h, s, t)) < 0.4) & ~keep0
        elif part == "padding":
            key_padding_mask = (rng.random((b, t)) < 0.4) & ~keep0
        elif part == "padding_float":
            key_padding_mask = rng.standard_normal((b, t)).astype(dtype)
            key_padding_mask[(rng.random((b, t)) < 0.3) & ~keep0] = -np.inf
        else:
            raise ValueError(f"unknown mask kind {part!r}")
    return attn_mask, key_padding_mask, is_causal


def sdpa_mask(kind, lead, s, t, dtype, rng):
    """``(attn_mask, is_causal)`` for the attention function's mask ``kind`` (:data:`FLASH_MASKS`), in
    torch's function convention: a bool mask is True where the query takes part (may attend)."""
    keep0 = np.zeros(t, bool)
    keep0[0] = True
    mask, is_causal = None, False
    if kind == "bool":                                         # (S, T)
        mask = (rng.random((s, t)) >= 0.4) | keep0
    elif kind == "bool_full":                                  # (..., S, T)
        mask = (rng.random(lead + (s, t)) >= 0.4) | keep0
    elif kind == "float":
        mask = rng.standard_normal((s, t)).astype(dtype)
        mask[(rng.random((s, t)) < 0.2) & ~keep0] = -np.inf
    elif kind == "float_full":
        mask = rng.standard_normal(lead + (s, t)).astype(dtype)
    elif kind == "is_causal":
        is_causal = True
    elif kind == "causal+bool":
        mask = (rng.random((s, t)) >= 0.3) | keep0
        is_causal = True
    elif kind == "causal+float":
        mask = rng.standard_normal((s, t)).astype(dtype)
        is_causal = True
    elif kind == "fully_masked_rows":                          # some rows lose every key: zeros out
        mask = rng.random(lead + (s, t)) >= 0.5
        mask[..., 0, :] = False
    elif kind != "none":
        raise ValueError(f"unknown mask kind {kind!r}")
    return mask, is_causal


def without_causal_hint(attn_mask, is_causal, s, t):
    """``(attn_mask, False)``: the causal hint replaced by the causal mask itself (modules' convention),
    for attention with appended keys (``add_bias_kv``/``add_zero_attn``), which refuses ``is_causal``."""
    if is_causal and attn_mask is None:
        attn_mask = F.causal_mask(s, t)
    return attn_mask, False
