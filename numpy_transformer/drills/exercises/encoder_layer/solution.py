"""A Transformer encoder layer (self-attention + ReLU feed-forward, residuals, LayerNorm), forward
and backward."""

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


def _attn_forward(x, p, H, mask):
    B, S, D = x.shape
    split = lambda t: t.reshape(B, S, H, D // H).transpose(0, 2, 1, 3)   # (B, H, S, Dh)
    qh, kh, vh = split(x @ p["Wq"].T), split(x @ p["Wk"].T), split(x @ p["Wv"].T)
    scale = 1.0 / np.sqrt(D // H)
    scores = (qh @ np.swapaxes(kh, -1, -2)) * scale                       # (B, H, S, S)
    if mask is not None:
        scores = np.where(mask, -np.inf, scores)
    m = scores.max(-1, keepdims=True)
    e = np.exp(scores - np.where(np.isneginf(m), 0.0, m))
    s = e.sum(-1, keepdims=True)
    P = e / np.where(s == 0, 1.0, s)
    ctx = (P @ vh).transpose(0, 2, 1, 3).reshape(B, S, D)                 # merge heads
    return ctx @ p["Wo"].T, (x, qh, kh, vh, P, ctx, scale, H)


def _attn_backward(dy, cache, p, g):
    x, qh, kh, vh, P, ctx, scale, H = cache
    B, S, D = x.shape
    split = lambda t: t.reshape(B, S, H, D // H).transpose(0, 2, 1, 3)
    merge = lambda t: t.transpose(0, 2, 1, 3).reshape(B, S, D)
    dctx, g["Wo"] = _lin_grads(dy, ctx, p["Wo"])
    dctx = split(dctx)
    dvh = np.swapaxes(P, -1, -2) @ dctx
    dP = dctx @ np.swapaxes(vh, -1, -2)
    dA = P * (dP - np.sum(dP * P, -1, keepdims=True)) * scale
    dx_q, g["Wq"] = _lin_grads(merge(dA @ kh), x, p["Wq"])
    dx_k, g["Wk"] = _lin_grads(merge(np.swapaxes(dA, -1, -2) @ qh), x, p["Wk"])
    dx_v, g["Wv"] = _lin_grads(merge(dvh), x, p["Wv"])
    return dx_q + dx_k + dx_v                                             # x fed q, k and v


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

def encoder_layer_forward(x, params, num_heads, mask=None, norm_first=False):
    """x (B, S, D) -> (out (B, S, D), cache).

    post-LN (norm_first=False, torch's default):  h = LN1(x + SA(x));   y = LN2(h + FF(h))
    pre-LN  (norm_first=True):                     h = x + SA(LN1(x));   y = h + FF(LN2(h))
    SA: multi-head self-attention without biases (scale 1/sqrt(Dh));
    FF(z) = relu(z W1^T + b1) W2^T + b2.
    """
    p = params
    if norm_first:
        n1, c_n1 = _ln_forward(x, p["gamma1"], p["beta1"])
        a, c_a = _attn_forward(n1, p, num_heads, mask)
        h = x + a
        n2, c_n2 = _ln_forward(h, p["gamma2"], p["beta2"])
        f, c_f = _ffn_forward(n2, p)
        y = h + f
    else:
        a, c_a = _attn_forward(x, p, num_heads, mask)
        h, c_n1 = _ln_forward(x + a, p["gamma1"], p["beta1"])
        f, c_f = _ffn_forward(h, p)
        y, c_n2 = _ln_forward(h + f, p["gamma2"], p["beta2"])
    return y, (norm_first, p, c_n1, c_a, c_n2, c_f)


def encoder_layer_backward(dout, cache):
    """dout (B, S, D) -> (dx (B, S, D), grads) with grads keyed like params.

    A residual y = x + f(x) sends dy to x directly *and* through f: the two gradients add. Post-LN
    goes through each LayerNorm's backward first; pre-LN adds the residual's dy after each branch.
    """
    norm_first, p, c_n1, c_a, c_n2, c_f = cache
    g = {}
    if norm_first:
        dn2, g["gamma2"], g["beta2"] = _ln_backward(_ffn_backward(dout, c_f, p, g), c_n2)
        dh = dout + dn2                                                   # y = h + FF(LN2(h))
        dn1, g["gamma1"], g["beta1"] = _ln_backward(_attn_backward(dh, c_a, p, g), c_n1)
        dx = dh + dn1                                                     # h = x + SA(LN1(x))
    else:
        # y = LN2(z2), z2 = h + FF(h)
        dz2, g["gamma2"], g["beta2"] = _ln_backward(dout, c_n2)
        dh = dz2 + _ffn_backward(dz2, c_f, p, g)
        # h = LN1(z1), z1 = x + SA(x)
        dz1, g["gamma1"], g["beta1"] = _ln_backward(dh, c_n1)
        dx = dz1 + _attn_backward(dz1, c_a, p, g)
    return dx, g
