"""Third-set mistakes for scaled_dot_product_attention."""

MISTAKES = [
    dict(label="dv multiplied by the scale",
         keywords=["scale", "value gradient"],
         patch=[("dv = np.swapaxes(P, -1, -2) @ dout ", "dv = scale * (np.swapaxes(P, -1, -2) @ dout) ")]),
    dict(label="masked scores set to 0 instead of -inf",
         keywords=["-inf", "fill value", "zero"],
         patch=[("scores = np.where(blocked, -np.inf, scores)", "scores = np.where(blocked, 0.0, scores)")]),
    dict(label="the scale applied twice in the backward (in dA and again in dq, dk)",
         keywords=["twice", "scale", "double"],
         patch=[("dA = P * (dP - np.sum(dP * P, axis=-1, keepdims=True))  ", "dA = P * (dP - np.sum(dP * P, axis=-1, keepdims=True)) * scale  ")]),
    dict(label="the cache keeps the unnormalised exponentials instead of P",
         keywords=["unnormalised", "exponentials", "normalis"],
         patch=[("return out, (q, k, v, P, scale)", "return out, (q, k, v, e, scale)")]),
]

CORRECT = '''
import numpy as np


def attention_forward(q, k, v, mask=None, causal=False):
    S, T, Dh = q.shape[-2], k.shape[-2], q.shape[-1]
    a = np.einsum("...sd,...td->...st", q, k) / np.sqrt(Dh)
    allowed = np.ones((S, T), dtype=bool)
    if causal:
        allowed = np.tril(allowed)
    if mask is not None:
        allowed = allowed & ~np.asarray(mask, dtype=bool)
    allowed = np.broadcast_to(allowed, a.shape)
    row_max = np.max(np.where(allowed, a, -np.inf), axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)
    ex = np.zeros_like(a)
    np.exp(a - row_max, out=ex, where=allowed)
    z = ex.sum(-1, keepdims=True)
    P = np.divide(ex, z, out=np.zeros_like(ex), where=z > 0)
    return np.einsum("...st,...tv->...sv", P, v), (q, k, v, P)


def attention_backward(dout, cache):
    q, k, v, P = cache
    c = 1.0 / np.sqrt(q.shape[-1])
    dv = np.einsum("...st,...sv->...tv", P, dout)
    dP = np.einsum("...sv,...tv->...st", dout, v)
    dA = P * dP - P * np.einsum("...st,...st->...s", P, dP)[..., None]
    dq = c * np.einsum("...st,...td->...sd", dA, k)
    dk = c * np.einsum("...st,...sd->...td", dA, q)
    return dq, dk, dv
'''
