"""Unlisted mistakes for multi_head_attention."""

MISTAKES = [
    dict(label="heads split without the transpose (reshape straight to (B, H, S, Dh))",
         keywords=["split", "head", "transpose"],
         patch=[("    return x.reshape(B, S, H, D // H).transpose(0, 2, 1, 3)\n", "    return x.reshape(B, H, S, D // H)\n"),
                ("    return x.transpose(0, 2, 1, 3).reshape(B, S, H * Dh)\n", "    return x.reshape(B, S, H * Dh)\n")]),
    dict(label="scale 1/sqrt(D) instead of 1/sqrt(Dh)",
         keywords=["sqrt", "scale", "dh"],
         patch=[("scale = 1.0 / np.sqrt(Dh)", "scale = 1.0 / np.sqrt(D)")]),
    dict(label="dx misses the key path (dk @ Wk)",
         keywords=["dx", "path", "key", "missing term"],
         patch=[("dx = dq @ Wq + dk @ Wk + dv @ Wv ", "dx = dq @ Wq + dv @ Wv ")]),
    dict(label="dWo transposed (ctx^T dout)",
         keywords=["transpose", "dwo"],
         patch=[("dWo = dout.reshape(-1, D).T @ ctx.reshape(-1, D)", "dWo = ctx.reshape(-1, D).T @ dout.reshape(-1, D)")]),
    dict(label="dctx uses Wo^T (dout @ Wo.T)",
         keywords=["transpose", "wo", "output projection"],
         patch=[("dctx = _split_heads(dout @ Wo, H)", "dctx = _split_heads(dout @ Wo.T, H)")]),
    dict(label="the softmax's rowsum term dropped",
         keywords=["rowsum", "row sum", "softmax"],
         patch=[("dA = P * (dP - np.sum(dP * P, axis=-1, keepdims=True)) * scale", "dA = P * dP * scale")]),
    dict(label="causal mask blocks the diagonal",
         keywords=["diagonal", "causal", "k=0"],
         patch=[("np.triu(np.ones((S, S), dtype=bool), k=1)", "np.triu(np.ones((S, S), dtype=bool), k=0)")]),
]

CORRECT = '''
import numpy as np


def mha_forward(x, Wq, Wk, Wv, Wo, num_heads, mask=None, causal=False):
    B, S, D = x.shape
    h = num_heads
    dh = D // h
    heads = lambda t: np.einsum("bshd->bhsd", t.reshape(B, S, h, dh))
    Q, K, V = heads(np.einsum("bsd,ed->bse", x, Wq)), heads(np.einsum("bsd,ed->bse", x, Wk)), heads(np.einsum("bsd,ed->bse", x, Wv))
    bad = np.zeros((S, S), dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    if causal:
        bad = bad | (np.arange(S)[None, :] > np.arange(S)[:, None])
    sc = np.einsum("bhid,bhjd->bhij", Q, K) / np.sqrt(dh)
    sc = np.where(bad, -np.inf, sc)
    top = np.max(sc, axis=-1, keepdims=True)
    top[~np.isfinite(top)] = 0.0
    ex = np.exp(sc - top)
    tot = ex.sum(-1, keepdims=True)
    tot[tot == 0] = 1.0
    A = ex / tot
    ctx = np.einsum("bhij,bhjd->bhid", A, V)
    merged = np.einsum("bhsd->bshd", ctx).reshape(B, S, D)
    return merged @ Wo.T, dict(x=x, W=(Wq, Wk, Wv, Wo), Q=Q, K=K, V=V, A=A, merged=merged, h=h)


def mha_backward(dout, cache):
    x, (Wq, Wk, Wv, Wo), Q, K, V, A, merged, h = (cache[n] for n in ("x", "W", "Q", "K", "V", "A", "merged", "h"))
    B, S, D = x.shape
    dh = D // h
    heads = lambda t: np.einsum("bshd->bhsd", t.reshape(B, S, h, dh))
    unheads = lambda t: np.einsum("bhsd->bshd", t).reshape(B, S, D)
    dWo = np.einsum("bsd,bse->de", dout, merged)
    dctx = heads(dout @ Wo)
    dV = np.einsum("bhij,bhid->bhjd", A, dctx)
    dA = np.einsum("bhid,bhjd->bhij", dctx, V)
    dsc = A * (dA - (dA * A).sum(-1, keepdims=True)) / np.sqrt(dh)
    dQ = unheads(np.einsum("bhij,bhjd->bhid", dsc, K))
    dK = unheads(np.einsum("bhij,bhid->bhjd", dsc, Q))
    dV = unheads(dV)
    grads = [np.einsum("bse,bsd->ed", g, x) for g in (dQ, dK, dV)]
    dx = dQ @ Wq + dK @ Wk + dV @ Wv
    return (dx, *grads, dWo)
'''
