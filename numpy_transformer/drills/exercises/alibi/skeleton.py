"""Drill: ALiBi (Press et al. 2022), the per-head slopes and the additive attention bias.

    bias[h, i, j] = -m_h * (position of query i - j)        added to the scores before the softmax

Conventions (the grader checks them):
* alibi_slopes(H) returns the (H,) float64 slopes; alibi_bias(H, S, T) returns (H, S, T) float64.
* S <= T queries over T keys: the queries are the LAST S positions (a KV-cache decode step, S = 1,
  gets the last row of the full T x T matrix). Above the diagonal (future keys) the value is
  whatever the formula gives: the causal mask removes it.
* No backward: the bias has no parameters.

Hints:
* H a power of two: m_h = 2 ** (-8 h / H) for h = 1..H (H = 8: 1/2, 1/4, ..., 1/256).
* Otherwise (the paper's reference code): the slopes of the closest lower power of two p, then every
  other slope of 2p, the first H - p of them.
"""

import numpy as np


def alibi_slopes(num_heads):
    """The per-head slopes.

    Parameters
    ----------
    num_heads : int
        H >= 1.

    Returns
    -------
    slopes : ndarray, shape (H,), float64
    """
    raise NotImplementedError


def alibi_bias(num_heads, s, t):
    """The additive bias of S queries (the last S positions) over T keys.

    Parameters
    ----------
    num_heads : int
    s, t : int
        Query and key lengths, 1 <= s <= t.

    Returns
    -------
    bias : ndarray, shape (H, S, T), float64: -m_h * ((i + T - S) - j)
    """
    raise NotImplementedError
