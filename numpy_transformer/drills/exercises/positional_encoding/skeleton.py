"""Drill: the sinusoidal positional-encoding table of "Attention Is All You Need".

Shape letters: S sequence length (positions 0 .. S-1), D model width (even).

    pe[pos, 2i]     = sin(pos / 10000^(2i / D))
    pe[pos, 2i + 1] = cos(pos / 10000^(2i / D))

Conventions (the grader checks them):
* positions start at 0; columns 2i and 2i+1 share one frequency; float64 result.
* vectorise it: no Python loop over positions or columns is needed (but a loop is not graded).

Hints:
* An (S, 1) column of positions times a (D/2,) row of frequencies broadcasts to every angle.
* Strided assignment pe[:, 0::2] = ... fills the even columns.
"""

import numpy as np


def positional_encoding(S, D):
    """The (S, D) table.

    Parameters
    ----------
    S : int, number of positions
    D : int, even model width

    Returns
    -------
    pe : ndarray, shape (S, D)
    """
    raise NotImplementedError
