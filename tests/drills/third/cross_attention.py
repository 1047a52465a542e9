"""Third-set mistakes for cross_attention."""

MISTAKES = [
    dict(label="dWo transposed (ctx^T dout instead of dout^T ctx)",
         keywords=["transpos", "dwo"],
         patch=[("dWo = dout.reshape(-1, D).T @ ctx.reshape(-1, D)", "dWo = ctx.reshape(-1, D).T @ dout.reshape(-1, D)")]),
    dict(label="padded memory keys given score 0 instead of -inf",
         keywords=["-inf", "fill value", "filled with 0", "zero score"],
         patch=[("scores = np.where(memory_key_padding_mask[:, None, None, :], -np.inf, scores)", "scores = np.where(memory_key_padding_mask[:, None, None, :], 0.0, scores)")]),
    dict(label="dx with Wq transposed (dq Wq^T instead of dq Wq)",
         keywords=["transpos", "wq"],
         patch=[("dx = dq @ Wq\n", "dx = dq @ Wq.T\n")]),
    dict(label="heads split from interleaved features (reshape to (Dh, H) instead of (H, Dh))",
         keywords=["split", "heads", "interleav"],
         patch=[("return x.reshape(B, L, H, D // H).transpose(0, 2, 1, 3)", "return x.reshape(B, L, D // H, H).transpose(0, 3, 1, 2)")]),
]

CORRECT = '''
import numpy as np


def _heads(t, h):
    b, n, d = t.shape
    return np.stack(np.split(t, h, axis=-1), axis=1)          # (b, h, n, d/h)


def _unheads(t):
    return np.concatenate(list(np.moveaxis(t, 1, 0)), axis=-1)  # (b, n, d)


def cross_attention_forward(x, memory, Wq, Wk, Wv, Wo, num_heads, memory_key_padding_mask=None):
    h = num_heads
    Q, K, V = _heads(x @ Wq.T, h), _heads(memory @ Wk.T, h), _heads(memory @ Wv.T, h)
    c = (x.shape[-1] // h) ** -0.5
    a = np.einsum("bhsd,bhtd->bhst", Q, K) * c
    ok = np.ones(a.shape, dtype=bool)
    if memory_key_padding_mask is not None:
        ok = np.broadcast_to(~memory_key_padding_mask[:, None, None, :], a.shape)
    a = np.where(ok, a, -np.inf)
    top = np.max(np.where(ok, a, -1e300), axis=-1, keepdims=True)
    w = np.where(ok, np.exp(a - top), 0.0)
    tot = w.sum(-1, keepdims=True)
    w = w / np.where(tot > 0, tot, 1.0)
    ctx = _unheads(np.einsum("bhst,bhtd->bhsd", w, V))
    return ctx @ Wo.T, dict(x=x, mem=memory, W=(Wq, Wk, Wv, Wo), Q=Q, K=K, V=V, w=w, ctx=ctx, c=c, h=h)


def cross_attention_backward(dout, cache):
    Wq, Wk, Wv, Wo = cache["W"]
    x, mem, w, c, h = cache["x"], cache["mem"], cache["w"], cache["c"], cache["h"]
    dWo = np.einsum("bso,bsi->oi", dout, cache["ctx"])
    g = _heads(dout @ Wo, h)
    dV = np.einsum("bhst,bhsd->bhtd", w, g)
    dw = np.einsum("bhsd,bhtd->bhst", g, cache["V"])
    da = w * (dw - (dw * w).sum(-1, keepdims=True)) * c
    dQ = _unheads(np.einsum("bhst,bhtd->bhsd", da, cache["K"]))
    dK = _unheads(np.einsum("bhst,bhsd->bhtd", da, cache["Q"]))
    dV = _unheads(dV)
    dWq = np.einsum("bso,bsi->oi", dQ, x)
    dWk = np.einsum("bto,bti->oi", dK, mem)
    dWv = np.einsum("bto,bti->oi", dV, mem)
    return dQ @ Wq, dK @ Wk + dV @ Wv, dWq, dWk, dWv, dWo
'''
