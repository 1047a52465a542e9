"""Fresh unlisted mistakes for alibi."""

MISTAKES = [
    dict(label="slopes with base e instead of 2 (exp(-8h/n))",
         keywords=["base", "slope", "2^"],
         patch=[("return 2.0 ** (-8.0 * np.arange(1, n + 1) / n)", "return np.exp(-8.0 * np.arange(1, n + 1) / n)")]),
    dict(label="non-power-of-two heads: the geometric formula applied to H directly",
         keywords=["power of two", "power-of-two", "interleav", "non-power"],
         patch=[("    if p == num_heads:\n        return _geometric(p)", "    if True:\n        return _geometric(num_heads)")]),
    dict(label="non-power-of-two heads: the extra slopes taken from the end of 2p's every other",
         keywords=["power of two", "power-of-two", "extra", "interleav"],
         patch=[("_geometric(2 * p)[0::2][:num_heads - p]", "_geometric(2 * p)[0::2][-(num_heads - p):]")]),
    dict(label="query offset with the wrong sign (query i at i - (T - S))",
         keywords=["align", "offset", "query position", "t - s"],
         patch=[("(np.arange(s)[:, None] + t - s)", "(np.arange(s)[:, None] - (t - s))")]),
    dict(label="slopes assigned to the heads in reverse order",
         keywords=["order", "revers", "head"],
         patch=[("return alibi_slopes(num_heads)[:, None, None] * rel[None]",
                 "return alibi_slopes(num_heads)[::-1, None, None] * rel[None]")]),
]

CORRECT = '''
import numpy as np


def alibi_slopes(num_heads):
    def powers(count):
        start = 2.0 ** (-8.0 / count)
        return np.array([start ** (i + 1) for i in range(count)])

    closest = 1
    while closest * 2 <= num_heads:
        closest *= 2
    slopes = list(powers(closest))
    if closest < num_heads:
        extra = powers(2 * closest)
        slopes += [extra[2 * i] for i in range(num_heads - closest)]
    return np.array(slopes)


def alibi_bias(num_heads, s, t):
    keys = np.arange(t, dtype=np.float64)
    queries = np.arange(t - s, t, dtype=np.float64)
    dist = keys[np.newaxis, :] - queries[:, np.newaxis]
    return np.einsum("h,st->hst", alibi_slopes(num_heads), dist)
'''
