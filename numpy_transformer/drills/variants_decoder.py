"""A configurable decoder layer (post-LN: self-attention, cross-attention, ReLU feed-forward), used to
recognise the decoder_layer drill's classic mistakes; re-exported by :mod:`.variants`. Correct with the
default knobs; built from the attention family's pieces in :mod:`.variants_attention`."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from . import variants_basic as _base                  # layer_norm_impl (looked up at call time)
from . import variants_attention as _attn


def decoder_layer_impl(residual_grad=True, sum_qkv=True, relu_backward="mask", scale="sqrt", dmemory="both",
                       cross_query_grad=True, cross_causal=False):
    """``residual_grad=False``: the backward drops each residual's identity path; ``sum_qkv=False``: the
    self-attention's input gradient from the query path only; ``relu_backward="none"``; ``scale``: as
    :func:`~.variants_attention.attention_impl`; ``dmemory``: "both" (correct), "key", "value" or "zero";
    ``cross_query_grad=False``: h1 gets no gradient through the cross-attention's queries;
    ``cross_causal``: a causal mask in the cross-attention too."""
    ln = _base.layer_norm_impl()

    def attn_fwd(xq, xkv, W, h, blocked):
        d = xq.shape[-1]
        qh, kh, vh = (_attn._split(a @ w.T, h, "transpose") for a, w in ((xq, W[0]), (xkv, W[1]), (xkv, W[2])))
        ctx, acache = _attn._attend(qh, kh, vh, blocked, _attn._scale_value(scale, d // h), -1, "before")
        merged = _attn._merge(ctx, "transpose")
        return merged @ W[3].T, (xq, xkv, merged, acache, h)

    def attn_bwd(dy, cache, W):
        xq, xkv, merged, acache, h = cache
        d = xq.shape[-1]
        dWo = dy.reshape(-1, d).T @ merged.reshape(-1, d)
        dqh, dkh, dvh = _attn._attend_backward(_attn._split(dy @ W[3], h, "transpose"), acache)
        dq, dk, dv = (_attn._merge(a, "transpose") for a in (dqh, dkh, dvh))
        grads = (dq.reshape(-1, d).T @ xq.reshape(-1, d), dk.reshape(-1, d).T @ xkv.reshape(-1, d),
                 dv.reshape(-1, d).T @ xkv.reshape(-1, d), dWo)
        return dq @ W[0], dk @ W[1], dv @ W[2], grads

    def ffn_fwd(x, p):
        a = x @ p["W1"].T + p["b1"]
        r = np.maximum(a, 0)
        return r @ p["W2"].T + p["b2"], (x, a, r)

    def ffn_bwd(dy, cache, p, g):
        x, a, r = cache
        dy2 = dy.reshape(-1, dy.shape[-1])
        g["W2"], g["b2"] = dy2.T @ r.reshape(-1, r.shape[-1]), dy2.sum(axis=0)
        dr = dy @ p["W2"]
        da = dr if relu_backward == "none" else dr * (a > 0)
        da2 = da.reshape(-1, da.shape[-1])
        g["W1"], g["b1"] = da2.T @ x.reshape(-1, x.shape[-1]), da2.sum(axis=0)
        return da @ p["W1"]

    sa_keys, ca_keys = ("Wq", "Wk", "Wv", "Wo"), ("cWq", "cWk", "cWv", "cWo")

    def decoder_layer_forward(tgt, memory, params, num_heads, tgt_mask=None, memory_key_padding_mask=None):
        p = params
        s, t = tgt.shape[1], memory.shape[1]
        sa, c_sa = attn_fwd(tgt, tgt, [p[k] for k in sa_keys], num_heads,
                            None if tgt_mask is None else np.asarray(tgt_mask, dtype=bool))
        h1, c_n1 = ln.layer_norm_forward(tgt + sa, p["gamma1"], p["beta1"])
        blocked = None
        if memory_key_padding_mask is not None:
            blocked = np.asarray(memory_key_padding_mask, dtype=bool)[:, None, None, :]
        if cross_causal:
            c = _attn._causal(s, t, "triu")
            blocked = c if blocked is None else (blocked | c)
        ca, c_ca = attn_fwd(h1, memory, [p[k] for k in ca_keys], num_heads, blocked)
        h2, c_n2 = ln.layer_norm_forward(h1 + ca, p["gamma2"], p["beta2"])
        f, c_f = ffn_fwd(h2, p)
        y, c_n3 = ln.layer_norm_forward(h2 + f, p["gamma3"], p["beta3"])
        return y, (p, c_sa, c_n1, c_ca, c_n2, c_f, c_n3)

    def decoder_layer_backward(dout, cache):
        p, c_sa, c_n1, c_ca, c_n2, c_f, c_n3 = cache
        g = {}
        r = 1.0 if residual_grad else 0.0
        dz3, g["gamma3"], g["beta3"] = ln.layer_norm_backward(dout, c_n3)
        dh2 = r * dz3 + ffn_bwd(dz3, c_f, p, g)
        dz2, g["gamma2"], g["beta2"] = ln.layer_norm_backward(dh2, c_n2)
        dq_ca, dk_ca, dv_ca, gw = attn_bwd(dz2, c_ca, [p[k] for k in ca_keys])
        g.update(zip(ca_keys, gw))
        dmem = {"both": dk_ca + dv_ca, "key": dk_ca, "value": dv_ca, "zero": np.zeros_like(dk_ca)}[dmemory]
        dh1 = r * dz2 + (dq_ca if cross_query_grad else 0.0)
        dz1, g["gamma1"], g["beta1"] = ln.layer_norm_backward(dh1, c_n1)
        dq_sa, dk_sa, dv_sa, gw = attn_bwd(dz1, c_sa, [p[k] for k in sa_keys])
        g.update(zip(sa_keys, gw))
        dtgt = r * dz1 + dq_sa + ((dk_sa + dv_sa) if sum_qkv else 0.0)
        return dtgt, dmem, g

    return SimpleNamespace(decoder_layer_forward=decoder_layer_forward,
                           decoder_layer_backward=decoder_layer_backward)


__all__ = ["decoder_layer_impl"]
