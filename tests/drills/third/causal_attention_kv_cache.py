"""Third-set mistakes for causal_attention_kv_cache."""

MISTAKES = [
    dict(label="the cached positions masked out (new positions attend only to each other)",
         keywords=["cached positions", "cache masked", "only to the new", "ignores the cache"],
         patch=[("k=N - S + 1)  ", "k=N - S + 1) | (np.arange(N) < N - S)[None, :]  ")]),
    dict(label="the updated caches returned swapped (V, K)",
         keywords=["swapped", "order", "returned cache"],
         patch=[("return P @ V, K, V ", "return P @ V, V, K ")]),
    dict(label="scores multiplied by sqrt(Dh) instead of divided",
         keywords=["scale", "sqrt(dh)", "multipl"],
         patch=[("(q @ np.swapaxes(K, -1, -2)) / np.sqrt(Dh)", "(q @ np.swapaxes(K, -1, -2)) * np.sqrt(Dh)")]),
    dict(label="the softmax max shift taken over heads and queries (axes 1, 2) instead of along the keys",
         keywords=["max", "shift", "axis"],
         patch=[("e = np.exp(scores - scores.max(axis=-1, keepdims=True))", "e = np.exp(scores - scores.max(axis=(1, 2), keepdims=True))")]),
]

CORRECT = '''
import numpy as np


def kv_cache_attention(q, k_new, v_new, k_cache, v_cache):
    T = k_cache.shape[2]
    S = q.shape[2]
    keys = np.concatenate((k_cache, k_new), axis=2)
    vals = np.concatenate((v_cache, v_new), axis=2)
    logits = np.einsum("bhsd,bhnd->bhsn", q, keys) / np.sqrt(q.shape[-1])
    allowed = np.arange(T + S)[None, :] <= (T + np.arange(S))[:, None]
    logits = np.where(allowed, logits, -np.inf)
    logits = logits - logits.max(axis=-1, keepdims=True)
    w = np.exp(logits)
    w /= w.sum(axis=-1, keepdims=True)
    return np.einsum("bhsn,bhnd->bhsd", w, vals), keys, vals
'''
