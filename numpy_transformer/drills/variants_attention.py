"""Configurable implementations of the attention drills (scaled dot-product attention, multi-head
attention, the encoder layer), used to recognise the classic mistakes; re-exported by :mod:`.variants`.

The mask and causal knobs (``mask_mode``, ``causal_mode``) are the same in all three, so the attention
mistakes (an inverted mask, a causal mask off by one, -1e9 instead of -inf, the mask after the softmax)
are recognised inside multi-head attention and the encoder layer too, with the same definitions.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from . import variants_basic as _base        # _softmax, _softmax_bwd, layer_norm_impl (looked up at call time)


# --------------------------------------------------------------------------------------------------
# scaled dot-product attention
# --------------------------------------------------------------------------------------------------


def _scale_value(mode, dh, d=None):
    return {"sqrt": 1.0 / math.sqrt(dh), "none": 1.0, "dh": 1.0 / dh,
            "sqrt_d": 1.0 / math.sqrt(d if d is not None else dh)}[mode]


def _causal(s, t, mode):
    if mode == "tril":
        return np.tril(np.ones((s, t), dtype=bool), k=-1)
    if mode == "diag":
        return np.triu(np.ones((s, t), dtype=bool), k=0)
    return np.triu(np.ones((s, t), dtype=bool), k=1)


def _attend(q, k, v, blocked, scale, axis, mask_mode, softmax_backward="correct"):
    """Forward of one attention; returns (out, cache) with the pieces its backward needs.

    ``blocked``: bool mask broadcastable to the scores, True = may not attend (or None).
    """
    scores = (q @ np.swapaxes(k, -1, -2)) * scale
    keep = None
    if blocked is not None:
        blocked = np.broadcast_to(blocked, scores.shape)
        if mask_mode == "large_negative":
            scores = np.where(blocked, -1e9, scores)
        elif mask_mode == "after":
            keep = ~blocked
        else:
            scores = np.where(blocked, -np.inf, scores)
    if mask_mode == "unguarded":
        e = np.exp(scores - np.max(scores, axis=axis, keepdims=True))
        p = e / e.sum(axis=axis, keepdims=True)
    else:
        p = _base._softmax(scores, axis=axis)
    if keep is not None:
        # masked after the softmax; the backward is then the usual one on these (masked) probabilities
        p = p * keep
    return p @ v, (q, k, v, p, scale, axis, softmax_backward)


def _attend_backward(dout, cache, dk_mode="correct", dv_mode="correct", scale_in_backward=True):
    q, k, v, p, scale, axis, sm = cache
    dv = p @ dout if dv_mode == "no_transpose" else np.swapaxes(p, -1, -2) @ dout
    dp = dout @ np.swapaxes(v, -1, -2)
    ds = _base._softmax_bwd(dp, p, axis, sm)
    if scale_in_backward:
        ds = ds * scale
    dq = ds @ k
    dk = ds @ q if dk_mode == "no_transpose" else np.swapaxes(ds, -1, -2) @ q
    return dq, dk, dv


def attention_impl(scale="sqrt", axis=-1, mask_mode="before", causal_mode="triu", backward="correct"):
    """``mask_mode``: "before" (correct), "after" (probabilities zeroed after the softmax),
    "inverted" (True read as *may* attend), "large_negative" (-1e9 instead of -inf: fully-masked rows
    average every value), "unguarded" (-inf with no guard: fully-masked rows give NaN)."""

    def attention_forward(q, k, v, mask=None, causal=False):
        blocked = _blocked(mask, causal, q.shape[-2], k.shape[-2], mask_mode, causal_mode)
        return _attend(q, k, v, blocked, _scale_value(scale, q.shape[-1]), axis, mask_mode,
                       "no_rowsum" if backward == "no_rowsum" else "correct")

    def attention_backward(dout, cache):
        return _attend_backward(dout, cache,
                                dk_mode="no_transpose" if backward == "dk_no_transpose" else "correct",
                                dv_mode="no_transpose" if backward == "dv_no_transpose" else "correct",
                                scale_in_backward=backward != "no_scale")

    return SimpleNamespace(attention_forward=attention_forward, attention_backward=attention_backward)


# --------------------------------------------------------------------------------------------------
# multi-head attention
# --------------------------------------------------------------------------------------------------


def _split(x, h, mode):
    b, s, d = x.shape
    if mode == "reshape":
        return x.reshape(b, h, s, d // h)
    return x.reshape(b, s, h, d // h).transpose(0, 2, 1, 3)


def _merge(x, mode):
    b, h, s, dh = x.shape
    if mode == "reshape":
        return x.reshape(b, s, h * dh)
    return x.transpose(0, 2, 1, 3).reshape(b, s, h * dh)


def _blocked(mask, causal, s, t, mask_mode, causal_mode):
    """The bool mask of blocked scores (True = may not attend) the way the variant builds it, or None."""
    blocked = None if mask is None else np.asarray(mask, dtype=bool)
    if blocked is not None and mask_mode == "inverted":
        blocked = ~blocked
    if causal:
        c = _causal(s, t, causal_mode)
        blocked = c if blocked is None else (blocked | c)
    return blocked


def _mha_parts(split="transpose", merge="transpose", scale="sqrt", weights="torch",
               softmax_backward="correct", sum_qkv=True, mask_mode="before", causal_mode="triu"):
    """MHA forward/backward closures (shared by the MHA and encoder-layer variants); ``mask_mode`` and
    ``causal_mode`` as in :func:`attention_impl`."""

    def proj(x, W):
        return x @ W if weights == "untransposed" else x @ W.T

    def proj_grads(dy, x, W):
        x2, dy2 = x.reshape(-1, x.shape[-1]), dy.reshape(-1, dy.shape[-1])
        if weights == "untransposed":
            return dy @ W.T, x2.T @ dy2
        return dy @ W, dy2.T @ x2

    def forward(x, Wq, Wk, Wv, Wo, num_heads, mask=None, causal=False):
        b, s, d = x.shape
        q, k, v = proj(x, Wq), proj(x, Wk), proj(x, Wv)
        blocked = _blocked(mask, causal, s, s, mask_mode, causal_mode)
        qh, kh, vh = (_split(a, num_heads, split) for a in (q, k, v))
        ctx, acache = _attend(qh, kh, vh, blocked, _scale_value(scale, d // num_heads, d), -1, mask_mode,
                              softmax_backward)
        merged = _merge(ctx, merge)
        return proj(merged, Wo), (x, Wq, Wk, Wv, Wo, merged, acache, num_heads)

    def backward(dout, cache):
        x, Wq, Wk, Wv, Wo, merged, acache, h = cache
        dmerged, dWo = proj_grads(dout, merged, Wo)
        b, s, d = dmerged.shape
        # inverse of the merge: the split that undoes it
        if merge == "reshape":
            dctx = dmerged.reshape(b, h, s, d // h)
        else:
            dctx = dmerged.reshape(b, s, h, d // h).transpose(0, 2, 1, 3)
        dqh, dkh, dvh = _attend_backward(dctx, acache)
        dq, dk, dv = (_merge(a, split) for a in (dqh, dkh, dvh))   # inverse of the split
        dx_q, dWq = proj_grads(dq, x, Wq)
        dx_k, dWk = proj_grads(dk, x, Wk)
        dx_v, dWv = proj_grads(dv, x, Wv)
        dx = dx_q + dx_k + dx_v if sum_qkv else dx_q
        return dx, dWq, dWk, dWv, dWo

    return forward, backward


def mha_impl(split="transpose", merge="transpose", scale="sqrt", weights="torch", backward="correct",
             mask_mode="before", causal_mode="triu"):
    """``split``/``merge``: "transpose" (correct) or "reshape" (a reshape with no transpose);
    ``scale``: "sqrt" (1/sqrt(Dh)), "none", "dh" (1/Dh), "sqrt_d" (1/sqrt(D));
    ``backward``: "correct", "no_rowsum", "no_sum_qkv" (dx from the query path only);
    ``mask_mode``, ``causal_mode``: as in :func:`attention_impl`."""
    fwd, bwd = _mha_parts(split, merge, scale, weights,
                          "no_rowsum" if backward == "no_rowsum" else "correct",
                          backward != "no_sum_qkv", mask_mode, causal_mode)
    return SimpleNamespace(mha_forward=fwd, mha_backward=bwd)


# --------------------------------------------------------------------------------------------------
# encoder layer: self-attention (no biases) + ReLU feed-forward, residuals, LayerNorm (post or pre)
# --------------------------------------------------------------------------------------------------


def encoder_layer_impl(swap_norm=False, residual_grad=True, sum_qkv=True, relu_backward="mask",
                       scale="sqrt", mask_mode="before"):
    """``swap_norm``: compute pre-LN when post-LN is asked and vice versa; ``residual_grad=False``: the
    backward drops the identity path of each residual; ``relu_backward="none"``: the ReLU backward
    passes the gradient everywhere; ``mask_mode``: as in :func:`attention_impl`."""
    ln = _base.layer_norm_impl()
    mha_fwd, mha_bwd = _mha_parts(scale=scale, sum_qkv=sum_qkv, mask_mode=mask_mode)

    def ffn_fwd(x, p):
        a = x @ p["W1"].T + p["b1"]
        r = np.maximum(a, 0)
        return r @ p["W2"].T + p["b2"], (x, a, r)

    def ffn_bwd(dy, cache, p, g):
        x, a, r = cache
        dy2 = dy.reshape(-1, dy.shape[-1])
        g["W2"] = dy2.T @ r.reshape(-1, r.shape[-1])
        g["b2"] = dy2.sum(axis=0)
        dr = dy @ p["W2"]
        da = dr if relu_backward == "none" else dr * (a > 0)
        da2 = da.reshape(-1, da.shape[-1])
        g["W1"] = da2.T @ x.reshape(-1, x.shape[-1])
        g["b1"] = da2.sum(axis=0)
        return da @ p["W1"]

    def attn_fwd(x, p, h, mask):
        return mha_fwd(x, p["Wq"], p["Wk"], p["Wv"], p["Wo"], h, mask)

    def attn_bwd(dy, cache, g):
        dx, g["Wq"], g["Wk"], g["Wv"], g["Wo"] = mha_bwd(dy, cache)
        return dx

    def encoder_layer_forward(x, params, num_heads, mask=None, norm_first=False):
        p = params
        pre = (not norm_first) if swap_norm else norm_first
        if pre:
            n1, c_n1 = ln.layer_norm_forward(x, p["gamma1"], p["beta1"])
            a, c_a = attn_fwd(n1, p, num_heads, mask)
            h = x + a
            n2, c_n2 = ln.layer_norm_forward(h, p["gamma2"], p["beta2"])
            f, c_f = ffn_fwd(n2, p)
            y = h + f
        else:
            a, c_a = attn_fwd(x, p, num_heads, mask)
            h, c_n1 = ln.layer_norm_forward(x + a, p["gamma1"], p["beta1"])
            f, c_f = ffn_fwd(h, p)
            y, c_n2 = ln.layer_norm_forward(h + f, p["gamma2"], p["beta2"])
        return y, (pre, p, c_n1, c_a, c_n2, c_f)

    def encoder_layer_backward(dout, cache):
        pre, p, c_n1, c_a, c_n2, c_f = cache
        g = {}
        r = 1.0 if residual_grad else 0.0
        if pre:
            dn2 = ffn_bwd(dout, c_f, p, g)
            dn2x, g["gamma2"], g["beta2"] = ln.layer_norm_backward(dn2, c_n2)
            dh = r * dout + dn2x
            dn1 = attn_bwd(dh, c_a, g)
            dn1x, g["gamma1"], g["beta1"] = ln.layer_norm_backward(dn1, c_n1)
            dx = r * dh + dn1x
        else:
            dz2, g["gamma2"], g["beta2"] = ln.layer_norm_backward(dout, c_n2)
            dh = r * dz2 + ffn_bwd(dz2, c_f, p, g)
            dz1, g["gamma1"], g["beta1"] = ln.layer_norm_backward(dh, c_n1)
            dx = r * dz1 + attn_bwd(dz1, c_a, g)
        return dx, g

    return SimpleNamespace(encoder_layer_forward=encoder_layer_forward,
                           encoder_layer_backward=encoder_layer_backward)


# --------------------------------------------------------------------------------------------------
# causal attention with a KV cache: one decoding step (or a chunk of S new positions)
# --------------------------------------------------------------------------------------------------


def kv_cache_impl(order="append_then_attend", causal="bottom_right", stale="none", placement="end"):
    """``order``: "append_then_attend" (correct) or "attend_then_append" (the new positions attend to the
    old cache only); ``causal``: "bottom_right" (correct: new position i, at T + i, sees keys j <= T + i),
    "top_left" (the mask of positions 0..S-1: torch's is_causal=True with S != T) or "none" (no mask
    among the new positions); ``stale``: "none" (correct), "both" (the caches returned without the new
    entries) or "v" (the value cache returned stale); ``placement``: "end" (correct) or "front" (the new
    entries first, the mask still built for the cache-first order)."""

    def cat(cache, new):
        return np.concatenate([new, cache] if placement == "front" else [cache, new], axis=2)

    def kv_cache_attention(q, k_new, v_new, k_cache, v_cache):
        s = q.shape[-2]
        k_all, v_all = cat(k_cache, k_new), cat(v_cache, v_new)
        keys, values = (k_cache, v_cache) if order == "attend_then_append" else (k_all, v_all)
        n = keys.shape[-2]
        if causal == "top_left":
            blocked = np.triu(np.ones((s, n), dtype=bool), k=1)
        elif causal == "none" or order == "attend_then_append":
            blocked = None
        else:
            blocked = np.triu(np.ones((s, n), dtype=bool), k=n - s + 1)
        out, _ = _attend(q, keys, values, blocked, 1.0 / math.sqrt(q.shape[-1]), -1, "before")
        k_ret = k_cache if stale == "both" else k_all
        v_ret = v_cache if stale in ("both", "v") else v_all
        return out, k_ret, v_ret

    return SimpleNamespace(kv_cache_attention=kv_cache_attention)


# --------------------------------------------------------------------------------------------------
# cross-attention: queries from x (the decoder), keys and values from memory (the encoder)
# --------------------------------------------------------------------------------------------------


def cross_attention_impl(dmemory="both", mask_axis="keys", causal=False, mask_mode="before"):
    """Multi-head cross-attention (no biases) with a key padding mask (B, T) of the memory.

    ``dmemory``: "both" (correct: the key and value paths add), "key" or "value" (one path only);
    ``mask_axis``: "keys" (correct) or "queries" (the (B, T) mask broadcast on the query axis: needs
    S = T); ``causal``: True applies a causal mask (a self-attention habit); ``mask_mode``: as in
    :func:`attention_impl` ("before", "after", "inverted" ...)."""

    def cross_attention_forward(x, memory, Wq, Wk, Wv, Wo, num_heads, memory_key_padding_mask=None):
        b, s, d = x.shape
        t = memory.shape[1]
        q, k, v = x @ Wq.T, memory @ Wk.T, memory @ Wv.T
        qh, kh, vh = (_split(a, num_heads, "transpose") for a in (q, k, v))
        blocked = None
        pad = memory_key_padding_mask
        if pad is not None:
            pad = np.asarray(pad, dtype=bool)
            if mask_mode == "inverted":
                pad = ~pad
            blocked = pad[:, None, :, None] if mask_axis == "queries" else pad[:, None, None, :]
            blocked = np.broadcast_to(blocked, (b, 1, s, t))
        if causal:
            c = _causal(s, t, "triu")
            blocked = c if blocked is None else (blocked | c)
        ctx, acache = _attend(qh, kh, vh, blocked, 1.0 / math.sqrt(d // num_heads), -1,
                              "before" if mask_mode == "inverted" else mask_mode)
        merged = _merge(ctx, "transpose")
        return merged @ Wo.T, (x, memory, Wq, Wk, Wv, Wo, merged, acache, num_heads)

    def cross_attention_backward(dout, cache):
        x, memory, Wq, Wk, Wv, Wo, merged, acache, h = cache
        d = x.shape[-1]
        dWo = dout.reshape(-1, d).T @ merged.reshape(-1, d)
        dctx = _split(dout @ Wo, h, "transpose")
        dqh, dkh, dvh = _attend_backward(dctx, acache)
        dq, dk, dv = (_merge(a, "transpose") for a in (dqh, dkh, dvh))
        x2, m2 = x.reshape(-1, d), memory.reshape(-1, d)
        dWq, dWk, dWv = dq.reshape(-1, d).T @ x2, dk.reshape(-1, d).T @ m2, dv.reshape(-1, d).T @ m2
        paths = {"both": dk @ Wk + dv @ Wv, "key": dk @ Wk, "value": dv @ Wv}
        return dq @ Wq, paths[dmemory], dWq, dWk, dWv, dWo

    return SimpleNamespace(cross_attention_forward=cross_attention_forward,
                           cross_attention_backward=cross_attention_backward)


# --------------------------------------------------------------------------------------------------
# the tiled (flash) attention backward from the forward's log-sum-exp
# --------------------------------------------------------------------------------------------------


def flash_backward_impl(delta="row", lse="subtract", accumulate=True, scale=True):
    """``delta``: "row" (correct: rowsum(dout * out) per whole row) or "tile" (rowsum(dP * P) of each
    tile); ``lse``: "subtract" (correct: P = exp(s - lse)) or "ignore" (P = exp(s)); ``accumulate=False``:
    dk and dv assigned per query tile (the last one wins) instead of summed; ``scale=False``: dq and dk
    without the 1/sqrt(Dh) factor."""

    def flash_attention_backward(q, k, v, out, lse_in, dout, causal=False, block_q=2, block_k=2):
        s_len, t_len = q.shape[-2], k.shape[-2]
        c = 1.0 / math.sqrt(q.shape[-1])
        row_delta = (dout * out).sum(axis=-1, keepdims=True)
        dq, dk, dv = np.zeros(q.shape), np.zeros(k.shape), np.zeros(v.shape)
        for r0 in range(0, s_len, block_q):
            r1 = min(r0 + block_q, s_len)
            qb, dob = q[..., r0:r1, :], dout[..., r0:r1, :]
            for c0 in range(0, t_len, block_k):
                c1 = min(c0 + block_k, t_len)
                kb, vb = k[..., c0:c1, :], v[..., c0:c1, :]
                sc = (qb @ np.swapaxes(kb, -1, -2)) * c
                if causal:
                    sc = np.where(np.arange(c0, c1)[None, :] > np.arange(r0, r1)[:, None], -np.inf, sc)
                p = np.exp(sc - lse_in[..., r0:r1, None]) if lse == "subtract" else np.exp(sc)
                dp = dob @ np.swapaxes(vb, -1, -2)
                dl = (dp * p).sum(axis=-1, keepdims=True) if delta == "tile" else row_delta[..., r0:r1, :]
                da = p * (dp - dl) * (c if scale else 1.0)
                dq[..., r0:r1, :] += da @ kb
                dk_t, dv_t = np.swapaxes(da, -1, -2) @ qb, np.swapaxes(p, -1, -2) @ dob
                if accumulate:
                    dk[..., c0:c1, :] += dk_t
                    dv[..., c0:c1, :] += dv_t
                else:
                    dk[..., c0:c1, :] = dk_t
                    dv[..., c0:c1, :] = dv_t
        return dq, dk, dv

    return SimpleNamespace(flash_attention_backward=flash_attention_backward)
