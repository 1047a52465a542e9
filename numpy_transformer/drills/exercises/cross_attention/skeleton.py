"""Drill: multi-head cross-attention (the decoder attending to the encoder's output), no biases,
with a padding mask of the memory, forward and backward.

Shape letters: B batch, S decoder (query) length, T memory (key) length, D model width, H heads,
Dh = D / H.

    q = x Wq^T (B, S, D)      k = memory Wk^T, v = memory Wv^T (B, T, D)
    per head: softmax(q_h k_h^T / sqrt(Dh) + M) v_h;  heads merged; out = ctx Wo^T (B, S, D)

Conventions (the grader checks them):
* memory_key_padding_mask: None or bool (B, T), True = that memory position is padding: no query
  of that batch element may attend it (M = -inf there); every batch element keeps at least one
  memory position. Cross-attention has NO causal mask: every query sees the whole memory.
* weights use torch's layout (D, D): y = x @ W.T.
* forward returns (out, cache); backward returns (dx, dmemory, dWq, dWk, dWv, dWo).
* S and T may differ; float64; do not modify the inputs in place.

Hints:
* Split heads as (B, S, D) -> (B, S, H, Dh) -> (B, H, S, Dh); the mask (B, T) must line up with
  the key axis of the (B, H, S, T) scores.
* memory feeds two projections.
"""

import numpy as np


def cross_attention_forward(x, memory, Wq, Wk, Wv, Wo, num_heads, memory_key_padding_mask=None):
    """Cross-attention of x over memory.

    Parameters
    ----------
    x : ndarray, shape (B, S, D), the queries' input
    memory : ndarray, shape (B, T, D), the keys' and values' input
    Wq, Wk, Wv, Wo : ndarray, shape (D, D)
    num_heads : int, divides D
    memory_key_padding_mask : ndarray of bool, shape (B, T), optional (True = padding)

    Returns
    -------
    out : ndarray, shape (B, S, D)
    cache : anything your backward needs
    """
    raise NotImplementedError


def cross_attention_backward(dout, cache):
    """Gradients of everything.

    Parameters
    ----------
    dout : ndarray, shape (B, S, D)
    cache : what cross_attention_forward returned

    Returns
    -------
    dx : ndarray, shape (B, S, D)
    dmemory : ndarray, shape (B, T, D)
    dWq, dWk, dWv, dWo : ndarray, shape (D, D)
    """
    raise NotImplementedError
