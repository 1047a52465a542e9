"""The sinusoidal positional-encoding table."""

import numpy as np


def positional_encoding(S, D):
    """-> pe (S, D), D even.

    pe[pos, 2i] = sin(pos / 10000^(2i/D)),  pe[pos, 2i+1] = cos(pos / 10000^(2i/D)).

    Both columns of a pair share one frequency; positions start at 0. Vectorised: an (S, 1) column
    of positions times a (D/2,) row of frequencies gives every angle at once.
    """
    pos = np.arange(S, dtype=np.float64)[:, None]                         # (S, 1)
    freq = np.exp(-np.log(10000.0) * np.arange(0, D, 2) / D)              # (D/2,)  = 10000^(-2i/D)
    angle = pos * freq                                                    # (S, D/2)
    pe = np.zeros((S, D))
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle)
    return pe
