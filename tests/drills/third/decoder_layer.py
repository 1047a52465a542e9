"""Third-set mistakes for decoder_layer."""

MISTAKES = [
    dict(label="cross-attention keys and values taken from h1 instead of memory (a second self-attention)",
         keywords=["keys and values", "instead of memory", "from memory"],
         patch=[("ca, c_ca = _mha_forward(h1, memory,", "ca, c_ca = _mha_forward(h1, h1,")]),
    dict(label="the first LayerNorm uses gamma2 (the wrong norm's parameters)",
         keywords=["gamma", "wrong norm", "parameters"],
         patch=[("_ln_forward(tgt + sa, p[\"gamma1\"], p[\"beta1\"])", "_ln_forward(tgt + sa, p[\"gamma2\"], p[\"beta1\"])")]),
    dict(label="dW2 uses the pre-activation a instead of relu(a)",
         keywords=["pre-activation", "relu", "dw2"],
         patch=[("dr, g[\"W2\"] = _lin_grads(dy, r, p[\"W2\"])", "dr, g[\"W2\"] = _lin_grads(dy, a, p[\"W2\"])")]),
    dict(label="the attention's softmax backward row sum taken over the query axis",
         keywords=["row sum", "axis", "softmax"],
         patch=[("dA = P * (dP - np.sum(dP * P, -1, keepdims=True)) * scale", "dA = P * (dP - np.sum(dP * P, -2, keepdims=True)) * scale")]),
]

CORRECT = '''
import numpy as np


class _Norm:
    def __init__(self, z, w, b):
        mu = z.mean(-1, keepdims=True)
        self.inv = (((z - mu) ** 2).mean(-1, keepdims=True) + 1e-5) ** -0.5
        self.zn = (z - mu) * self.inv
        self.w = w
        self.out = self.zn * w + b

    def back(self, gy):
        gz = gy * self.w
        gx = self.inv * (gz - gz.mean(-1, keepdims=True) - self.zn * (gz * self.zn).mean(-1, keepdims=True))
        return gx, (gy * self.zn).sum(axis=(0, 1)), gy.sum(axis=(0, 1))


class _Attn:
    def __init__(self, xq, xkv, Ws, h, blocked):
        self.Ws, self.xq, self.xkv, self.h = Ws, xq, xkv, h
        Wq, Wk, Wv, Wo = Ws
        b, s, d = xq.shape
        t = xkv.shape[1]
        self.dk = d // h
        self.Q = (xq @ Wq.T).reshape(b, s, h, self.dk)
        self.K = (xkv @ Wk.T).reshape(b, t, h, self.dk)
        self.V = (xkv @ Wv.T).reshape(b, t, h, self.dk)
        a = np.einsum("bqhd,bkhd->bhqk", self.Q, self.K) / np.sqrt(self.dk)
        ok = np.ones(a.shape, dtype=bool) if blocked is None else ~np.broadcast_to(blocked, a.shape)
        a = np.where(ok, a, -1e300)
        w = np.where(ok, np.exp(a - a.max(-1, keepdims=True)), 0.0)
        tot = w.sum(-1, keepdims=True)
        self.w = np.divide(w, tot, out=np.zeros_like(w), where=tot > 0)
        self.ctx = np.einsum("bhqk,bkhd->bqhd", self.w, self.V).reshape(b, s, d)
        self.out = self.ctx @ Wo.T

    def back(self, gy):
        Wq, Wk, Wv, Wo = self.Ws
        b, s, d = self.xq.shape
        t = self.xkv.shape[1]
        gW = {}
        gW[3] = np.einsum("bso,bsi->oi", gy, self.ctx)
        gc = (gy @ Wo).reshape(b, s, self.h, self.dk)
        gV = np.einsum("bhqk,bqhd->bkhd", self.w, gc).reshape(b, t, d)
        gw = np.einsum("bqhd,bkhd->bhqk", gc, self.V)
        ga = self.w * (gw - (gw * self.w).sum(-1, keepdims=True)) / np.sqrt(self.dk)
        gQ = np.einsum("bhqk,bkhd->bqhd", ga, self.K).reshape(b, s, d)
        gK = np.einsum("bhqk,bqhd->bkhd", ga, self.Q).reshape(b, t, d)
        gW[0] = np.einsum("bso,bsi->oi", gQ, self.xq)
        gW[1] = np.einsum("bto,bti->oi", gK, self.xkv)
        gW[2] = np.einsum("bto,bti->oi", gV, self.xkv)
        return gQ @ Wq, gK @ Wk + gV @ Wv, [gW[i] for i in range(4)]


def decoder_layer_forward(tgt, memory, params, num_heads, tgt_mask=None, memory_key_padding_mask=None):
    p = params
    sa = _Attn(tgt, tgt, [p[k] for k in ("Wq", "Wk", "Wv", "Wo")], num_heads, tgt_mask)
    n1 = _Norm(tgt + sa.out, p["gamma1"], p["beta1"])
    pad = None if memory_key_padding_mask is None else memory_key_padding_mask[:, None, None, :]
    ca = _Attn(n1.out, memory, [p[k] for k in ("cWq", "cWk", "cWv", "cWo")], num_heads, pad)
    n2 = _Norm(n1.out + ca.out, p["gamma2"], p["beta2"])
    pre = n2.out @ p["W1"].T + p["b1"]
    act = np.maximum(pre, 0.0)
    n3 = _Norm(n2.out + act @ p["W2"].T + p["b2"], p["gamma3"], p["beta3"])
    return n3.out, (p, sa, n1, ca, n2, pre, act, n3)


def decoder_layer_backward(dout, cache):
    p, sa, n1, ca, n2, pre, act, n3 = cache
    g = {}
    d3, g["gamma3"], g["beta3"] = n3.back(dout)
    g["W2"] = np.einsum("bso,bsi->oi", d3, act)
    g["b2"] = d3.sum(axis=(0, 1))
    dpre = (d3 @ p["W2"]) * (pre > 0)
    g["W1"] = np.einsum("bso,bsi->oi", dpre, n2.out)
    g["b1"] = dpre.sum(axis=(0, 1))
    d2, g["gamma2"], g["beta2"] = n2.back(d3 + dpre @ p["W1"])
    dq, dmem, ws = ca.back(d2)
    g.update(zip(("cWq", "cWk", "cWv", "cWo"), ws))
    d1, g["gamma1"], g["beta1"] = n1.back(d2 + dq)
    dq1, dkv1, ws = sa.back(d1)
    g.update(zip(("Wq", "Wk", "Wv", "Wo"), ws))
    return d1 + dq1 + dkv1, dmem, g
'''
