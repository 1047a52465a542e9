"""What the position schemes and the padding add to the attention scores, written once for the whole
models (the encoder's bias layers and GPT's blocks): :func:`position_scores` and :func:`with_padding`.

A scheme that lives on the scores adds an (H, S, T) term to every block's ``q k^T / sqrt(Dh)``: T5's
learned relative bias (its gradient goes back to the one shared table) or ALiBi's fixed slopes. Padded
keys get ``-inf`` for every query, (B, 1, 1, T), added to the fixed term.
"""

from __future__ import annotations

import numpy as np

from .. import functional as F

__all__ = ["BIAS_POSITIONS", "position_scores", "with_padding", "alibi_encoder_bias"]

#: the position schemes that live on the attention scores (:func:`position_scores` adds them), the one
#: definition the encoder, GPT and their PyTorch twins read
BIAS_POSITIONS = ("relative", "alibi")


def alibi_encoder_bias(num_heads, s, is_causal, dtype):
    """ALiBi for an encoder: ``-slope_h * |i - j|`` (H, S, S), symmetric, since a bidirectional query
    sees keys on both sides; with ``is_causal`` the causal form :func:`~numpy_transformer.functional.alibi_bias`
    (the keys above the diagonal are masked anyway)."""
    if is_causal:
        return F.alibi_bias(num_heads, s, s, dtype=dtype)
    dist = np.abs(np.arange(s)[:, None] - np.arange(s)[None, :])                 # (S, S)
    return (-F.alibi_slopes(num_heads)[:, None, None] * dist).astype(dtype)      # (H, S, S)


def position_scores(positions, num_heads, s, past=0, is_causal=True, relative=None, dtype=np.float32):
    """``(bias, constant)`` that the scheme ``positions`` adds to the scores of S new queries over the
    ``past + S`` keys: the learned relative bias (H, S, past+S) of the module ``relative`` (a
    :class:`~numpy_transformer.nn.RelativePositionBias`; its gradient flows back to the table), or
    ALiBi's fixed one (H, S, past+S) (bidirectional, symmetric, when not ``is_causal``); None where the
    scheme adds nothing."""
    if positions == "relative":
        return relative(s, past + s, offset=past), None
    if positions == "alibi" and not is_causal:
        return None, alibi_encoder_bias(num_heads, s, False, dtype)
    if positions == "alibi":
        return None, F.alibi_bias(num_heads, s, past + s, dtype=dtype)
    return None, None


def with_padding(constant, keep, dtype):
    """``constant`` (H, S, T) or None, plus ``-inf`` on the padded keys: ``keep`` (B, T) bool, True =
    a real key (or a float mask, added as it is). Returns (B, 1, 1, T) or (B, H, S, T); ``constant``
    itself when ``keep`` is None."""
    if keep is None:
        return constant
    pad = np.where(keep, 0.0, -np.inf) if keep.dtype == np.bool_ else keep
    pad = pad.astype(dtype)[:, None, None, :]                                    # (B, 1, 1, T)
    return pad if constant is None else constant + pad
