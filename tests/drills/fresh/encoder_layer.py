"""Fresh unlisted mistakes for encoder_layer."""

MISTAKES = [
    dict(label="b1's gradient summed from the gradient before the ReLU gate (dr, not da)",
         keywords=["b1", "relu", "bias", "gate"],
         patch=[("g[\"b1\"] = da.reshape(-1, da.shape[-1]).sum(0)", "g[\"b1\"] = dr.reshape(-1, dr.shape[-1]).sum(0)")]),
    dict(label="pre-LN: the residual gradient dropped around self-attention (dx = LN1's dx only)",
         keywords=["residual", "skip", "pre-ln"],
         patch=[("        dx = dh + dn1 ", "        dx = dn1 ")]),
    dict(label="pre-LN forward: the second residual adds x instead of h",
         keywords=["residual", "pre-ln", "skip"],
         patch=[("        y = h + f\n", "        y = x + f\n")]),
    dict(label="the attention mask's polarity inverted (True read as may attend)",
         keywords=["mask", "polarity", "invert"],
         patch=[("        scores = np.where(mask, -np.inf, scores)", "        scores = np.where(~mask, -np.inf, scores)")]),
    dict(label="the 1/sqrt(Dh) scale missing from the attention backward's dA",
         keywords=["scale", "sqrt"],
         patch=[("dA = P * (dP - np.sum(dP * P, -1, keepdims=True)) * scale", "dA = P * (dP - np.sum(dP * P, -1, keepdims=True))")]),
    dict(label="LayerNorm eps 1e-6 instead of torch's 1e-5",
         keywords=["eps", "epsilon"],
         patch=[("EPS = 1e-5", "EPS = 1e-6")]),
]

CORRECT = '''
import numpy as np


def _ln(z, w, b):
    m = np.mean(z, axis=-1, keepdims=True)
    sd = np.sqrt(np.var(z, axis=-1, keepdims=True) + 1e-5)
    zn = (z - m) / sd
    return zn * w + b, (zn, sd, w)


def _ln_grad(gy, st):
    zn, sd, w = st
    d = zn.shape[-1]
    gz = gy * w
    gx = (gz - gz.mean(-1, keepdims=True) - zn * (gz * zn).mean(-1, keepdims=True)) / sd
    return gx, (gy * zn).reshape(-1, d).sum(0), gy.reshape(-1, d).sum(0)


def _mha(z, P, h, mask):
    b, s, d = z.shape
    k = d // h
    heads = lambda W: np.einsum("bsd,ed->bse", z, W).reshape(b, s, h, k)
    Q, K, V = heads(P["Wq"]), heads(P["Wk"]), heads(P["Wv"])
    a = np.einsum("bqhd,bkhd->bhqk", Q, K) / np.sqrt(k)
    ok = np.ones(a.shape, dtype=bool) if mask is None else np.broadcast_to(~mask, a.shape)
    a = np.where(ok, a, -1e300)
    w = np.where(ok, np.exp(a - a.max(-1, keepdims=True)), 0.0)
    t = w.sum(-1, keepdims=True)
    w = np.divide(w, t, out=np.zeros_like(w), where=t > 0)
    ctx = np.einsum("bhqk,bkhd->bqhd", w, V).reshape(b, s, d)
    return ctx @ P["Wo"].T, (z, Q, K, V, w, ctx)


def _mha_grad(gy, st, P, G):
    z, Q, K, V, w, ctx = st
    b, s, h, k = Q.shape
    G["Wo"] = np.einsum("bsd,bse->de", gy, ctx)
    gctx = (gy @ P["Wo"]).reshape(b, s, h, k)
    gV = np.einsum("bhqk,bqhd->bkhd", w, gctx).reshape(b, s, h * k)
    gw = np.einsum("bqhd,bkhd->bhqk", gctx, V)
    ga = w * (gw - (gw * w).sum(-1, keepdims=True)) / np.sqrt(k)
    gQ = np.einsum("bhqk,bkhd->bqhd", ga, K).reshape(b, s, h * k)
    gK = np.einsum("bhqk,bqhd->bkhd", ga, Q).reshape(b, s, h * k)
    out = 0.0
    for name, g in (("Wq", gQ), ("Wk", gK), ("Wv", gV)):
        G[name] = np.einsum("bse,bsd->ed", g, z)
        out = out + g @ P[name]
    return out


def _ff(z, P):
    pre = z @ P["W1"].T + P["b1"]
    act = pre * (pre > 0)
    return act @ P["W2"].T + P["b2"], (z, pre, act)


def _ff_grad(gy, st, P, G):
    z, pre, act = st
    G["W2"] = np.einsum("bsf,bse->fe", gy, act)
    G["b2"] = np.einsum("bsf->f", gy)
    gpre = (gy @ P["W2"]) * (pre > 0)
    G["W1"] = np.einsum("bsf,bse->fe", gpre, z)
    G["b1"] = np.einsum("bsf->f", gpre)
    return gpre @ P["W1"]


def encoder_layer_forward(x, params, num_heads, mask=None, norm_first=False):
    P = params
    if not norm_first:
        att, s_att = _mha(x, P, num_heads, mask)
        h, s_ln1 = _ln(x + att, P["gamma1"], P["beta1"])
        ff, s_ff = _ff(h, P)
        y, s_ln2 = _ln(h + ff, P["gamma2"], P["beta2"])
    else:
        z1, s_ln1 = _ln(x, P["gamma1"], P["beta1"])
        att, s_att = _mha(z1, P, num_heads, mask)
        h = x + att
        z2, s_ln2 = _ln(h, P["gamma2"], P["beta2"])
        ff, s_ff = _ff(z2, P)
        y = h + ff
    return y, dict(pre=norm_first, P=P, att=s_att, ln1=s_ln1, ff=s_ff, ln2=s_ln2)


def encoder_layer_backward(dout, cache):
    P, G = cache["P"], {}
    if cache["pre"]:
        gz2, G["gamma2"], G["beta2"] = _ln_grad(_ff_grad(dout, cache["ff"], P, G), cache["ln2"])
        gh = dout + gz2
        gz1, G["gamma1"], G["beta1"] = _ln_grad(_mha_grad(gh, cache["att"], P, G), cache["ln1"])
        return gh + gz1, G
    gs2, G["gamma2"], G["beta2"] = _ln_grad(dout, cache["ln2"])
    gh = gs2 + _ff_grad(gs2, cache["ff"], P, G)
    gs1, G["gamma1"], G["beta1"] = _ln_grad(gh, cache["ln1"])
    return gs1 + _mha_grad(gs1, cache["att"], P, G), G
'''
