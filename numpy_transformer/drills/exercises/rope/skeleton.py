"""Drill: rotary position embeddings (RoPE) of queries or keys, forward and backward.

Shape letters: N... any leading dimensions (e.g. B, H), S positions, Dh the head width (even).

Each feature pair (a, b) at position p is rotated by the angle theta = p * w_i, with the frequency
of pair i = 0 .. Dh/2 - 1

    w_i = base ** (-2 i / Dh)
    a' = a cos(theta) - b sin(theta)
    b' = a sin(theta) + b cos(theta)

Conventions (the grader checks them):
* interleaved=False: pair i is the features (i, i + Dh/2) ("rotate half", GPT-NeoX, Hugging Face
  Llama); interleaved=True: pair i is (2i, 2i + 1) (the paper, Meta's Llama);
* positions is an int array (S,), one position per row (not always starting at 0: a decode step
  continues at an offset);
* forward returns (y, cache); backward returns dx, the shape of x;
* float64 throughout; do not modify the inputs in place. Some cases have S = 1, Dh = 2 or H = 1.
* RoPE rotates q and k only. Rotating v as well is a mistake of the attention module, not of this
  function: the scores q.k are what must depend on relative position.

Hints:
* Vectorise: theta = positions[:, None] * w[None, :] is (S, Dh/2) and broadcasts over N...
* The map is linear and acts on each pair by a 2x2 rotation R(theta). Its backward is the
  transpose R(theta)^T. Which rotation is that?
"""

import numpy as np


def rope_forward(x, positions, base=10000.0, interleaved=False):
    """Rotate every feature pair of x by its position's angle.

    Parameters
    ----------
    x : ndarray, shape (N..., S, Dh)   queries or keys, Dh even
    positions : int ndarray, shape (S,)
    base : float
    interleaved : bool   pairs (2i, 2i+1) if True, else (i, i + Dh/2)

    Returns
    -------
    y : ndarray, shape (N..., S, Dh)
    cache : anything your backward needs
    """
    raise NotImplementedError


def rope_backward(dy, cache):
    """Gradient given dy = dL/dy.

    Parameters
    ----------
    dy : ndarray, shape (N..., S, Dh)
    cache : what rope_forward returned

    Returns
    -------
    dx : ndarray, shape (N..., S, Dh)
    """
    raise NotImplementedError
