"""Fresh unlisted mistakes for positional_encoding."""

MISTAKES = [
    dict(label="sines in the first half and cosines in the second (concatenated, not interleaved)",
         keywords=["interleav", "concatenat", "halves", "layout"],
         patch=[("    pe[:, 0::2] = np.sin(angle)\n    pe[:, 1::2] = np.cos(angle)",
                 "    pe[:, :D // 2] = np.sin(angle)\n    pe[:, D // 2:] = np.cos(angle)")]),
    dict(label="log base 10 instead of the natural log in the frequency",
         keywords=["log", "base", "frequenc"],
         patch=[("freq = np.exp(-np.log(10000.0) *", "freq = np.exp(-np.log10(10000.0) *")]),
    dict(label="the frequency index uses the odd numbers 2i + 1 instead of 2i",
         keywords=["frequenc", "2i", "index", "exponent"],
         patch=[("np.arange(0, D, 2) / D)", "np.arange(1, D, 2) / D)")]),
    dict(label="the table allocated in float32",
         keywords=["dtype", "float32", "precision"],
         patch=[("    pe = np.zeros((S, D))", "    pe = np.zeros((S, D), dtype=np.float32)")]),
    dict(label="positions normalised to [0, 1) (divided by S)",
         keywords=["position", "normalis", "normaliz"],
         patch=[("pos = np.arange(S, dtype=np.float64)[:, None] ", "pos = np.arange(S, dtype=np.float64)[:, None] / S ")]),
]

CORRECT = '''
import math

import numpy as np


def positional_encoding(S, D):
    table = np.empty((S, D))
    half = D // 2
    for i in range(half):
        rate = 1.0 / (10000.0 ** (2.0 * i / D))
        column = np.arange(S) * rate
        table[:, 2 * i] = np.sin(column)
        table[:, 2 * i + 1] = np.cos(column)
    return table
'''
