"""Fresh unlisted mistakes for causal_attention_kv_cache."""

MISTAKES = [
    dict(label="scale 1/sqrt(number of keys) instead of 1/sqrt(Dh)",
         keywords=["scale", "sqrt", "dh"],
         patch=[("/ np.sqrt(Dh))  # (B, H, S, N)", "/ np.sqrt(N))  # (B, H, S, N)")]),
    dict(label="the old caches returned: the cache is never updated with the new keys and values",
         keywords=["cache", "append", "update", "concatenat"],
         patch=[("return P @ V, K, V ", "return P @ V, k_cache, v_cache ")]),
    dict(label="values concatenated in the other order than the keys (new values first)",
         keywords=["value", "order", "concatenat", "align"],
         patch=[("V = np.concatenate([v_cache, v_new], axis=2)", "V = np.concatenate([v_new, v_cache], axis=2)")]),
    dict(label="causal mask off by one: each new position also sees the next one",
         keywords=["mask", "off-by-one", "off by one", "future"],
         patch=[("k=N - S + 1)", "k=N - S + 2)")]),
    dict(label="mask applied after the softmax (masked probabilities zeroed, rows not renormalised)",
         keywords=["mask", "after the softmax", "renormal", "normalis"],
         patch=[("    scores = np.where(blocked, -np.inf, (q @ np.swapaxes(K, -1, -2)) / np.sqrt(Dh))  # (B, H, S, N)\n"
                 "    e = np.exp(scores - scores.max(axis=-1, keepdims=True))     # every row keeps a key: finite max\n"
                 "    P = e / e.sum(axis=-1, keepdims=True)\n",
                 "    scores = (q @ np.swapaxes(K, -1, -2)) / np.sqrt(Dh)\n"
                 "    e = np.exp(scores - scores.max(axis=-1, keepdims=True))\n"
                 "    P = np.where(blocked, 0.0, e) / e.sum(axis=-1, keepdims=True)\n")]),
]

CORRECT = '''
import numpy as np


def kv_cache_attention(q, k_new, v_new, k_cache, v_cache):
    keys = np.concatenate((k_cache, k_new), axis=-2)
    values = np.concatenate((v_cache, v_new), axis=-2)
    n_new, n_all = q.shape[-2], keys.shape[-2]
    past = n_all - n_new
    logits = np.einsum("bhsd,bhtd->bhst", q, keys) / np.sqrt(q.shape[-1])
    rows = past + np.arange(n_new)[:, None]
    cols = np.arange(n_all)[None, :]
    logits = np.where(cols <= rows, logits, -np.inf)
    logits = logits - np.max(logits, axis=-1, keepdims=True)
    w = np.exp(logits)
    w = w / np.sum(w, axis=-1, keepdims=True)
    return np.einsum("bhst,bhtv->bhsv", w, values), keys, values
'''
