"""Scaled dot-product attention with a boolean mask and a causal option, forward and backward."""

import numpy as np


def attention_forward(q, k, v, mask=None, causal=False):
    """q (B, H, S, Dh), k (B, H, T, Dh), v (B, H, T, Dv) -> (out (B, H, S, Dv), cache).

    out = softmax(q k^T / sqrt(Dh) + M) v, where M is -inf where the query may NOT attend (mask
    True, or key j > query i when causal) and 0 elsewhere. A row with every key masked outputs
    zeros.
    """
    S, T, Dh = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1.0 / np.sqrt(Dh)
    scores = (q @ np.swapaxes(k, -1, -2)) * scale                         # (B, H, S, T)
    blocked = np.zeros((S, T), dtype=bool)
    if mask is not None:
        blocked = blocked | mask                                          # (S, T) or (B, 1, S, T)
    if causal:
        blocked = blocked | np.triu(np.ones((S, T), dtype=bool), k=1)     # j > i is the future
    scores = np.where(blocked, -np.inf, scores)
    m = scores.max(axis=-1, keepdims=True)
    # an all-masked row has m = -inf: use 0, so that scores - m is never -inf - -inf (NaN)
    m = np.where(np.isneginf(m), 0.0, m)
    e = np.exp(scores - m)
    s = e.sum(axis=-1, keepdims=True)
    # an all-masked row has s = 0: divide by 1 instead, so that its P is all 0
    P = e / np.where(s == 0, 1.0, s)                                      # (B, H, S, T)
    out = P @ v                                                           # (B, H, S, Dv)
    return out, (q, k, v, P, scale)


def attention_backward(dout, cache):
    """dout (B, H, S, Dv) -> (dq (B, H, S, Dh), dk (B, H, T, Dh), dv (B, H, T, Dv)).

    Forward: A = c q k^T (c the scale), P = softmax(A + M), out = P v.
      out = P v          ->  dP = dout v^T,  dv = P^T dout
      P = softmax(A + M) ->  dA = P * (dP - rowsum(dP * P))   (masked entries: P = 0, no gradient)
      A = c q k^T        ->  dq = c dA k,    dk = c dA^T q
    """
    q, k, v, P, scale = cache
    dv = np.swapaxes(P, -1, -2) @ dout                                    # (B, H, T, Dv)
    dP = dout @ np.swapaxes(v, -1, -2)                                    # (B, H, S, T)
    dA = P * (dP - np.sum(dP * P, axis=-1, keepdims=True))                # (B, H, S, T)
    dq = scale * (dA @ k)                                                 # (B, H, S, Dh)
    dk = scale * (np.swapaxes(dA, -1, -2) @ q)                            # (B, H, T, Dh)
    return dq, dk, dv
