"""Fresh unlisted mistakes for grouped_query_attention."""

MISTAKES = [
    dict(label="scale 1/Dh instead of 1/sqrt(Dh)",
         keywords=["scale", "sqrt"],
         patch=[("scale = 1.0 / np.sqrt(Dh)", "scale = 1.0 / Dh")]),
    dict(label="dv computed with P instead of P^T (transpose missing)",
         keywords=["transpose", "p^t", "dv"],
         patch=[("dv = (np.swapaxes(P, -1, -2) @ doutg).sum(axis=2)", "dv = (P @ doutg).sum(axis=2)")]),
    dict(label="the softmax backward's row sum taken of dP alone (P factor missing)",
         keywords=["rowsum", "row sum", "softmax", "dp * p"],
         patch=[("dA = P * (dP - np.sum(dP * P, axis=-1, keepdims=True))", "dA = P * (dP - np.sum(dP, axis=-1, keepdims=True))")]),
    dict(label="the causal mask never applied",
         keywords=["causal", "mask"],
         patch=[("        scores = np.where(np.triu(np.ones((S, T), dtype=bool), k=1), -np.inf, scores)\n",
                 "        pass\n")]),
    dict(label="dq misses the 1/sqrt(Dh) scale (dk keeps it)",
         keywords=["scale", "sqrt", "dq"],
         patch=[("dq = (scale * (dA @ kg)).reshape(B, Hkv * G, S, Dh)", "dq = (dA @ kg).reshape(B, Hkv * G, S, Dh)")]),
]

CORRECT = '''
import numpy as np


def gqa_forward(q, k, v, causal=False):
    n_q_heads, n_kv_heads = q.shape[1], k.shape[1]
    per = n_q_heads // n_kv_heads
    kk = np.repeat(k, per, axis=1)
    vv = np.repeat(v, per, axis=1)
    width = q.shape[-1]
    a = np.einsum("bhsd,bhtd->bhst", q, kk) / np.sqrt(width)
    if causal:
        s_len, t_len = a.shape[-2:]
        a = np.where(np.arange(t_len)[None, :] > np.arange(s_len)[:, None], -np.inf, a)
    a = a - a.max(axis=-1, keepdims=True)
    w = np.exp(a)
    w /= w.sum(axis=-1, keepdims=True)
    return np.einsum("bhst,bhtv->bhsv", w, vv), (q, kk, vv, w, per)


def gqa_backward(dout, cache):
    q, kk, vv, w, per = cache
    c = 1.0 / np.sqrt(q.shape[-1])
    dvv = np.einsum("bhst,bhsv->bhtv", w, dout)
    dw = np.einsum("bhsv,bhtv->bhst", dout, vv)
    da = w * (dw - np.einsum("bhst,bhst->bhs", dw, w)[..., None])
    dq = c * np.einsum("bhst,bhtd->bhsd", da, kk)
    dkk = c * np.einsum("bhst,bhsd->bhtd", da, q)
    b, hq, t, dh = dkk.shape
    dk = dkk.reshape(b, hq // per, per, t, dh).sum(axis=2)
    dv = dvv.reshape(b, hq // per, per, t, dvv.shape[-1]).sum(axis=2)
    return dq, dk, dv
'''
