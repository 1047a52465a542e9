"""Drill: scaled dot-product attention with a boolean mask and a causal option, forward and
backward.

Shape letters: B batch, H heads, S query length, T key length, Dh query/key width, Dv value width.

    out = softmax(q k^T / sqrt(Dh) + M) v        (softmax over the keys, the last axis)

where M is -inf where a query may NOT attend and 0 elsewhere.

Conventions (the grader checks them):
* mask: bool, True = may NOT attend -- this drill's convention, torch.nn.MultiheadAttention's. NOTE:
  torch.nn.functional.scaled_dot_product_attention (and the library's
  F.scaled_dot_product_attention_forward) read a bool mask the other way round, True = may attend.
  Shape (S, T) or (B, 1, S, T), broadcast over the other axes; None = no mask.
* causal=True: query i may not attend key j > i (combine it with mask when both are given).
* a row whose keys are ALL masked outputs zeros (and gets zero gradient), not NaN.
* forward returns (out, cache); backward returns (dq, dk, dv). S and T may differ; float64; do not
  modify the inputs in place.

Hints:
* k^T on a 4-D array means swapping the last two axes: np.swapaxes(k, -1, -2) (k.T reverses them
  all).
* np.triu(np.ones((S, T), dtype=bool), k=1) is True strictly above the diagonal.
* Backward, in reverse order: out = P v (a matmul), P = softmax(A + M) (the softmax backward,
  row-sum term included), A = scale * q k^T (a matmul again). Check every gradient's shape.
"""

import numpy as np


def attention_forward(q, k, v, mask=None, causal=False):
    """Scaled dot-product attention.

    Parameters
    ----------
    q : ndarray, shape (B, H, S, Dh)
    k : ndarray, shape (B, H, T, Dh)
    v : ndarray, shape (B, H, T, Dv)
    mask : ndarray of bool, shape (S, T) or (B, 1, S, T), True = may not attend; or None
    causal : bool

    Returns
    -------
    out : ndarray, shape (B, H, S, Dv)
    cache : anything your backward needs
    """
    raise NotImplementedError


def attention_backward(dout, cache):
    """Gradients given dout = dL/dout.

    Parameters
    ----------
    dout : ndarray, shape (B, H, S, Dv)
    cache : what attention_forward returned

    Returns
    -------
    dq : ndarray, shape (B, H, S, Dh)
    dk : ndarray, shape (B, H, T, Dh)
    dv : ndarray, shape (B, H, T, Dv)
    """
    raise NotImplementedError
