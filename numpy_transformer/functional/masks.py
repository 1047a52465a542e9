"""Attention masks: the causal mask, bool -> additive conversion, and merging the attention mask,
the key-padding mask and causality into one additive mask."""

from __future__ import annotations

import numpy as np


def causal_mask(s, t=None):
    """Boolean (S, T) mask, True above the diagonal: position i may not attend to j > i."""
    t = s if t is None else t
    return np.triu(np.ones((s, t), dtype=bool), k=1)


def _additive(mask, dtype):
    """A bool mask (True = may not attend) as 0/-inf, or a float mask as is, in ``dtype``."""
    if mask.dtype == np.bool_:
        out = np.zeros(mask.shape, dtype=dtype)
        out[mask] = -np.inf
        return out
    return mask.astype(dtype, copy=False)


def merge_masks(attn_mask, key_padding_mask, is_causal, batch, heads, s, t, dtype):
    """Combine the attention mask, the key-padding mask and causality into one additive mask.

    Parameters
    ----------
    attn_mask : ndarray or None
        (S, T) or (B*H, S, T), bool (True = may not attend) or float (added to the scores).
    key_padding_mask : ndarray or None
        (B, T), bool (True = ignore that key) or float (added).
    is_causal : bool
        When True and ``attn_mask`` is None, a causal mask is used (with a mask given, ``is_causal``
        is only a hint, as in torch, and the mask given is used).

    Returns
    -------
    ndarray or None
        Additive float mask broadcastable to (B, H, S, T), or None when nothing is masked.
    """
    out = None
    if attn_mask is None and is_causal:
        attn_mask = causal_mask(s, t)
    if attn_mask is not None:
        am = _additive(attn_mask, dtype)
        out = am if am.ndim == 2 else am.reshape(batch, heads, s, t)        # (S, T) or (B, H, S, T)
    if key_padding_mask is not None:
        kp = _additive(key_padding_mask, dtype).reshape(batch, 1, 1, t)     # (B, 1, 1, T)
        out = kp if out is None else out + kp
    return out
