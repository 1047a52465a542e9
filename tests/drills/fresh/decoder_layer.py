"""Fresh unlisted mistakes for decoder_layer."""

MISTAKES = [
    dict(label="dmemory misses the value path (dv of the cross-attention)",
         keywords=["value", "path", "dmemory"],
         patch=[("dmemory = dk_ca + dv_ca ", "dmemory = dk_ca ")]),
    dict(label="the memory padding mask laid along the query axis instead of the key axis",
         keywords=["axis", "key axis", "query", "padding"],
         patch=[("pad = memory_key_padding_mask[:, None, None, :] ", "pad = memory_key_padding_mask[:, None, :, None] ")]),
    dict(label="the feed-forward's residual adds h1 instead of h2",
         keywords=["residual", "h1", "skip"],
         patch=[("y, c_n3 = _ln_forward(h2 + f, p[\"gamma3\"], p[\"beta3\"])", "y, c_n3 = _ln_forward(h1 + f, p[\"gamma3\"], p[\"beta3\"])")]),
    dict(label="dtgt misses the self-attention's residual (dz1)",
         keywords=["residual", "skip", "dtgt"],
         patch=[("dtgt = dz1 + dq_sa + dk_sa + dv_sa ", "dtgt = dq_sa + dk_sa + dv_sa ")]),
    dict(label="the target mask's polarity inverted (True read as may attend)",
         keywords=["mask", "polarity", "invert"],
         patch=[("num_heads, tgt_mask)", "num_heads, None if tgt_mask is None else ~tgt_mask)")]),
    dict(label="the ReLU backward multiplies by the pre-activation instead of the 0/1 gate",
         keywords=["relu", "derivative", "gate", "indicator"],
         patch=[("da = dr * (a > 0) ", "da = dr * np.maximum(a, 0.0) ")]),
]

CORRECT = '''
import numpy as np


def _norm(z, w, b):
    mu = z.mean(-1, keepdims=True)
    inv = 1.0 / np.sqrt(((z - mu) ** 2).mean(-1, keepdims=True) + 1e-5)
    zn = (z - mu) * inv
    return zn * w + b, (zn, inv, w)


def _norm_grad(gy, st):
    zn, inv, w = st
    gz = gy * w
    gx = inv * (gz - gz.mean(-1, keepdims=True) - zn * (gz * zn).mean(-1, keepdims=True))
    return gx, np.einsum("bsd,bsd->d", gy, zn), gy.sum(axis=(0, 1))


def _attend(xq, xkv, Ws, h, blocked):
    Wq, Wk, Wv, Wo = Ws
    b, s, d = xq.shape
    t, k = xkv.shape[1], d // h
    Q = np.einsum("bsd,ed->bse", xq, Wq).reshape(b, s, h, k)
    K = np.einsum("btd,ed->bte", xkv, Wk).reshape(b, t, h, k)
    V = np.einsum("btd,ed->bte", xkv, Wv).reshape(b, t, h, k)
    a = np.einsum("bqhd,bkhd->bhqk", Q, K) / np.sqrt(k)
    ok = np.ones(a.shape, dtype=bool) if blocked is None else np.broadcast_to(~blocked, a.shape)
    a = np.where(ok, a, -1e300)
    w = np.where(ok, np.exp(a - a.max(-1, keepdims=True)), 0.0)
    tot = w.sum(-1, keepdims=True)
    w = np.divide(w, tot, out=np.zeros_like(w), where=tot > 0)
    ctx = np.einsum("bhqk,bkhd->bqhd", w, V).reshape(b, s, d)
    return ctx @ Wo.T, (xq, xkv, Q, K, V, w, ctx)


def _attend_grad(gy, st, Ws):
    Wq, Wk, Wv, Wo = Ws
    xq, xkv, Q, K, V, w, ctx = st
    b, s, h, k = Q.shape
    t = K.shape[1]
    gWo = np.einsum("bsd,bse->de", gy, ctx)
    gctx = (gy @ Wo).reshape(b, s, h, k)
    gV = np.einsum("bhqk,bqhd->bkhd", w, gctx).reshape(b, t, h * k)
    gw = np.einsum("bqhd,bkhd->bhqk", gctx, V)
    ga = w * (gw - (gw * w).sum(-1, keepdims=True)) / np.sqrt(k)
    gQ = np.einsum("bhqk,bkhd->bqhd", ga, K).reshape(b, s, h * k)
    gK = np.einsum("bhqk,bqhd->bkhd", ga, Q).reshape(b, t, h * k)
    grads = (np.einsum("bse,bsd->ed", gQ, xq), np.einsum("bte,btd->ed", gK, xkv),
             np.einsum("bte,btd->ed", gV, xkv), gWo)
    return gQ @ Wq, gK @ Wk + gV @ Wv, grads


def _mlp(z, P):
    pre = z @ P["W1"].T + P["b1"]
    act = np.where(pre > 0, pre, 0.0)
    return act @ P["W2"].T + P["b2"], (z, pre, act)


def _mlp_grad(gy, st, P, G):
    z, pre, act = st
    G["W2"] = np.einsum("bsf,bse->fe", gy, act)
    G["b2"] = gy.sum(axis=(0, 1))
    gpre = np.where(pre > 0, gy @ P["W2"], 0.0)
    G["W1"] = np.einsum("bsf,bse->fe", gpre, z)
    G["b1"] = gpre.sum(axis=(0, 1))
    return gpre @ P["W1"]


SELF = ("Wq", "Wk", "Wv", "Wo")
CROSS = ("cWq", "cWk", "cWv", "cWo")


def decoder_layer_forward(tgt, memory, params, num_heads, tgt_mask=None,
                          memory_key_padding_mask=None):
    P = params
    pad = None
    if memory_key_padding_mask is not None:
        pad = memory_key_padding_mask[:, np.newaxis, np.newaxis, :]
    sa, st_sa = _attend(tgt, tgt, [P[n] for n in SELF], num_heads, tgt_mask)
    h1, st_1 = _norm(tgt + sa, P["gamma1"], P["beta1"])
    ca, st_ca = _attend(h1, memory, [P[n] for n in CROSS], num_heads, pad)
    h2, st_2 = _norm(h1 + ca, P["gamma2"], P["beta2"])
    ff, st_ff = _mlp(h2, P)
    y, st_3 = _norm(h2 + ff, P["gamma3"], P["beta3"])
    return y, [P, st_sa, st_1, st_ca, st_2, st_ff, st_3]


def decoder_layer_backward(dout, cache):
    P, st_sa, st_1, st_ca, st_2, st_ff, st_3 = cache
    G = {}
    g3, G["gamma3"], G["beta3"] = _norm_grad(dout, st_3)
    gh2 = g3 + _mlp_grad(g3, st_ff, P, G)
    g2, G["gamma2"], G["beta2"] = _norm_grad(gh2, st_2)
    gq, gmem, cw = _attend_grad(g2, st_ca, [P[n] for n in CROSS])
    G.update(dict(zip(CROSS, cw)))
    g1, G["gamma1"], G["beta1"] = _norm_grad(g2 + gq, st_1)
    gq_s, gkv_s, sw = _attend_grad(g1, st_sa, [P[n] for n in SELF])
    G.update(dict(zip(SELF, sw)))
    return g1 + gq_s + gkv_s, gmem, G
'''
