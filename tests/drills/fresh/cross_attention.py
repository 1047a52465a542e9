"""Fresh unlisted mistakes for cross_attention."""

MISTAKES = [
    dict(label="the padding mask laid along the query axis instead of the key axis",
         keywords=["axis", "key axis", "query", "broadcast"],
         patch=[("memory_key_padding_mask[:, None, None, :]", "memory_key_padding_mask[:, None, :, None]")]),
    dict(label="dmemory misses the key path (dk @ Wk)",
         keywords=["key", "path", "dmemory"],
         patch=[("dmemory = dk @ Wk + dv @ Wv ", "dmemory = dv @ Wv ")]),
    dict(label="keys projected with Wv and values with Wk (projections swapped)",
         keywords=["key", "value", "swap", "wk"],
         patch=[("kh = _split_heads(memory @ Wk.T, H) ", "kh = _split_heads(memory @ Wv.T, H) "),
                ("vh = _split_heads(memory @ Wv.T, H) ", "vh = _split_heads(memory @ Wk.T, H) ")]),
    dict(label="the 1/sqrt(Dh) scale missing from the backward's dA",
         keywords=["scale", "sqrt"],
         patch=[("dA = P * (dP - np.sum(dP * P, axis=-1, keepdims=True)) * scale", "dA = P * (dP - np.sum(dP * P, axis=-1, keepdims=True))")]),
    dict(label="queries projected with Wk instead of Wq",
         keywords=["query", "wq", "projection"],
         patch=[("qh = _split_heads(x @ Wq.T, H) ", "qh = _split_heads(x @ Wk.T, H) ")]),
]

CORRECT = '''
import numpy as np


def _heads(t, n):
    b, length, d = t.shape
    return np.stack(np.split(t, n, axis=-1), axis=1)


def _unheads(t):
    return np.concatenate(list(np.moveaxis(t, 1, 0)), axis=-1)


def cross_attention_forward(x, memory, Wq, Wk, Wv, Wo, num_heads, memory_key_padding_mask=None):
    Q = _heads(np.einsum("bsd,ed->bse", x, Wq), num_heads)
    K = _heads(np.einsum("btd,ed->bte", memory, Wk), num_heads)
    V = _heads(np.einsum("btd,ed->bte", memory, Wv), num_heads)
    c = 1.0 / np.sqrt(Q.shape[-1])
    z = np.einsum("bhsd,bhtd->bhst", Q, K) * c
    ok = np.ones(z.shape, dtype=bool)
    if memory_key_padding_mask is not None:
        ok = np.broadcast_to(~memory_key_padding_mask[:, np.newaxis, np.newaxis, :], z.shape)
    z = np.where(ok, z, -1e300)
    w = np.where(ok, np.exp(z - z.max(axis=-1, keepdims=True)), 0.0)
    tot = w.sum(axis=-1, keepdims=True)
    w = np.divide(w, tot, out=np.zeros_like(w), where=tot > 0)
    ctx = _unheads(np.einsum("bhst,bhtd->bhsd", w, V))
    out = np.einsum("bse,de->bsd", ctx, Wo)
    return out, dict(x=x, m=memory, W=(Wq, Wk, Wv, Wo), Q=Q, K=K, V=V, w=w, ctx=ctx, c=c, n=num_heads)


def cross_attention_backward(dout, cache):
    Wq, Wk, Wv, Wo = cache["W"]
    n, c, w = cache["n"], cache["c"], cache["w"]
    dWo = np.einsum("bsd,bse->de", dout, cache["ctx"])
    dctx = _heads(np.einsum("bsd,de->bse", dout, Wo), n)
    dV = np.einsum("bhst,bhsd->bhtd", w, dctx)
    dw = np.einsum("bhsd,bhtd->bhst", dctx, cache["V"])
    dz = w * (dw - np.einsum("bhst,bhst->bhs", dw, w)[..., np.newaxis]) * c
    dQ = _unheads(np.einsum("bhst,bhtd->bhsd", dz, cache["K"]))
    dK = _unheads(np.einsum("bhst,bhsd->bhtd", dz, cache["Q"]))
    dV = _unheads(dV)
    x, m = cache["x"], cache["m"]
    dWq = np.einsum("bse,bsd->ed", dQ, x)
    dWk = np.einsum("bte,btd->ed", dK, m)
    dWv = np.einsum("bte,btd->ed", dV, m)
    return dQ @ Wq, dK @ Wk + dV @ Wv, dWq, dWk, dWv, dWo
'''
