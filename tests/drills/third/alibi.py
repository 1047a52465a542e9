"""Third-set mistakes for alibi."""

MISTAKES = [
    dict(label="slope exponent's sign dropped (2^(+8h/n): slopes grow instead of shrink)",
         keywords=["exponent", "sign", "grow"],
         patch=[("return 2.0 ** (-8.0 * np.arange(1, n + 1) / n)", "return 2.0 ** (8.0 * np.arange(1, n + 1) / n)")]),
    dict(label="non-power-of-two heads: the extra slopes taken from the p-geometric instead of the 2p one",
         keywords=["power of two", "power-of-two", "extra slopes", "interleav"],
         patch=[("_geometric(2 * p)[0::2][:num_heads - p]", "_geometric(p)[0::2][:num_heads - p]")]),
    dict(label="future positions clipped to zero bias (min(rel, 0))",
         keywords=["future", "clip", "causal"],
         patch=[("return alibi_slopes(num_heads)[:, None, None] * rel[None]", "return alibi_slopes(num_heads)[:, None, None] * np.minimum(rel, 0)[None]")]),
    dict(label="integer division 8 // n in the slope exponent",
         keywords=["integer division", "8 // n", "8/n"],
         patch=[("-8.0 * np.arange(1, n + 1) / n)", "-(8 // n) * np.arange(1, n + 1))")]),
]

CORRECT = '''
import math

import numpy as np


def alibi_slopes(num_heads):
    def pow2(n):
        ratio = 2.0 ** (-8.0 / n)
        return np.array([ratio ** (h + 1) for h in range(n)])

    below = 1 << (num_heads.bit_length() - 1)
    slopes = list(pow2(below))
    if below < num_heads:
        slopes += list(pow2(2 * below)[::2][: num_heads - below])
    return np.array(slopes, dtype=np.float64)


def alibi_bias(num_heads, s, t):
    out = np.zeros((num_heads, s, t))
    slopes = alibi_slopes(num_heads)
    for i in range(s):
        qpos = t - s + i
        for j in range(t):
            out[:, i, j] = slopes * (j - qpos)
    return out
'''
