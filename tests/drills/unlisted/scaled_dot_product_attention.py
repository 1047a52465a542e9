"""Unlisted mistakes for scaled_dot_product_attention."""

MISTAKES = [
    dict(label="dk built from dP, skipping the softmax backward",
         keywords=["dk", "softmax"],
         patch=[("dk = scale * (np.swapaxes(dA, -1, -2) @ q)", "dk = scale * (np.swapaxes(dP, -1, -2) @ q)")]),
    dict(label="dq misses the 1/sqrt(Dh) scale in the backward",
         keywords=["sqrt", "scale"],
         patch=[("dq = scale * (dA @ k) ", "dq = (dA @ k) ")]),
    dict(label="mask applied with the wrong polarity (True = may attend)",
         keywords=["mask", "invert", "polarity"],
         patch=[("blocked = blocked | mask ", "blocked = blocked | ~mask ")]),
    dict(label="causal mask blocks the diagonal (triu k=0)",
         keywords=["diagonal", "causal", "k=0"],
         patch=[("np.triu(np.ones((S, T), dtype=bool), k=1)", "np.triu(np.ones((S, T), dtype=bool), k=0)")]),
    dict(label="dq sign flipped",
         keywords=["sign", "negat", "flip"],
         patch=[("dq = scale * (dA @ k) ", "dq = -scale * (dA @ k) ")]),
    dict(label="scale 1/sqrt(T) instead of 1/sqrt(Dh)",
         keywords=["sqrt", "scale", "dh"],
         patch=[("scale = 1.0 / np.sqrt(Dh)", "scale = 1.0 / np.sqrt(T)")]),
    dict(label="the softmax row sum taken over the query axis",
         keywords=["axis", "rowsum", "row sum"],
         patch=[("dA = P * (dP - np.sum(dP * P, axis=-1, keepdims=True))", "dA = P * (dP - np.sum(dP * P, axis=-2, keepdims=True))")]),
]

CORRECT = '''
import numpy as np


def attention_forward(q, k, v, mask=None, causal=False):
    d = q.shape[-1]
    c = d ** -0.5
    logits = np.einsum("...sd,...td->...st", q, k) * c
    allowed = np.ones(logits.shape[-2:], dtype=bool)
    if causal:
        allowed = np.tril(allowed)
    allowed = np.broadcast_to(allowed, logits.shape)
    if mask is not None:
        allowed = allowed & ~np.broadcast_to(mask, logits.shape)
    big = np.where(allowed, logits, -np.inf).max(axis=-1, keepdims=True)
    big = np.where(np.isfinite(big), big, 0.0)
    w = np.where(allowed, np.exp(np.where(allowed, logits, 0.0) - big), 0.0)
    total = w.sum(axis=-1, keepdims=True)
    w = np.divide(w, total, out=np.zeros_like(w), where=total > 0)
    return np.einsum("...st,...tv->...sv", w, v), (q, k, v, w, c)


def attention_backward(dout, cache):
    q, k, v, w, c = cache
    dv = np.einsum("...st,...sv->...tv", w, dout)
    dw = np.einsum("...sv,...tv->...st", dout, v)
    inner = np.einsum("...st,...st->...s", dw, w)[..., None]
    dlogits = w * (dw - inner) * c
    dq = np.einsum("...st,...td->...sd", dlogits, k)
    dk = np.einsum("...st,...sd->...td", dlogits, q)
    return dq, dk, dv
'''
