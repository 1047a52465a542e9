"""Configurable implementations of the training drills (dropout, cross-entropy with ``ignore_index`` and
label smoothing, one AdamW step), used to recognise the classic mistakes; re-exported by :mod:`.variants`.

As in :mod:`.variants`, each ``*_impl(**knobs)`` is correct with its default knobs and written
independently of :mod:`numpy_transformer.functional` and :mod:`numpy_transformer.optim`.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np


# --------------------------------------------------------------------------------------------------
# dropout
# --------------------------------------------------------------------------------------------------


def dropout_impl(scale="forward_and_backward", backward_mask="cached", at_eval="identity", keep="ge_p"):
    """Inverted dropout ``y = x * keep / (1 - p)`` with ``keep = rng.random(x.shape) >= p``.

    ``scale``: "forward_and_backward" (correct), "none" (no 1/(1-p) anywhere), "forward_only" (the
    backward forgets it); ``backward_mask``: "cached" (correct) or "resampled" (the backward draws a new
    mask from the same generator); ``at_eval``: "identity" (correct) or "dropped" (training=False still
    drops); ``keep``: "ge_p" (correct) or "lt_p" (p read as the keep probability: keep = u < p, 1/p).
    """

    def draw(rng, shape, p):
        u = rng.random(shape)
        return u < p if keep == "lt_p" else u >= p

    def factor(p):
        kept = p if keep == "lt_p" else 1.0 - p
        return 0.0 if kept == 0.0 else 1.0 / kept

    def dropout_forward(x, p, rng, training=True):
        if not training and at_eval == "identity":
            return x.copy(), (None, 1.0, rng, p)
        mask = draw(rng, x.shape, p)
        s = 1.0 if scale == "none" else factor(p)
        return x * mask * s, (mask, s, rng, p)

    def dropout_backward(dy, cache):
        mask, s, rng, p = cache
        if mask is None:
            return dy.copy()
        if backward_mask == "resampled":
            mask = draw(rng, dy.shape, p)
        if scale == "forward_only":
            s = 1.0
        return dy * mask * s

    return SimpleNamespace(dropout_forward=dropout_forward, dropout_backward=dropout_backward)
