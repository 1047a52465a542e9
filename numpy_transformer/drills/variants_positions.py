"""Mistake knobs of the position drills without a backward of their own (ALiBi) or with the simplest one
(a learned table), re-exported by :mod:`.variants`."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

__all__ = ["alibi_impl", "learned_positions_impl"]


# --------------------------------------------------------------------------------------------------
# alibi
# --------------------------------------------------------------------------------------------------


def alibi_impl(slopes="paper", start=1, sign=-1.0, align="end"):
    """``slopes="geometric"``: 2^(-8 i / H) for every H; ``start``: the first i; ``sign``: of m * (i - j);
    ``align="top_left"``: query i at key position i (instead of i + T - S)."""

    def geometric(n):
        return 2.0 ** (-8.0 * np.arange(start, start + n) / n)

    def alibi_slopes(h):
        p = 2 ** int(math.floor(math.log2(h)))
        if slopes == "geometric" or p == h:
            return geometric(h)
        return np.concatenate([geometric(p), geometric(2 * p)[0::2][:h - p]])

    def alibi_bias(h, s, t):
        offset = 0 if align == "top_left" else t - s
        dist = (np.arange(s)[:, None] + offset) - np.arange(t)[None, :]       # (S, T) query - key
        return sign * alibi_slopes(h)[:, None, None] * dist[None]

    return SimpleNamespace(alibi_slopes=alibi_slopes, alibi_bias=alibi_bias)


# --------------------------------------------------------------------------------------------------
# learned positions
# --------------------------------------------------------------------------------------------------


def learned_positions_impl(reduce="sum", offset_mode="used"):
    """``reduce``: "sum" (correct), "first" (batch row 0 only) or "mean" over the batch;
    ``offset_mode="ignored"``: the rows from 0 whatever the offset."""

    def learned_positions_forward(x, W, offset=0):
        s = x.shape[1]
        o = 0 if offset_mode == "ignored" else offset
        return x + W[o:o + s], (W.shape, o, s)

    def learned_positions_backward(dy, cache):
        shape, o, s = cache
        dW = np.zeros(shape)
        dW[o:o + s] = {"sum": dy.sum(axis=0), "first": dy[0], "mean": dy.mean(axis=0)}[reduce]
        return dy.copy(), dW

    return SimpleNamespace(learned_positions_forward=learned_positions_forward,
                           learned_positions_backward=learned_positions_backward)
# the training drills (dropout, cross-entropy with ignore_index and label smoothing, one AdamW step) live
# in variants_training.py; re-exported here
