"""Causal self-attention with a KV cache: S new positions attend to the cache and to themselves."""

import numpy as np


def kv_cache_attention(q, k_new, v_new, k_cache, v_cache):
    """q, k_new (B, H, S, Dh), v_new (B, H, S, Dv), caches of T positions -> (out, K, V).

    Append first, then attend: a new position sees itself. The new positions are the last S rows of
    the full (T + S) causal mask, so new position i (absolute T + i) may not attend key j > T + i:
    the mask is aligned bottom-right (for S = 1 it masks nothing).
    """
    S, Dh = q.shape[-2], q.shape[-1]
    K = np.concatenate([k_cache, k_new], axis=2)                # (B, H, T + S, Dh)
    V = np.concatenate([v_cache, v_new], axis=2)                # (B, H, T + S, Dv)
    N = K.shape[2]                                              # T + S
    blocked = np.triu(np.ones((S, N), dtype=bool), k=N - S + 1)  # (S, T + S) True = may NOT attend
    scores = np.where(blocked, -np.inf, (q @ np.swapaxes(K, -1, -2)) / np.sqrt(Dh))  # (B, H, S, N)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))     # every row keeps a key: finite max
    P = e / e.sum(axis=-1, keepdims=True)
    return P @ V, K, V                                          # (B, H, S, Dv)
