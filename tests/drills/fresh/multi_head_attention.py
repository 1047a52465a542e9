"""Fresh unlisted mistakes for multi_head_attention."""

MISTAKES = [
    dict(label="dWq transposed (x^T dq instead of dq^T x)",
         keywords=["transpose", "dwq"],
         patch=[("dWq = dq.reshape(-1, D).T @ x2", "dWq = x2.T @ dq.reshape(-1, D)")]),
    dict(label="dx misses the query path (dq @ Wq)",
         keywords=["query", "path", "dx"],
         patch=[("dx = dq @ Wq + dk @ Wk + dv @ Wv ", "dx = dk @ Wk + dv @ Wv ")]),
    dict(label="the mask's polarity inverted (True read as may attend)",
         keywords=["mask", "polarity", "invert", "true"],
         patch=[("        blocked = blocked | mask\n", "        blocked = blocked | ~mask\n")]),
    dict(label="heads merged with a plain reshape (no transpose back)",
         keywords=["merge", "heads", "transpose"],
         patch=[("    return x.transpose(0, 2, 1, 3).reshape(B, S, H * Dh)", "    return x.reshape(B, S, H * Dh)")]),
    dict(label="dv = P dctx (P not transposed)",
         keywords=["transpose", "dv", "p^t"],
         patch=[("dvh = np.swapaxes(P, -1, -2) @ dctx", "dvh = P @ dctx")]),
    dict(label="the 1/sqrt(Dh) scale missing from the backward's dA",
         keywords=["scale", "sqrt"],
         patch=[("dA = P * (dP - np.sum(dP * P, axis=-1, keepdims=True)) * scale", "dA = P * (dP - np.sum(dP * P, axis=-1, keepdims=True))")]),
]

CORRECT = '''
import numpy as np


def mha_forward(x, Wq, Wk, Wv, Wo, num_heads, mask=None, causal=False):
    b, s, d = x.shape
    dh = d // num_heads
    proj = lambda W: np.einsum("bsd,ed->bse", x, W).reshape(b, s, num_heads, dh)
    Q, K, V = proj(Wq), proj(Wk), proj(Wv)                       # (b, s, h, dh)
    z = np.einsum("bqhd,bkhd->bhqk", Q, K) / np.sqrt(dh)
    ok = np.ones((s, s), dtype=bool)
    if causal:
        ok = np.tril(ok)
    if mask is not None:
        ok = ok & ~mask
    z = np.where(ok, z, -1e300)
    w = np.where(ok, np.exp(z - z.max(axis=-1, keepdims=True)), 0.0)
    tot = w.sum(axis=-1, keepdims=True)
    w = np.divide(w, tot, out=np.zeros_like(w), where=tot > 0)
    ctx = np.einsum("bhqk,bkhd->bqhd", w, V).reshape(b, s, d)
    return np.einsum("bse,de->bsd", ctx, Wo), dict(x=x, W=(Wq, Wk, Wv, Wo), Q=Q, K=K, V=V, w=w,
                                                   ctx=ctx, dh=dh)


def mha_backward(dout, cache):
    Wq, Wk, Wv, Wo = cache["W"]
    x, Q, K, V, w, dh = cache["x"], cache["Q"], cache["K"], cache["V"], cache["w"], cache["dh"]
    b, s, d = x.shape
    h = d // dh
    dWo = np.einsum("bsd,bse->de", dout, cache["ctx"])
    dctx = (dout @ Wo).reshape(b, s, h, dh)
    dV = np.einsum("bhqk,bqhd->bkhd", w, dctx)
    dw = np.einsum("bqhd,bkhd->bhqk", dctx, V)
    dz = w * (dw - (dw * w).sum(-1, keepdims=True)) / np.sqrt(dh)
    dQ = np.einsum("bhqk,bkhd->bqhd", dz, K).reshape(b, s, d)
    dK = np.einsum("bhqk,bqhd->bkhd", dz, Q).reshape(b, s, d)
    dV = dV.reshape(b, s, d)
    grads = [np.einsum("bse,bsd->ed", g, x) for g in (dQ, dK, dV)]
    dx = dQ @ Wq + dK @ Wk + dV @ Wv
    return (dx, *grads, dWo)
'''
