"""Drill: grouped-query attention (GQA; multi-query attention when Hkv = 1), forward and backward.

Shape letters: B batch, Hq query heads, Hkv key/value heads, G = Hq // Hkv query heads per key/value
head, S query length, T key length, Dh query/key width, Dv value width.

    out_h = softmax(q_h k_j^T / sqrt(Dh) + M) v_j      with j = h // G

Conventions (the grader checks them):
* query head h uses key/value head h // G: consecutive query heads share (heads 0..G-1 share key
  head 0), as torch's F.scaled_dot_product_attention(..., enable_gqa=True), which repeats k and v
  with repeat_interleave.
* causal=True: query i may not attend key j > i (M = -inf there, 0 elsewhere); no other mask.
* forward returns (out, cache); backward returns (dq, dk, dv) with dk, dv of k's and v's shapes
  (B, Hkv, ...). S and T may differ; Hkv may be 1 or equal Hq; float64; do not modify the inputs in
  place.

Hints:
* You need not copy k and v G times: q.reshape(B, Hkv, G, S, Dh) against k[:, :, None]
  (B, Hkv, 1, T, Dh) broadcasts each key head over its group.
* Backward: per query head it is ordinary attention's backward. Then ask what the forward did to
  k and v: each was used by G query heads.
"""

import numpy as np


def gqa_forward(q, k, v, causal=False):
    """Grouped-query attention.

    Parameters
    ----------
    q : ndarray, shape (B, Hq, S, Dh)
    k : ndarray, shape (B, Hkv, T, Dh)
    v : ndarray, shape (B, Hkv, T, Dv)
    causal : bool

    Returns
    -------
    out : ndarray, shape (B, Hq, S, Dv)
    cache : anything your backward needs
    """
    raise NotImplementedError


def gqa_backward(dout, cache):
    """Gradients given dout = dL/dout.

    Parameters
    ----------
    dout : ndarray, shape (B, Hq, S, Dv)
    cache : what gqa_forward returned

    Returns
    -------
    dq : ndarray, shape (B, Hq, S, Dh)
    dk : ndarray, shape (B, Hkv, T, Dh)
    dv : ndarray, shape (B, Hkv, T, Dv)
    """
    raise NotImplementedError
