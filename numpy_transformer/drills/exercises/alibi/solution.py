"""ALiBi: the slopes and the (H, S, T) bias (no parameters, so no backward)."""

import math

import numpy as np


def _geometric(n):
    """2^(-8 h / n), h = 1..n: the paper's slopes for n a power of two."""
    return 2.0 ** (-8.0 * np.arange(1, n + 1) / n)


def alibi_slopes(num_heads):
    """(H,) slopes; for H not a power of two the reference code's interleaving."""
    p = 2 ** int(math.floor(math.log2(num_heads)))
    if p == num_heads:
        return _geometric(p)
    return np.concatenate([_geometric(p), _geometric(2 * p)[0::2][:num_heads - p]])


def alibi_bias(num_heads, s, t):
    """(H, S, T): query i sits at key position i + T - S (the last S of T); bias = m * (j - it)."""
    rel = np.arange(t)[None, :] - (np.arange(s)[:, None] + t - s)        # (S, T), <= 0 in the past
    return alibi_slopes(num_heads)[:, None, None] * rel[None]             # (H, S, T)
