"""Unlisted mistakes for grouped_query_attention."""

MISTAKES = [
    dict(label="causal mask blocks the diagonal (triu k=0)",
         keywords=["diagonal", "causal", "k=0"],
         patch=[("np.triu(np.ones((S, T), dtype=bool), k=1)", "np.triu(np.ones((S, T), dtype=bool), k=0)")]),
    dict(label="dq and dk miss the 1/sqrt(Dh) scale in the backward",
         keywords=["sqrt", "scale"],
         patch=[("dq = (scale * (dA @ kg))", "dq = ((dA @ kg))"),
                ("dk = (scale * (np.swapaxes(dA, -1, -2) @ qg))", "dk = ((np.swapaxes(dA, -1, -2) @ qg))")]),
    dict(label="dk and dv averaged over the group instead of summed",
         keywords=["group", "sum", "mean", "1/g"],
         patch=[("dv = (np.swapaxes(P, -1, -2) @ doutg).sum(axis=2)", "dv = (np.swapaxes(P, -1, -2) @ doutg).mean(axis=2)"),
                ("dk = (scale * (np.swapaxes(dA, -1, -2) @ qg)).sum(axis=2)", "dk = (scale * (np.swapaxes(dA, -1, -2) @ qg)).mean(axis=2)")]),
    dict(label="query heads grouped modulo Hkv (h % Hkv) instead of h // G",
         keywords=["h // g", "repeat_interleave", "group", "modulo"],
         patch=[("qg = q.reshape(B, Hkv, G, S, Dh) ", "qg = q.reshape(B, G, Hkv, S, Dh).transpose(0, 2, 1, 3, 4) "),
                ("out = (P @ vg).reshape(B, Hq, S, -1) ", "out = (P @ vg).transpose(0, 2, 1, 3, 4).reshape(B, Hq, S, -1) "),
                ("doutg = dout.reshape(B, Hkv, G, S, -1) ", "doutg = dout.reshape(B, G, Hkv, S, -1).transpose(0, 2, 1, 3, 4) "),
                ("dq = (scale * (dA @ kg)).reshape(B, Hkv * G, S, Dh)", "dq = (scale * (dA @ kg)).transpose(0, 2, 1, 3, 4).reshape(B, Hkv * G, S, Dh)")]),
    dict(label="the softmax's rowsum term dropped from dA",
         keywords=["rowsum", "row sum", "softmax"],
         patch=[("dA = P * (dP - np.sum(dP * P, axis=-1, keepdims=True))", "dA = P * dP")]),
    dict(label="dk and dv taken from the first query head of each group only",
         keywords=["group", "sum", "head"],
         patch=[("dv = (np.swapaxes(P, -1, -2) @ doutg).sum(axis=2)", "dv = (np.swapaxes(P, -1, -2) @ doutg)[:, :, 0]"),
                ("dk = (scale * (np.swapaxes(dA, -1, -2) @ qg)).sum(axis=2)", "dk = (scale * (np.swapaxes(dA, -1, -2) @ qg))[:, :, 0]")]),
]

CORRECT = '''
import numpy as np


def gqa_forward(q, k, v, causal=False):
    hq, hkv = q.shape[1], k.shape[1]
    rep = hq // hkv
    kk = np.repeat(k, rep, axis=1)
    vv = np.repeat(v, rep, axis=1)
    scale = 1.0 / np.sqrt(q.shape[-1])
    sc = np.einsum("bhsd,bhtd->bhst", q, kk) * scale
    if causal:
        S, T = sc.shape[-2:]
        sc = sc + np.where(np.arange(T)[None, :] > np.arange(S)[:, None], -np.inf, 0.0)
    sc = sc - sc.max(-1, keepdims=True)
    prob = np.exp(sc)
    prob = prob / prob.sum(-1, keepdims=True)
    return np.einsum("bhst,bhtv->bhsv", prob, vv), (q, kk, vv, prob, scale, rep)


def gqa_backward(dout, cache):
    q, kk, vv, prob, scale, rep = cache
    B, hq, T = kk.shape[0], kk.shape[1], kk.shape[2]
    dvv = np.einsum("bhst,bhsv->bhtv", prob, dout)
    dprob = np.einsum("bhsv,bhtv->bhst", dout, vv)
    dsc = prob * (dprob - (dprob * prob).sum(-1, keepdims=True)) * scale
    dq = np.einsum("bhst,bhtd->bhsd", dsc, kk)
    dkk = np.einsum("bhst,bhsd->bhtd", dsc, q)
    dk = dkk.reshape(B, hq // rep, rep, T, -1).sum(axis=2)
    dv = dvv.reshape(B, hq // rep, rep, T, -1).sum(axis=2)
    return dq, dk, dv
'''
