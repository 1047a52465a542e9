"""Unlisted mistakes for decoder_layer."""

MISTAKES = [
    dict(label="cross-attention queries taken from tgt instead of h1 (wrong query stream)",
         keywords=["query", "stream", "h1", "queries"],
         patch=[("ca, c_ca = _mha_forward(h1, memory,", "ca, c_ca = _mha_forward(tgt, memory,")]),
    dict(label="memory padding mask never applied",
         keywords=["padding", "mask"],
         patch=[("        pad = memory_key_padding_mask[:, None, None, :]               # (B, 1, 1, T): the key axis\n",
                 "        pad = None\n")]),
    dict(label="pre-LN written where post-LN was asked (first sub-layer)",
         keywords=["pre-ln", "post-ln", "norm_first", "order"],
         patch=[("    sa, c_sa = _mha_forward(tgt, tgt, [p[k] for k in SA], num_heads, tgt_mask)\n    h1, c_n1 = _ln_forward(tgt + sa, p[\"gamma1\"], p[\"beta1\"])\n",
                 "    n1, c_n1 = _ln_forward(tgt, p[\"gamma1\"], p[\"beta1\"])\n    sa, c_sa = _mha_forward(n1, n1, [p[k] for k in SA], num_heads, tgt_mask)\n    h1 = tgt + sa\n")]),
    dict(label="the residual gradient dropped around the cross-attention (dh1 = dq_ca only)",
         keywords=["residual", "skip"],
         patch=[("dh1 = dz2 + dq_ca ", "dh1 = dq_ca ")]),
    dict(label="dmemory misses the key path",
         keywords=["dmemory", "key", "path", "missing term"],
         patch=[("dmemory = dk_ca + dv_ca ", "dmemory = dv_ca ")]),
    dict(label="dtgt misses the self-attention's key and value paths",
         keywords=["dtgt", "projection", "value", "path"],
         patch=[("dtgt = dz1 + dq_sa + dk_sa + dv_sa ", "dtgt = dz1 + dq_sa ")]),
    dict(label="the self-attention's target mask never applied",
         keywords=["tgt_mask", "mask", "causal"],
         patch=[("num_heads, tgt_mask)", "num_heads, None)")]),
    dict(label="the residual gradient dropped around the feed-forward",
         keywords=["residual", "skip"],
         patch=[("dh2 = dz3 + _ffn_backward(dz3, c_f, p, g) ", "dh2 = _ffn_backward(dz3, c_f, p, g) ")]),
]

CORRECT = '''
import numpy as np

EPS = 1e-5


def _ln(z, gamma, beta):
    mu = z.mean(-1, keepdims=True)
    r = 1.0 / np.sqrt(((z - mu) ** 2).mean(-1, keepdims=True) + EPS)
    n = (z - mu) * r
    return gamma * n + beta, (n, r, gamma)


def _ln_back(dy, c):
    n, r, gamma = c
    d = n.shape[-1]
    dn = dy * gamma
    dz = r * (dn - dn.mean(-1, keepdims=True) - n * (dn * n).mean(-1, keepdims=True))
    return dz, (dy * n).reshape(-1, d).sum(0), dy.reshape(-1, d).sum(0)


class _Attn:
    """One multi-head attention sub-layer: queries from a, keys/values from b."""

    def __init__(self, Wq, Wk, Wv, Wo, heads):
        self.W = (Wq, Wk, Wv, Wo)
        self.h = heads

    def _split(self, t):
        B, L, D = t.shape
        return t.reshape(B, L, self.h, D // self.h).swapaxes(1, 2)

    @staticmethod
    def _join(t):
        B, H, L, dh = t.shape
        return t.swapaxes(1, 2).reshape(B, L, H * dh)

    def forward(self, a, b, blocked):
        Wq, Wk, Wv, Wo = self.W
        q, k, v = self._split(a @ Wq.T), self._split(b @ Wk.T), self._split(b @ Wv.T)
        c = 1.0 / np.sqrt(q.shape[-1])
        sc = c * (q @ k.swapaxes(-1, -2))
        if blocked is not None:
            sc = np.where(blocked, -np.inf, sc)
        top = sc.max(-1, keepdims=True)
        w = np.exp(sc - np.where(np.isfinite(top), top, 0.0))
        tot = w.sum(-1, keepdims=True)
        w = w / np.where(tot == 0, 1.0, tot)
        o = self._join(w @ v)
        self.saved = (a, b, q, k, v, w, o, c)
        return o @ Wo.T

    def backward(self, dy):
        Wq, Wk, Wv, Wo = self.W
        a, b, q, k, v, w, o, c = self.saved
        fl = lambda t: t.reshape(-1, t.shape[-1])
        dWo = fl(dy).T @ fl(o)
        do = self._split(dy @ Wo)
        dv = self._join(w.swapaxes(-1, -2) @ do)
        dw = do @ v.swapaxes(-1, -2)
        ds = c * w * (dw - (dw * w).sum(-1, keepdims=True))
        dq = self._join(ds @ k)
        dk = self._join(ds.swapaxes(-1, -2) @ q)
        grads = (fl(dq).T @ fl(a), fl(dk).T @ fl(b), fl(dv).T @ fl(b), dWo)
        return dq @ Wq, dk @ Wk + dv @ Wv, grads


def decoder_layer_forward(tgt, memory, params, num_heads, tgt_mask=None, memory_key_padding_mask=None):
    P = params
    self_attn = _Attn(P["Wq"], P["Wk"], P["Wv"], P["Wo"], num_heads)
    cross = _Attn(P["cWq"], P["cWk"], P["cWv"], P["cWo"], num_heads)
    h1, n1 = _ln(tgt + self_attn.forward(tgt, tgt, tgt_mask), P["gamma1"], P["beta1"])
    pad = None if memory_key_padding_mask is None else memory_key_padding_mask[:, None, None, :]
    h2, n2 = _ln(h1 + cross.forward(h1, memory, pad), P["gamma2"], P["beta2"])
    pre = h2 @ P["W1"].T + P["b1"]
    act = np.maximum(pre, 0.0)
    out, n3 = _ln(h2 + act @ P["W2"].T + P["b2"], P["gamma3"], P["beta3"])
    return out, (P, self_attn, cross, h2, pre, act, n1, n2, n3)


def decoder_layer_backward(dout, cache):
    P, self_attn, cross, h2, pre, act, n1, n2, n3 = cache
    fl = lambda t: t.reshape(-1, t.shape[-1])
    G = {}
    d3, G["gamma3"], G["beta3"] = _ln_back(dout, n3)
    G["W2"] = fl(d3).T @ fl(act)
    G["b2"] = fl(d3).sum(0)
    dpre = (d3 @ P["W2"]) * (pre > 0)
    G["W1"] = fl(dpre).T @ fl(h2)
    G["b1"] = fl(dpre).sum(0)
    dh2 = d3 + dpre @ P["W1"]
    d2, G["gamma2"], G["beta2"] = _ln_back(dh2, n2)
    dq_side, dmemory, cg = cross.backward(d2)
    G.update(zip(("cWq", "cWk", "cWv", "cWo"), cg))
    d1, G["gamma1"], G["beta1"] = _ln_back(d2 + dq_side, n1)
    dq_self, dkv_self, sg = self_attn.backward(d1)
    G.update(zip(("Wq", "Wk", "Wv", "Wo"), sg))
    return d1 + dq_self + dkv_self, dmemory, G
'''
