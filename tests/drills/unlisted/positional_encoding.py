"""Unlisted mistakes for positional_encoding."""

MISTAKES = [
    dict(label="sin and cos swapped between even and odd columns",
         keywords=["sin", "cos", "swap"],
         patch=[("pe[:, 0::2] = np.sin(angle)\n    pe[:, 1::2] = np.cos(angle)",
                 "pe[:, 0::2] = np.cos(angle)\n    pe[:, 1::2] = np.sin(angle)")]),
    dict(label="frequency exponent i/D instead of 2i/D (arange(D/2))",
         keywords=["2i", "frequenc", "exponent"],
         patch=[("np.arange(0, D, 2) / D)", "np.arange(0, D // 2) / D)")]),
    dict(label="positions start at 1",
         keywords=["position", "start", "0", "off by one"],
         patch=[("pos = np.arange(S, dtype=np.float64)[:, None]", "pos = np.arange(1, S + 1, dtype=np.float64)[:, None]")]),
    dict(label="positions multiplied by 10000^(2i/D) (sign of the exponent flipped)",
         keywords=["exponent", "sign", "frequenc", "10000"],
         patch=[("freq = np.exp(-np.log(10000.0)", "freq = np.exp(np.log(10000.0)")]),
    dict(label="each column gets its own frequency (pairs do not share one)",
         keywords=["pair", "share", "frequenc", "column"],
         patch=[("    pe[:, 0::2] = np.sin(angle)\n    pe[:, 1::2] = np.cos(angle)\n",
                 "    f = np.exp(-np.log(10000.0) * np.arange(D) / D)\n"
                 "    pe[:, 0::2] = np.sin(pos * f[0::2])\n    pe[:, 1::2] = np.cos(pos * f[1::2])\n")]),
    dict(label="base 1000 instead of 10000",
         keywords=["10000", "base"],
         patch=[("np.log(10000.0)", "np.log(1000.0)")]),
]

CORRECT = '''
import numpy as np


def positional_encoding(S, D):
    table = np.empty((S, D), dtype=np.float64)
    for i in range(D // 2):
        w = 1.0 / (10000.0 ** (2 * i / D))
        angles = np.arange(S) * w
        table[:, 2 * i] = np.sin(angles)
        table[:, 2 * i + 1] = np.cos(angles)
    return table
'''
