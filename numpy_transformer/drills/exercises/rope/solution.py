"""Rotary position embeddings, forward and backward (either pair layout)."""

import numpy as np


def _pairs(dh, interleaved):
    """The feature indices of the two halves of every pair."""
    idx = np.arange(dh)
    if interleaved:
        return idx[0::2], idx[1::2]                             # (2i, 2i + 1): the paper, Meta
    return idx[: dh // 2], idx[dh // 2:]                        # (i, i + Dh/2): rotate half, HF


def _rotate(x, cos, sin, first, second):
    a, b = x[..., first], x[..., second]                        # (N..., S, Dh/2) each
    out = np.empty_like(x)
    out[..., first] = a * cos - b * sin
    out[..., second] = a * sin + b * cos
    return out


def rope_forward(x, positions, base=10000.0, interleaved=False):
    """x (N..., S, Dh), positions (S,) -> (y, cache).

    theta[p, i] = positions[p] * base ** (-2i / Dh); each pair (a, b) -> R(theta) (a, b).
    """
    dh = x.shape[-1]
    w = base ** (-np.arange(0, dh, 2) / dh)                     # (Dh/2,) 2i in the exponent
    theta = np.asarray(positions, dtype=np.float64)[:, None] * w   # (S, Dh/2)
    cos, sin = np.cos(theta), np.sin(theta)
    first, second = _pairs(dh, interleaved)
    return _rotate(x, cos, sin, first, second), (cos, sin, first, second)


def rope_backward(dy, cache):
    """dy (N..., S, Dh) -> dx (N..., S, Dh).

    The forward is linear, one 2x2 rotation R(theta) per pair, so dx = R(theta)^T dy per pair; a
    rotation is orthogonal, R(theta)^T = R(-theta): rotate dy back by -theta (negate the sine).
    """
    cos, sin, first, second = cache
    return _rotate(dy, cos, -sin, first, second)
