"""Third-set mistakes for multi_head_attention."""

MISTAKES = [
    dict(label="causal mask blocks the past (tril) instead of the future",
         keywords=["causal", "future", "past"],
         patch=[("np.triu(np.ones((S, S), dtype=bool), k=1)", "np.tril(np.ones((S, S), dtype=bool), k=-1)")]),
    dict(label="scale 1/Dh instead of 1/sqrt(Dh)",
         keywords=["scale", "1/dh", "sqrt"],
         patch=[("scale = 1.0 / np.sqrt(Dh)", "scale = 1.0 / Dh")]),
    dict(label="dx misses the value path (dv @ Wv)",
         keywords=["value path", "dv @ wv", "paths"],
         patch=[("dx = dq @ Wq + dk @ Wk + dv @ Wv ", "dx = dq @ Wq + dk @ Wk ")]),
    dict(label="dWk computed from the query gradient dq instead of dk",
         keywords=["dwk", "query gradient", "dq instead of dk"],
         patch=[("dWk = dk.reshape(-1, D).T @ x2", "dWk = dq.reshape(-1, D).T @ x2")]),
]

CORRECT = '''
import numpy as np


def mha_forward(x, Wq, Wk, Wv, Wo, num_heads, mask=None, causal=False):
    B, S, D = x.shape
    H = num_heads
    Dh = D // H
    heads = [(x @ W.T).reshape(B, S, H, Dh) for W in (Wq, Wk, Wv)]
    Q, K, V = (np.moveaxis(t, 2, 1) for t in heads)
    logits = np.einsum("bhid,bhjd->bhij", Q, K) * Dh ** -0.5
    blocked = np.zeros((S, S), dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    if causal:
        blocked = blocked | (np.arange(S)[None, :] > np.arange(S)[:, None])
    logits = np.where(blocked, -np.inf, logits)
    finite = np.isfinite(logits)
    top = np.max(np.where(finite, logits, -1e300), axis=-1, keepdims=True)
    w = np.where(finite, np.exp(np.where(finite, logits, 0.0) - top), 0.0)
    tot = w.sum(-1, keepdims=True)
    w = w / np.where(tot > 0, tot, 1.0)
    ctx = np.moveaxis(np.einsum("bhij,bhjd->bhid", w, V), 1, 2).reshape(B, S, D)
    return ctx @ Wo.T, (x, (Wq, Wk, Wv, Wo), Q, K, V, w, ctx, H)


def mha_backward(dout, cache):
    x, (Wq, Wk, Wv, Wo), Q, K, V, w, ctx, H = cache
    B, S, D = x.shape
    Dh = D // H
    dWo = np.einsum("bso,bsi->oi", dout, ctx)
    g = np.moveaxis((dout @ Wo).reshape(B, S, H, Dh), 2, 1)
    dV = np.einsum("bhij,bhid->bhjd", w, g)
    dw = np.einsum("bhid,bhjd->bhij", g, V)
    da = w * (dw - (dw * w).sum(-1, keepdims=True)) * Dh ** -0.5
    dQ = np.einsum("bhij,bhjd->bhid", da, K)
    dK = np.einsum("bhij,bhid->bhjd", da, Q)
    merged = [np.moveaxis(t, 1, 2).reshape(B, S, D) for t in (dQ, dK, dV)]
    grads = [np.einsum("bso,bsi->oi", m, x) for m in merged]
    dx = sum(m @ W for m, W in zip(merged, (Wq, Wk, Wv)))
    return (dx, *grads, dWo)
'''
