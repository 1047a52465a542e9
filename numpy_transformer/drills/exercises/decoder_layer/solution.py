"""A Transformer decoder layer, post-LN (self-attention, cross-attention, ReLU feed-forward),
forward and backward."""

import numpy as np

EPS = 1e-5


# ---- building blocks: each forward returns (out, cache), each backward consumes its cache --------

def _ln_forward(x, gamma, beta):
    mu = x.mean(axis=-1, keepdims=True)
    xc = x - mu
    rstd = 1.0 / np.sqrt(np.mean(xc * xc, axis=-1, keepdims=True) + EPS)
    xhat = xc * rstd
    return xhat * gamma + beta, (xhat, rstd, gamma)


def _ln_backward(dy, cache):
    xhat, rstd, gamma = cache
    lead = tuple(range(dy.ndim - 1))
    dxhat = dy * gamma
    dx = rstd * (dxhat - dxhat.mean(-1, keepdims=True)
                 - xhat * np.mean(dxhat * xhat, -1, keepdims=True))
    return dx, np.sum(dy * xhat, axis=lead), np.sum(dy, axis=lead)


def _lin_grads(dy, x, W):
    """y = x W^T (no bias): (dx, dW)."""
    return dy @ W, dy.reshape(-1, dy.shape[-1]).T @ x.reshape(-1, x.shape[-1])


def _split(t, H):
    """(B, L, D) -> (B, H, L, Dh)."""
    B, L, D = t.shape
    return t.reshape(B, L, H, D // H).transpose(0, 2, 1, 3)


def _merge(t):
    """(B, H, L, Dh) -> (B, L, D)."""
    B, H, L, Dh = t.shape
    return t.transpose(0, 2, 1, 3).reshape(B, L, H * Dh)


def _mha_forward(xq, xkv, W, H, blocked):
    """Queries from xq (B, S, D), keys and values from xkv (B, T, D); W = (Wq, Wk, Wv, Wo);
    blocked: bool broadcastable to (B, H, S, T), True = may not attend, or None."""
    Wq, Wk, Wv, Wo = W
    D = xq.shape[-1]
    qh, kh, vh = _split(xq @ Wq.T, H), _split(xkv @ Wk.T, H), _split(xkv @ Wv.T, H)
    scale = 1.0 / np.sqrt(D // H)
    scores = (qh @ np.swapaxes(kh, -1, -2)) * scale                       # (B, H, S, T)
    if blocked is not None:
        scores = np.where(blocked, -np.inf, scores)
    m = scores.max(-1, keepdims=True)
    e = np.exp(scores - np.where(np.isneginf(m), 0.0, m))
    s = e.sum(-1, keepdims=True)
    P = e / np.where(s == 0, 1.0, s)
    ctx = _merge(P @ vh)                                                  # (B, S, D)
    return ctx @ Wo.T, (xq, xkv, qh, kh, vh, P, ctx, scale, H)


def _mha_backward(dy, cache, W):
    """-> (dxq, dxk, dxv, (dWq, dWk, dWv, dWo)): the gradient reaching xq through the queries, and
    xkv through the keys and through the values (the caller adds the paths of one input)."""
    Wq, Wk, Wv, Wo = W
    xq, xkv, qh, kh, vh, P, ctx, scale, H = cache
    dctx, dWo = _lin_grads(dy, ctx, Wo)
    dctx = _split(dctx, H)
    dvh = np.swapaxes(P, -1, -2) @ dctx
    dP = dctx @ np.swapaxes(vh, -1, -2)
    dA = P * (dP - np.sum(dP * P, -1, keepdims=True)) * scale
    dxq, dWq = _lin_grads(_merge(dA @ kh), xq, Wq)
    dxk, dWk = _lin_grads(_merge(np.swapaxes(dA, -1, -2) @ qh), xkv, Wk)
    dxv, dWv = _lin_grads(_merge(dvh), xkv, Wv)
    return dxq, dxk, dxv, (dWq, dWk, dWv, dWo)


def _ffn_forward(x, p):
    a = x @ p["W1"].T + p["b1"]                                           # (B, S, F)
    r = np.maximum(a, 0.0)
    return r @ p["W2"].T + p["b2"], (x, a, r)


def _ffn_backward(dy, cache, p, g):
    x, a, r = cache
    dr, g["W2"] = _lin_grads(dy, r, p["W2"])
    g["b2"] = dy.reshape(-1, dy.shape[-1]).sum(0)
    da = dr * (a > 0)                                                     # ReLU passes where a > 0
    dx, g["W1"] = _lin_grads(da, x, p["W1"])
    g["b1"] = da.reshape(-1, da.shape[-1]).sum(0)
    return dx


# ---- the layer -----------------------------------------------------------------------------------

SA, CA = ("Wq", "Wk", "Wv", "Wo"), ("cWq", "cWk", "cWv", "cWo")


def decoder_layer_forward(tgt, memory, params, num_heads, tgt_mask=None,
                          memory_key_padding_mask=None):
    """tgt (B, S, D), memory (B, T, D) -> (out (B, S, D), cache).

    post-LN (torch's default):  h1 = LN1(tgt + SA(tgt));  h2 = LN2(h1 + CA(h1, memory));
                                y = LN3(h2 + FF(h2))
    SA: self-attention with tgt_mask (S, S); CA: queries from h1, keys and values from memory,
    the padding mask (B, T) on the key axis; no biases, scale 1/sqrt(Dh);
    FF(z) = relu(z W1^T + b1) W2^T + b2.
    """
    p = params
    sa, c_sa = _mha_forward(tgt, tgt, [p[k] for k in SA], num_heads, tgt_mask)
    h1, c_n1 = _ln_forward(tgt + sa, p["gamma1"], p["beta1"])
    pad = None
    if memory_key_padding_mask is not None:
        pad = memory_key_padding_mask[:, None, None, :]               # (B, 1, 1, T): the key axis
    ca, c_ca = _mha_forward(h1, memory, [p[k] for k in CA], num_heads, pad)
    h2, c_n2 = _ln_forward(h1 + ca, p["gamma2"], p["beta2"])
    f, c_f = _ffn_forward(h2, p)
    y, c_n3 = _ln_forward(h2 + f, p["gamma3"], p["beta3"])
    return y, (p, c_sa, c_n1, c_ca, c_n2, c_f, c_n3)


def decoder_layer_backward(dout, cache):
    """dout (B, S, D) -> (dtgt (B, S, D), dmemory (B, T, D), grads keyed like params).

    Backwards through the three sub-layers; each residual z = x + f(x) sends dz to x directly
    and through f. memory reaches the output only through cross-attention's keys and values: dmemory
    is the sum of those two paths; h1 also feeds the cross-attention's queries.
    """
    p, c_sa, c_n1, c_ca, c_n2, c_f, c_n3 = cache
    g = {}
    dz3, g["gamma3"], g["beta3"] = _ln_backward(dout, c_n3)
    dh2 = dz3 + _ffn_backward(dz3, c_f, p, g)                             # z3 = h2 + FF(h2)
    dz2, g["gamma2"], g["beta2"] = _ln_backward(dh2, c_n2)
    dq_ca, dk_ca, dv_ca, gw = _mha_backward(dz2, c_ca, [p[k] for k in CA])
    g.update(zip(CA, gw))
    dmemory = dk_ca + dv_ca                                               # memory fed k and v
    dh1 = dz2 + dq_ca                                                     # z2 = h1 + CA(h1, memory)
    dz1, g["gamma1"], g["beta1"] = _ln_backward(dh1, c_n1)
    dq_sa, dk_sa, dv_sa, gw = _mha_backward(dz1, c_sa, [p[k] for k in SA])
    g.update(zip(SA, gw))
    dtgt = dz1 + dq_sa + dk_sa + dv_sa                                    # z1 = tgt + SA(tgt)
    return dtgt, dmemory, g
