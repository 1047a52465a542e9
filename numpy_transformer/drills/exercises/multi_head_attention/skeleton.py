"""Drill: multi-head self-attention (no biases), forward and backward.

Shape letters: B batch, S sequence length, D model width, H heads, Dh = D / H head width.

    q, k, v = x Wq^T, x Wk^T, x Wv^T                         (B, S, D) each
    split each into H heads                                  (B, H, S, Dh)
    ctx_h = softmax(q_h k_h^T / sqrt(Dh) + M) v_h            per head
    merge the heads back                                     (B, S, D)
    out = ctx Wo^T

Conventions (the grader checks them):
* weights have torch's layout (Dout, Din), here all (D, D): q = x @ Wq.T.
* the scale uses the head width Dh, not D.
* mask: bool (S, S), True = may NOT attend, or None; causal=True blocks keys j > i (combine both).
  A row with every key masked outputs zeros.
* forward returns (out, cache); backward returns (dx, dWq, dWk, dWv, dWo). Float64; do not modify
  the inputs in place.

Hints:
* Head h is the slice [h*Dh:(h+1)*Dh] of the features of every position. Which reshape/transpose
  sequence produces (B, H, S, Dh) with that meaning? Test it on np.arange.
* The backward of "merge heads" is "split heads" and vice versa.
* x is used three times (for q, k and v).
"""

import numpy as np


def mha_forward(x, Wq, Wk, Wv, Wo, num_heads, mask=None, causal=False):
    """Multi-head self-attention.

    Parameters
    ----------
    x : ndarray, shape (B, S, D)
    Wq, Wk, Wv, Wo : ndarray, shape (D, D) each
    num_heads : int, H (divides D)
    mask : ndarray of bool, shape (S, S), True = may not attend; or None
    causal : bool

    Returns
    -------
    out : ndarray, shape (B, S, D)
    cache : anything your backward needs
    """
    raise NotImplementedError


def mha_backward(dout, cache):
    """Gradients given dout = dL/dout.

    Parameters
    ----------
    dout : ndarray, shape (B, S, D)
    cache : what mha_forward returned

    Returns
    -------
    dx : ndarray, shape (B, S, D)
    dWq, dWk, dWv, dWo : ndarray, shape (D, D) each
    """
    raise NotImplementedError
