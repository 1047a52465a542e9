"""Attention masks: the causal mask, the two bool conventions and the conversion between them, the
bool -> additive conversion, the ``is_causal`` hint check, and merging the attention mask, the
key-padding mask and causality into one additive mask.

Two conventions meet here, as in torch:

* the **function** ``scaled_dot_product_attention`` (ours and ``torch.nn.functional``'s, and the tiled
  :func:`flash_attention_forward`): a bool mask is True where a query **takes part** in attention
  (may attend that key);
* the **modules** (``MultiheadAttention``, ``TransformerEncoderLayer``, ``TransformerEncoder``) and
  :func:`multi_head_attention_forward` (as ``torch.nn.functional.multi_head_attention_forward``): a bool
  ``attn_mask``/``key_padding_mask`` is True where a query may **not** attend (that key is masked out).

A float mask means the same in both: it is added to the scores. :func:`module_to_sdpa_mask` is the one
place that converts the second into the first.
"""

from __future__ import annotations

import numpy as np

__all__ = ["causal_mask", "additive_mask", "module_to_sdpa_mask", "merge_masks", "is_causal_mask", "check_causal_hint"]


def causal_mask(s, t=None):
    """Boolean (S, T) mask, True above the diagonal: the keys j > i that query i may NOT attend.

    This is the **modules'** convention (pass it as ``attn_mask``/``src_mask``/``mask`` to
    ``MultiheadAttention`` and the encoder, like torch's ``nn.Transformer.generate_square_subsequent_mask``
    in bool form). For :func:`scaled_dot_product_attention_forward` (True = may attend) pass
    ``is_causal=True``, or ``~causal_mask(s, t)``.
    """
    t = s if t is None else t
    return np.triu(np.ones((s, t), dtype=bool), k=1)


def module_to_sdpa_mask(mask):
    """A module-convention mask (bool True = masked out; float = added) in the convention of
    ``scaled_dot_product_attention`` (bool True = takes part; float = added): bool is inverted, float
    is returned as is, None stays None."""
    if mask is None or mask.dtype != np.bool_:
        return mask
    return ~mask


def additive_mask(mask, dtype):
    """A bool mask in the function convention (True = takes part) as 0 / -inf, or a float mask as is,
    in ``dtype``."""
    if mask.dtype == np.bool_:
        out = np.zeros(mask.shape, dtype=dtype)
        out[~mask] = -np.inf
        return out
    return mask.astype(dtype, copy=False)


def is_causal_mask(mask, s, t):
    """Whether a module-convention ``mask`` ((S, T), or (N, S, T) with every slice the same) is the
    causal mask: bool True exactly above the diagonal, or float -inf exactly there and 0 elsewhere."""
    mask = np.asarray(mask)
    if mask.shape[-2:] != (s, t):
        return False
    causal = causal_mask(s, t)
    if mask.dtype == np.bool_:
        return bool(np.all(mask == causal))
    return bool(np.all(np.isneginf(mask[..., causal])) and np.all(mask[..., ~causal] == 0))


def check_causal_hint(mask, is_causal, name, s, t):
    """``is_causal=True`` with a mask is a hint that the mask *is* the causal mask (torch's meaning).
    Torch may then use the hint and ignore the mask in some paths and the mask in others, so a wrong
    hint gives answers that depend on the path; here a wrong hint is refused."""
    if is_causal and mask is not None and not is_causal_mask(mask, s, t):
        raise ValueError(f"is_causal=True is a hint that {name} is the causal mask (True, or -inf, exactly "
                         f"above the diagonal of its ({s}, {t}) slices), but the {name} given is not; pass "
                         f"is_causal=False to apply this {name}, or leave {name} out for the causal mask alone")


def merge_masks(attn_mask, key_padding_mask, is_causal, batch, heads, s, t, dtype):
    """Combine the attention mask, the key-padding mask and causality into one additive mask.

    Parameters
    ----------
    attn_mask : ndarray or None
        (S, T) or (B*H, S, T), bool (True = may NOT attend, the modules' convention) or float (added).
    key_padding_mask : ndarray or None
        (B, T), bool (True = ignore that key) or float (added).
    is_causal : bool
        When True and ``attn_mask`` is None, the causal mask is used; with ``attn_mask`` given it is a
        hint that ``attn_mask`` is the causal mask (checked: see :func:`check_causal_hint`), and the mask
        given is used.

    Returns
    -------
    ndarray or None
        Additive float mask broadcastable to (B, H, S, T), or None when nothing is masked.
    """
    check_causal_hint(attn_mask, is_causal, "attn_mask", s, t)
    out = None
    if attn_mask is None and is_causal:
        attn_mask = causal_mask(s, t)
    if attn_mask is not None:
        am = additive_mask(module_to_sdpa_mask(attn_mask), dtype)
        out = am if am.ndim == 2 else am.reshape(batch, heads, s, t)        # (S, T) or (B, H, S, T)
    if key_padding_mask is not None:
        kp = additive_mask(module_to_sdpa_mask(key_padding_mask), dtype).reshape(batch, 1, 1, t)  # (B, 1, 1, T)
        out = kp if out is None else out + kp
    return out
