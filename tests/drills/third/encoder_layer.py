"""Third-set mistakes for encoder_layer."""

MISTAKES = [
    dict(label="b1 added after the ReLU instead of before it",
         keywords=["b1", "bias", "after the relu"],
         patch=[("a = x @ p[\"W1\"].T + p[\"b1\"]                                           # (B, S, F)\n    r = np.maximum(a, 0.0)",
                 "a = x @ p[\"W1\"].T                                           # (B, S, F)\n    r = np.maximum(a, 0.0) + p[\"b1\"]")]),
    dict(label="post-LN forward: the feed-forward's residual dropped (LN2(FF(h)))",
         keywords=["residual", "skip"],
         patch=[("y, c_n2 = _ln_forward(h + f, p[\"gamma2\"], p[\"beta2\"])", "y, c_n2 = _ln_forward(f, p[\"gamma2\"], p[\"beta2\"])")]),
    dict(label="dv = P dctx in the attention backward (P not transposed)",
         keywords=["transpos", "p^t", "value"],
         patch=[("dvh = np.swapaxes(P, -1, -2) @ dctx", "dvh = P @ dctx")]),
    dict(label="the norm_first flag read inverted (pre-LN computed for post-LN and vice versa)",
         keywords=["norm_first", "pre-ln", "post-ln", "flag"],
         patch=[("    p = params\n    if norm_first:", "    p = params\n    if not norm_first:")]),
]

CORRECT = '''
import numpy as np


def _ln(z, w, b):
    mu = z.mean(-1, keepdims=True)
    sd = np.sqrt(((z - mu) ** 2).mean(-1, keepdims=True) + 1e-5)
    zn = (z - mu) / sd
    return zn * w + b, (zn, sd, w)


def _ln_back(gy, st):
    zn, sd, w = st
    gz = gy * w
    d = zn.shape[-1]
    gx = (d * gz - gz.sum(-1, keepdims=True) - zn * (gz * zn).sum(-1, keepdims=True)) / (d * sd)
    return gx, (gy * zn).sum(axis=(0, 1)), gy.sum(axis=(0, 1))


def _attn(x, p, h, mask):
    b, s, d = x.shape
    k = d // h
    Q, K, V = ((x @ p[n].T).reshape(b, s, h, k) for n in ("Wq", "Wk", "Wv"))
    a = np.einsum("bqhd,bkhd->bhqk", Q, K) / np.sqrt(k)
    ok = np.ones(a.shape, dtype=bool) if mask is None else np.broadcast_to(~mask, a.shape)
    w = np.where(ok, np.exp(np.where(ok, a, -1e300) - np.where(ok, a, -1e300).max(-1, keepdims=True)), 0.0)
    tot = w.sum(-1, keepdims=True)
    w = np.divide(w, tot, out=np.zeros_like(w), where=tot > 0)
    ctx = np.einsum("bhqk,bkhd->bqhd", w, V).reshape(b, s, d)
    return ctx @ p["Wo"].T, (x, Q, K, V, w, ctx, h)


def _attn_back(gy, st, p, g):
    x, Q, K, V, w, ctx, h = st
    b, s, d = x.shape
    k = d // h
    g["Wo"] = np.einsum("bso,bsi->oi", gy, ctx)
    gc = (gy @ p["Wo"]).reshape(b, s, h, k)
    gV = np.einsum("bhqk,bqhd->bkhd", w, gc).reshape(b, s, d)
    gw = np.einsum("bqhd,bkhd->bhqk", gc, V)
    ga = w * (gw - (gw * w).sum(-1, keepdims=True)) / np.sqrt(k)
    gQ = np.einsum("bhqk,bkhd->bqhd", ga, K).reshape(b, s, d)
    gK = np.einsum("bhqk,bqhd->bkhd", ga, Q).reshape(b, s, d)
    for name, gr in (("Wq", gQ), ("Wk", gK), ("Wv", gV)):
        g[name] = np.einsum("bso,bsi->oi", gr, x)
    return gQ @ p["Wq"] + gK @ p["Wk"] + gV @ p["Wv"]


def _ff(z, p):
    pre = z @ p["W1"].T + p["b1"]
    act = np.where(pre > 0, pre, 0.0)
    return act @ p["W2"].T + p["b2"], (z, pre, act)


def _ff_back(gy, st, p, g):
    z, pre, act = st
    g["W2"] = np.einsum("bso,bsi->oi", gy, act)
    g["b2"] = gy.sum(axis=(0, 1))
    gp = np.where(pre > 0, gy @ p["W2"], 0.0)
    g["W1"] = np.einsum("bso,bsi->oi", gp, z)
    g["b1"] = gp.sum(axis=(0, 1))
    return gp @ p["W1"]


def encoder_layer_forward(x, params, num_heads, mask=None, norm_first=False):
    p = params
    if not norm_first:
        a, sa = _attn(x, p, num_heads, mask)
        h, s1 = _ln(x + a, p["gamma1"], p["beta1"])
        f, sf = _ff(h, p)
        y, s2 = _ln(h + f, p["gamma2"], p["beta2"])
        return y, ("post", p, sa, s1, sf, s2)
    n1, s1 = _ln(x, p["gamma1"], p["beta1"])
    a, sa = _attn(n1, p, num_heads, mask)
    h = x + a
    n2, s2 = _ln(h, p["gamma2"], p["beta2"])
    f, sf = _ff(n2, p)
    return h + f, ("pre", p, sa, s1, sf, s2)


def encoder_layer_backward(dout, cache):
    kind, p, sa, s1, sf, s2 = cache
    g = {}
    if kind == "post":
        d2, g["gamma2"], g["beta2"] = _ln_back(dout, s2)
        dh = d2 + _ff_back(d2, sf, p, g)
        d1, g["gamma1"], g["beta1"] = _ln_back(dh, s1)
        return d1 + _attn_back(d1, sa, p, g), g
    dn2, g["gamma2"], g["beta2"] = _ln_back(_ff_back(dout, sf, p, g), s2)
    dh = dout + dn2
    dn1, g["gamma1"], g["beta1"] = _ln_back(_attn_back(dh, sa, p, g), s1)
    return dh + dn1, g
'''
