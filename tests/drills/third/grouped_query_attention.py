"""Third-set mistakes for grouped_query_attention."""

MISTAKES = [
    dict(label="causal mask aligned bottom-right (k = T - S + 1) instead of top-left",
         keywords=["bottom-right", "align", "top-left"],
         patch=[("np.triu(np.ones((S, T), dtype=bool), k=1)", "np.triu(np.ones((S, T), dtype=bool), k=T - S + 1)")]),
    dict(label="the softmax's max subtracted per key column (axis -2), not per row",
         keywords=["max", "axis", "per row"],
         patch=[("e = np.exp(scores - scores.max(axis=-1, keepdims=True))", "e = np.exp(scores - scores.max(axis=-2, keepdims=True))")]),
    dict(label="output heads merged in the wrong order (group axis before the key/value axis)",
         keywords=["head order", "heads", "reshape", "order"],
         patch=[("out = (P @ vg).reshape(B, Hq, S, -1)", "out = np.swapaxes(P @ vg, 1, 2).reshape(B, Hq, S, -1)")]),
    dict(label="scale 1/sqrt(Dv) (the value width) instead of 1/sqrt(Dh)",
         keywords=["value width", "1/sqrt(dv)", "scale"],
         patch=[("scale = 1.0 / np.sqrt(Dh)", "scale = 1.0 / np.sqrt(v.shape[-1])")]),
]

CORRECT = '''
import numpy as np


def gqa_forward(q, k, v, causal=False):
    B, Hq, S, Dh = q.shape
    Hkv, T = k.shape[1], k.shape[2]
    G = Hq // Hkv
    K = np.repeat(k, G, axis=1)
    V = np.repeat(v, G, axis=1)
    a = np.einsum("bhsd,bhtd->bhst", q, K) / np.sqrt(Dh)
    if causal:
        a = np.where(np.arange(T)[None, :] > np.arange(S)[:, None], -np.inf, a)
    a = a - a.max(-1, keepdims=True)
    w = np.exp(a)
    w = w / w.sum(-1, keepdims=True)
    return np.einsum("bhst,bhtd->bhsd", w, V), (q, K, V, w, G, Hkv)


def gqa_backward(dout, cache):
    q, K, V, w, G, Hkv = cache
    B, Hq, S, Dh = q.shape
    c = 1.0 / np.sqrt(Dh)
    dV = np.einsum("bhst,bhsd->bhtd", w, dout)
    dw = np.einsum("bhsd,bhtd->bhst", dout, V)
    da = w * (dw - (dw * w).sum(-1, keepdims=True))
    dq = c * np.einsum("bhst,bhtd->bhsd", da, K)
    dK = c * np.einsum("bhst,bhsd->bhtd", da, q)
    dk = dK.reshape(B, Hkv, G, *dK.shape[2:]).sum(axis=2)
    dv = dV.reshape(B, Hkv, G, *dV.shape[2:]).sum(axis=2)
    return dq, dk, dv
'''
