"""Unlisted mistakes for alibi."""

MISTAKES = [
    dict(label="queries aligned top-left (query i at key i, not i + T - S)",
         keywords=["i + t - s", "align", "offset", "top-left"],
         patch=[("(np.arange(s)[:, None] + t - s)", "(np.arange(s)[:, None])")]),
    dict(label="sign of the distance flipped (key - query reversed)",
         keywords=["sign", "flip", "negat", "j - i"],
         patch=[("rel = np.arange(t)[None, :] - (np.arange(s)[:, None] + t - s)",
                 "rel = (np.arange(s)[:, None] + t - s) - np.arange(t)[None, :]")]),
    dict(label="slopes exponent uses n instead of 8/n (2^-h)",
         keywords=["slope", "geometric", "2^(-8"],
         patch=[("2.0 ** (-8.0 * np.arange(1, n + 1) / n)", "2.0 ** (-1.0 * np.arange(1, n + 1))")]),
    dict(label="slopes start at h = 0 instead of h = 1",
         keywords=["slope", "h = 1", "start", "off by one"],
         patch=[("np.arange(1, n + 1)", "np.arange(0, n)")]),
    dict(label="non-power-of-two heads: takes the odd-indexed extra slopes",
         keywords=["interleav", "power of two", "slope", "extra"],
         patch=[("_geometric(2 * p)[0::2]", "_geometric(2 * p)[1::2]")]),
    dict(label="non-power-of-two heads: extra slopes from the first of 2p instead of every other",
         keywords=["interleav", "power of two", "slope", "extra"],
         patch=[("_geometric(2 * p)[0::2][:num_heads - p]", "_geometric(2 * p)[:num_heads - p]")]),
    dict(label="absolute distance (symmetric bias) instead of signed j - i",
         keywords=["abs", "sign", "symmetric", "distance"],
         patch=[("* rel[None]", "* -np.abs(rel)[None]")]),
]

CORRECT = '''
import math

import numpy as np


def alibi_slopes(num_heads):
    def powers(n):
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]
    closest = 2 ** int(math.log2(num_heads))
    slopes = powers(closest)
    if closest < num_heads:
        slopes += powers(2 * closest)[::2][: num_heads - closest]
    return np.array(slopes, dtype=np.float64)


def alibi_bias(num_heads, s, t):
    keys = np.arange(t, dtype=np.float64)
    queries = np.arange(t - s, t, dtype=np.float64)
    dist = keys[None, :] - queries[:, None]
    slopes = alibi_slopes(num_heads)
    return np.einsum("h,st->hst", slopes, dist)
'''
