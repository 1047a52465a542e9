"""Fresh unlisted mistakes for scaled_dot_product_attention."""

MISTAKES = [
    dict(label="fully masked rows not handled: the max and the sum of an all-masked row give NaN",
         keywords=["fully masked", "fully-masked", "all-masked", "nan"],
         patch=[("    m = np.where(np.isneginf(m), 0.0, m)\n", ""),
                ("P = e / np.where(s == 0, 1.0, s) ", "P = e / s ")]),
    dict(label="dv = P dout (P not transposed)",
         keywords=["transpose", "dv", "p^t"],
         patch=[("dv = np.swapaxes(P, -1, -2) @ dout ", "dv = P @ dout ")]),
    dict(label="the boolean mask combined with & instead of | (the mask never blocks anything)",
         keywords=["mask", "combin", "union"],
         patch=[("blocked = blocked | mask ", "blocked = blocked & mask ")]),
    dict(label="the softmax backward's row sum of dP alone (P factor missing)",
         keywords=["rowsum", "row sum", "softmax", "dp * p"],
         patch=[("dA = P * (dP - np.sum(dP * P, axis=-1, keepdims=True)) ", "dA = P * (dP - np.sum(dP, axis=-1, keepdims=True)) ")]),
    dict(label="dk misses the 1/sqrt(Dh) scale (dq keeps it)",
         keywords=["scale", "sqrt", "dk"],
         patch=[("dk = scale * (np.swapaxes(dA, -1, -2) @ q) ", "dk = np.swapaxes(dA, -1, -2) @ q ")]),
]

CORRECT = '''
import numpy as np


def attention_forward(q, k, v, mask=None, causal=False):
    n_q, n_k = q.shape[-2], k.shape[-2]
    allowed = np.ones((n_q, n_k), dtype=bool)
    if causal:
        allowed = np.tril(allowed)
    if mask is not None:
        allowed = allowed & ~np.asarray(mask, dtype=bool)
    logits = np.einsum("bhsd,bhtd->bhst", q, k) / np.sqrt(q.shape[-1])
    allowed = np.broadcast_to(allowed, logits.shape)
    safe = np.where(allowed, logits, -1e300)
    top = safe.max(axis=-1, keepdims=True)
    w = np.where(allowed, np.exp(safe - top), 0.0)
    tot = w.sum(axis=-1, keepdims=True)
    w = w / np.maximum(tot, np.finfo(float).tiny) * (tot > 0)
    return np.einsum("bhst,bhtv->bhsv", w, v), {"q": q, "k": k, "v": v, "w": w}


def attention_backward(dout, cache):
    q, k, v, w = cache["q"], cache["k"], cache["v"], cache["w"]
    c = q.shape[-1] ** -0.5
    dv = np.einsum("bhst,bhsv->bhtv", w, dout)
    dw = np.einsum("bhsv,bhtv->bhst", dout, v)
    dz = w * (dw - (dw * w).sum(axis=-1, keepdims=True))
    dq = c * np.einsum("bhst,bhtd->bhsd", dz, k)
    dk = c * np.einsum("bhst,bhsd->bhtd", dz, q)
    return dq, dk, dv
'''
