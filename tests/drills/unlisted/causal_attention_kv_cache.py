"""Unlisted mistakes for causal_attention_kv_cache."""

MISTAKES = [
    dict(label="causal mask aligned top-left (k=1) instead of bottom-right",
         keywords=["align", "bottom-right", "i + t", "offset"],
         patch=[("k=N - S + 1)", "k=1)")]),
    dict(label="causal mask blocks the diagonal: a new position cannot see itself",
         keywords=["diagonal", "itself", "k=1", "k=0"],
         patch=[("k=N - S + 1)", "k=N - S)")]),
    dict(label="scale 1/Dh instead of 1/sqrt(Dh)",
         keywords=["sqrt", "scale"],
         patch=[("/ np.sqrt(Dh))", "/ Dh)")]),
    dict(label="new keys prepended before the cache (wrong concatenation order)",
         keywords=["order", "append", "concat", "prepend"],
         patch=[("K = np.concatenate([k_cache, k_new], axis=2)", "K = np.concatenate([k_new, k_cache], axis=2)"),
                ("V = np.concatenate([v_cache, v_new], axis=2)", "V = np.concatenate([v_new, v_cache], axis=2)")]),
    dict(label="softmax over the query axis instead of the key axis",
         keywords=["axis", "softmax"],
         patch=[("P = e / e.sum(axis=-1, keepdims=True)", "P = e / e.sum(axis=-2, keepdims=True)")]),
    dict(label="no causal mask among the new positions",
         keywords=["causal", "mask", "future"],
         patch=[("scores = np.where(blocked, -np.inf, (q @ np.swapaxes(K, -1, -2)) / np.sqrt(Dh))",
                 "scores = (q @ np.swapaxes(K, -1, -2)) / np.sqrt(Dh)")]),
]

CORRECT = '''
import numpy as np


def kv_cache_attention(q, k_new, v_new, k_cache, v_cache):
    keys = np.concatenate((k_cache, k_new), axis=-2)
    values = np.concatenate((v_cache, v_new), axis=-2)
    s, d = q.shape[-2], q.shape[-1]
    n = keys.shape[-2]
    logits = np.einsum("bhsd,bhnd->bhsn", q, keys) / np.sqrt(d)
    qpos = np.arange(n - s, n)[:, None]
    kpos = np.arange(n)[None, :]
    logits = np.where(kpos <= qpos, logits, -np.inf)
    logits = logits - logits.max(axis=-1, keepdims=True)
    w = np.exp(logits)
    w /= w.sum(axis=-1, keepdims=True)
    return np.einsum("bhsn,bhnv->bhsv", w, values), keys, values
'''
