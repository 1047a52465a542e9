"""Third-set mistakes for positional_encoding."""

MISTAKES = [
    dict(label="the odd columns get the sine too (cos missing)",
         keywords=["cos", "odd columns"],
         patch=[("pe[:, 1::2] = np.cos(angle)", "pe[:, 1::2] = np.sin(angle)")]),
    dict(label="frequency exponent divided by D/2 instead of D (4i/D)",
         keywords=["exponent", "frequency", "2i/d"],
         patch=[("np.arange(0, D, 2) / D)", "np.arange(0, D, 2) / (D / 2))")]),
    dict(label="angle pos + freq (added instead of multiplied)",
         keywords=["multipl", "product", "added"],
         patch=[("angle = pos * freq ", "angle = pos + freq ")]),
    dict(label="integer division in the exponent (2i // D = 0: every frequency 1)",
         keywords=["integer division", "//", "exponent"],
         patch=[("np.arange(0, D, 2) / D)", "np.arange(0, D, 2) // D)")]),
]

CORRECT = '''
import math

import numpy as np


def positional_encoding(S, D):
    table = np.empty((S, D), dtype=np.float64)
    for pos in range(S):
        for i in range(D // 2):
            w = pos / math.pow(10000.0, 2.0 * i / D)
            table[pos, 2 * i] = math.sin(w)
            table[pos, 2 * i + 1] = math.cos(w)
    return table
'''
