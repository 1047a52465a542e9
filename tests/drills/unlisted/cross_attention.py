"""Unlisted mistakes for cross_attention."""

MISTAKES = [
    dict(label="heads split without the transpose",
         keywords=["split", "head", "transpose"],
         patch=[("    return x.reshape(B, L, H, D // H).transpose(0, 2, 1, 3)\n", "    return x.reshape(B, H, L, D // H)\n"),
                ("    return x.transpose(0, 2, 1, 3).reshape(B, L, H * Dh)\n", "    return x.reshape(B, L, H * Dh)\n")]),
    dict(label="padding mask inverted (attends only to the padded positions)",
         keywords=["padding", "mask", "invert"],
         patch=[("scores = np.where(memory_key_padding_mask[:, None, None, :], -np.inf, scores)",
                 "scores = np.where(~memory_key_padding_mask[:, None, None, :], -np.inf, scores)")]),
    dict(label="padding mask never applied",
         keywords=["padding", "mask"],
         patch=[("        scores = np.where(memory_key_padding_mask[:, None, None, :], -np.inf, scores)\n", "        pass\n")]),
    dict(label="dmemory misses the value path (dv @ Wv)",
         keywords=["dmemory", "value", "path", "missing term"],
         patch=[("dmemory = dk @ Wk + dv @ Wv ", "dmemory = dk @ Wk ")]),
    dict(label="dWk computed from the value gradient dv instead of dk",
         keywords=["dwk", "dk", "value"],
         patch=[("dWk = dk.reshape(-1, D).T @ memory.reshape(-1, D)", "dWk = dv.reshape(-1, D).T @ memory.reshape(-1, D)")]),
    dict(label="scale 1/sqrt(D) instead of 1/sqrt(Dh)",
         keywords=["sqrt", "scale", "dh"],
         patch=[("scale = 1.0 / np.sqrt(D // H)", "scale = 1.0 / np.sqrt(D)")]),
    dict(label="the softmax's rowsum term dropped",
         keywords=["rowsum", "row sum", "softmax"],
         patch=[("dA = P * (dP - np.sum(dP * P, axis=-1, keepdims=True)) * scale", "dA = P * dP * scale")]),
]

CORRECT = '''
import numpy as np


def _heads(t, h):
    b, n, d = t.shape
    return t.reshape(b, n, h, d // h).swapaxes(1, 2)


def _unheads(t):
    b, h, n, dh = t.shape
    return t.swapaxes(1, 2).reshape(b, n, h * dh)


def cross_attention_forward(x, memory, Wq, Wk, Wv, Wo, num_heads, memory_key_padding_mask=None):
    q = _heads(np.matmul(x, Wq.T), num_heads)
    k = _heads(np.matmul(memory, Wk.T), num_heads)
    v = _heads(np.matmul(memory, Wv.T), num_heads)
    c = 1.0 / np.sqrt(q.shape[-1])
    logits = c * np.matmul(q, k.swapaxes(-1, -2))
    if memory_key_padding_mask is not None:
        logits = logits + np.where(memory_key_padding_mask, -np.inf, 0.0)[:, None, None, :]
    peak = logits.max(axis=-1, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0.0)
    w = np.exp(logits - peak)
    z = w.sum(axis=-1, keepdims=True)
    w = w / np.where(z > 0, z, 1.0)
    mixed = _unheads(np.matmul(w, v))
    return np.matmul(mixed, Wo.T), (x, memory, Wq, Wk, Wv, Wo, q, k, v, w, mixed, c, num_heads)


def cross_attention_backward(dout, cache):
    x, memory, Wq, Wk, Wv, Wo, q, k, v, w, mixed, c, h = cache
    flat = lambda t: t.reshape(-1, t.shape[-1])
    dWo = flat(dout).T @ flat(mixed)
    dmixed = _heads(dout @ Wo, h)
    dv = _unheads(w.swapaxes(-1, -2) @ dmixed)
    dw = dmixed @ v.swapaxes(-1, -2)
    dl = c * w * (dw - np.sum(w * dw, axis=-1, keepdims=True))
    dq = _unheads(dl @ k)
    dk = _unheads(dl.swapaxes(-1, -2) @ q)
    dx = dq @ Wq
    dmemory = dv @ Wv + dk @ Wk
    return dx, dmemory, flat(dq).T @ flat(x), flat(dk).T @ flat(memory), flat(dv).T @ flat(memory), dWo
'''
