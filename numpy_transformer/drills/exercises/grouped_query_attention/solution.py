"""Grouped-query attention (query heads sharing key/value heads), forward and backward."""

import numpy as np


def gqa_forward(q, k, v, causal=False):
    """q (B, Hq, S, Dh), k (B, Hkv, T, Dh), v (B, Hkv, T, Dv) -> (out (B, Hq, S, Dv), cache).

    G = Hq // Hkv consecutive query heads share one key/value head: query head h uses key/value head
    h // G (torch's repeat_interleave). The query heads viewed as (Hkv, G), and k and v given a
    size-1 group axis, broadcasting pairs every query head with its shared head, without copying k
    or v.
    """
    B, Hq, S, Dh = q.shape
    Hkv, T = k.shape[1], k.shape[2]
    G = Hq // Hkv
    scale = 1.0 / np.sqrt(Dh)
    qg = q.reshape(B, Hkv, G, S, Dh)                                      # query head h = j * G + g
    kg, vg = k[:, :, None], v[:, :, None]                                 # (B, Hkv, 1, T, .)
    scores = (qg @ np.swapaxes(kg, -1, -2)) * scale                       # (B, Hkv, G, S, T)
    if causal:
        scores = np.where(np.triu(np.ones((S, T), dtype=bool), k=1), -np.inf, scores)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))               # key 0 is never masked
    P = e / e.sum(axis=-1, keepdims=True)                                 # (B, Hkv, G, S, T)
    out = (P @ vg).reshape(B, Hq, S, -1)                                  # (B, Hq, S, Dv)
    return out, (qg, kg, vg, P, scale)


def gqa_backward(dout, cache):
    """dout (B, Hq, S, Dv) -> (dq (B, Hq, S, Dh), dk (B, Hkv, T, Dh), dv (B, Hkv, T, Dv)).

    Per query head this is attention's backward (A = c q k^T, P = softmax(A), out = P v):
      dv_h = P^T dout,  dP = dout v^T,  dA = P * (dP - rowsum(dP * P)),
      dq = c dA k,  dk_h = c dA^T q.
    But k_j and v_j were used by all G query heads of group j (a broadcast over the group axis), and
    the backward of a broadcast is a sum: dk_j = sum_g dk_(j, g), dv_j = sum_g dv_(j, g).
    """
    qg, kg, vg, P, scale = cache
    B, Hkv, G, S, Dh = qg.shape
    doutg = dout.reshape(B, Hkv, G, S, -1)                                # (B, Hkv, G, S, Dv)
    dv = (np.swapaxes(P, -1, -2) @ doutg).sum(axis=2)                    # (B, Hkv, T, Dv) g summed
    dP = doutg @ np.swapaxes(vg, -1, -2)                                  # (B, Hkv, G, S, T)
    dA = P * (dP - np.sum(dP * P, axis=-1, keepdims=True))                # (B, Hkv, G, S, T)
    dq = (scale * (dA @ kg)).reshape(B, Hkv * G, S, Dh)                   # (B, Hq, S, Dh)
    dk = (scale * (np.swapaxes(dA, -1, -2) @ qg)).sum(axis=2)            # (B, Hkv, T, Dh) g summed
    return dq, dk, dv
