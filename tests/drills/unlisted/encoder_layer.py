"""Unlisted mistakes for encoder_layer."""

MISTAKES = [
    dict(label="post-LN: the residual gradient dropped around the feed-forward (dh = FF's dx only)",
         keywords=["residual", "skip"],
         patch=[("dh = dz2 + _ffn_backward(dz2, c_f, p, g)", "dh = _ffn_backward(dz2, c_f, p, g)")]),
    dict(label="post-LN: the residual gradient dropped around self-attention",
         keywords=["residual", "skip"],
         patch=[("dx = dz1 + _attn_backward(dz1, c_a, p, g)", "dx = _attn_backward(dz1, c_a, p, g)")]),
    dict(label="heads split without the transpose (forward and backward)",
         keywords=["split", "head", "transpose"],
         patch=[("    split = lambda t: t.reshape(B, S, H, D // H).transpose(0, 2, 1, 3)   # (B, H, S, Dh)\n",
                 "    split = lambda t: t.reshape(B, H, S, D // H)\n"),
                ("    ctx = (P @ vh).transpose(0, 2, 1, 3).reshape(B, S, D)                 # merge heads\n",
                 "    ctx = (P @ vh).reshape(B, S, D)\n"),
                ("    split = lambda t: t.reshape(B, S, H, D // H).transpose(0, 2, 1, 3)\n    merge = lambda t: t.transpose(0, 2, 1, 3).reshape(B, S, D)\n",
                 "    split = lambda t: t.reshape(B, H, S, D // H)\n    merge = lambda t: t.reshape(B, S, D)\n")]),
    dict(label="ReLU backward gates on the output gradient instead of the pre-activation",
         keywords=["relu", "feed-forward", "ffn", "pre-activation"],
         patch=[("da = dr * (a > 0) ", "da = dr * (dr > 0) ")]),
    dict(label="pre-LN forward: the second residual adds the normed n2 instead of h",
         keywords=["pre-ln", "residual", "norm"],
         patch=[("        y = h + f\n", "        y = n2 + f\n")]),
    dict(label="dx through the attention misses the value path",
         keywords=["value", "path", "attention", "dx"],
         patch=[("    return dx_q + dx_k + dx_v                                             # x fed q, k and v\n",
                 "    return dx_q + dx_k\n")]),
    dict(label="the softmax's rowsum term dropped in the attention backward",
         keywords=["rowsum", "row sum", "softmax"],
         patch=[("dA = P * (dP - np.sum(dP * P, -1, keepdims=True)) * scale", "dA = P * dP * scale")]),
    dict(label="LayerNorm backward misses the -mean(dxhat) term",
         keywords=["layernorm", "norm", "mean(dxhat)", "ln"],
         patch=[("    dx = rstd * (dxhat - dxhat.mean(-1, keepdims=True)\n                 - xhat",
                 "    dx = rstd * (dxhat\n                 - xhat")]),
]

CORRECT = '''
import numpy as np

EPS = 1e-5


def _norm(z, gamma, beta):
    mu = z.mean(-1, keepdims=True)
    var = z.var(-1, keepdims=True)
    r = 1.0 / np.sqrt(var + EPS)
    n = (z - mu) * r
    return n * gamma + beta, (n, r, gamma)


def _norm_back(dy, c):
    n, r, gamma = c
    d = n.shape[-1]
    dn = dy * gamma
    dz = r * (dn - dn.mean(-1, keepdims=True) - n * (dn * n).mean(-1, keepdims=True))
    return dz, (dy * n).reshape(-1, d).sum(0), dy.reshape(-1, d).sum(0)


def _self_attention(z, P, h, mask):
    B, S, D = z.shape
    dh = D // h
    proj = [np.einsum("bsd,ed->bse", z, P[w]).reshape(B, S, h, dh).transpose(0, 2, 1, 3) for w in ("Wq", "Wk", "Wv")]
    q, k, v = proj
    sc = np.einsum("bhid,bhjd->bhij", q, k) / np.sqrt(dh)
    if mask is not None:
        sc = np.where(mask, -np.inf, sc)
    mx = sc.max(-1, keepdims=True)
    mx = np.where(np.isfinite(mx), mx, 0.0)
    w = np.exp(sc - mx)
    tot = w.sum(-1, keepdims=True)
    w = w / np.where(tot == 0, 1.0, tot)
    o = np.einsum("bhij,bhjd->bhid", w, v).transpose(0, 2, 1, 3).reshape(B, S, D)
    return o @ P["Wo"].T, (z, q, k, v, w, o, dh)


def _self_attention_back(dy, c, P, G):
    z, q, k, v, w, o, dh = c
    B, S, D = z.shape
    h = D // dh
    G["Wo"] = np.einsum("bse,bsd->ed", dy, o)
    do = (dy @ P["Wo"]).reshape(B, S, h, dh).transpose(0, 2, 1, 3)
    dv = np.einsum("bhij,bhid->bhjd", w, do)
    dw = np.einsum("bhid,bhjd->bhij", do, v)
    ds = w * (dw - (dw * w).sum(-1, keepdims=True)) / np.sqrt(dh)
    dq = np.einsum("bhij,bhjd->bhid", ds, k)
    dk = np.einsum("bhij,bhid->bhjd", ds, q)
    dz = np.zeros_like(z)
    for name, t in (("Wq", dq), ("Wk", dk), ("Wv", dv)):
        flat = t.transpose(0, 2, 1, 3).reshape(B, S, D)
        G[name] = np.einsum("bse,bsd->ed", flat, z)
        dz = dz + flat @ P[name]
    return dz


def _mlp(z, P):
    pre = z @ P["W1"].T + P["b1"]
    act = np.where(pre > 0, pre, 0.0)
    return act @ P["W2"].T + P["b2"], (z, pre, act)


def _mlp_back(dy, c, P, G):
    z, pre, act = c
    G["W2"] = np.einsum("bsf,bsd->fd", dy, act)
    G["b2"] = dy.sum((0, 1))
    dpre = np.where(pre > 0, dy @ P["W2"], 0.0)
    G["W1"] = np.einsum("bsf,bsd->fd", dpre, z)
    G["b1"] = dpre.sum((0, 1))
    return dpre @ P["W1"]


def encoder_layer_forward(x, params, num_heads, mask=None, norm_first=False):
    P = params
    if not norm_first:
        sa, ca = _self_attention(x, P, num_heads, mask)
        h, cn1 = _norm(x + sa, P["gamma1"], P["beta1"])
        ff, cf = _mlp(h, P)
        out, cn2 = _norm(h + ff, P["gamma2"], P["beta2"])
    else:
        n1, cn1 = _norm(x, P["gamma1"], P["beta1"])
        sa, ca = _self_attention(n1, P, num_heads, mask)
        h = x + sa
        n2, cn2 = _norm(h, P["gamma2"], P["beta2"])
        ff, cf = _mlp(n2, P)
        out = h + ff
    return out, dict(pre=norm_first, P=P, ca=ca, cf=cf, cn1=cn1, cn2=cn2)


def encoder_layer_backward(dout, cache):
    P, G = cache["P"], {}
    if cache["pre"]:
        dn2 = _mlp_back(dout, cache["cf"], P, G)
        dh_ln, G["gamma2"], G["beta2"] = _norm_back(dn2, cache["cn2"])
        dh = dout + dh_ln
        dn1 = _self_attention_back(dh, cache["ca"], P, G)
        dx_ln, G["gamma1"], G["beta1"] = _norm_back(dn1, cache["cn1"])
        return dh + dx_ln, G
    dsum2, G["gamma2"], G["beta2"] = _norm_back(dout, cache["cn2"])
    dh = dsum2 + _mlp_back(dsum2, cache["cf"], P, G)
    dsum1, G["gamma1"], G["beta1"] = _norm_back(dh, cache["cn1"])
    dx = dsum1 + _self_attention_back(dsum1, cache["ca"], P, G)
    return dx, G
'''
