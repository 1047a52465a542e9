"""Multi-head self-attention (no biases), forward and backward."""

import numpy as np


def _split_heads(x, H):
    """(B, S, D) -> (B, H, S, Dh): reshape the feature axis into (H, Dh), *then* move H before S."""
    B, S, D = x.shape
    return x.reshape(B, S, H, D // H).transpose(0, 2, 1, 3)


def _merge_heads(x):
    """(B, H, S, Dh) -> (B, S, D): the inverse, transpose back *before* reshaping."""
    B, H, S, Dh = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, S, H * Dh)


def mha_forward(x, Wq, Wk, Wv, Wo, num_heads, mask=None, causal=False):
    """x (B, S, D), W* (D, D) in torch's layout (y = x @ W.T) -> (out (B, S, D), cache).

    q, k, v = x Wq^T, x Wk^T, x Wv^T; each is split into H heads of width Dh = D / H; every head
    attends with scale 1/sqrt(Dh) (the head width, not D); the heads are merged back and projected
    by Wo. mask (S, S) bool, True = may not attend; causal blocks keys j > i. Rows with every key
    masked output zeros.
    """
    B, S, D = x.shape
    H = num_heads
    Dh = D // H
    q, k, v = x @ Wq.T, x @ Wk.T, x @ Wv.T                                 # (B, S, D)
    qh, kh, vh = _split_heads(q, H), _split_heads(k, H), _split_heads(v, H)   # (B, H, S, Dh)
    blocked = np.zeros((S, S), dtype=bool)
    if mask is not None:
        blocked = blocked | mask
    if causal:
        blocked = blocked | np.triu(np.ones((S, S), dtype=bool), k=1)
    scale = 1.0 / np.sqrt(Dh)
    scores = np.where(blocked, -np.inf, (qh @ np.swapaxes(kh, -1, -2)) * scale)   # (B, H, S, S)
    m = scores.max(axis=-1, keepdims=True)
    e = np.exp(scores - np.where(np.isneginf(m), 0.0, m))
    s = e.sum(axis=-1, keepdims=True)
    P = e / np.where(s == 0, 1.0, s)                                      # (B, H, S, S)
    ctx = _merge_heads(P @ vh)                                            # (B, S, D)
    out = ctx @ Wo.T                                                      # (B, S, D)
    return out, (x, Wq, Wk, Wv, Wo, qh, kh, vh, P, ctx, scale, H)


def mha_backward(dout, cache):
    """dout (B, S, D) -> (dx (B, S, D), dWq, dWk, dWv, dWo (D, D)).

    Walk the forward backwards: the output projection is a linear layer; merging heads is undone by
    splitting them (and vice versa); attention per head as in scaled_dot_product_attention; then the
    three input projections. x feeds q, k *and* v, so dx is the sum of the three paths.
    """
    x, Wq, Wk, Wv, Wo, qh, kh, vh, P, ctx, scale, H = cache
    D = x.shape[-1]
    x2 = x.reshape(-1, D)
    dWo = dout.reshape(-1, D).T @ ctx.reshape(-1, D)                      # (D, D)
    dctx = _split_heads(dout @ Wo, H)                                     # (B, H, S, Dh)
    dvh = np.swapaxes(P, -1, -2) @ dctx
    dP = dctx @ np.swapaxes(vh, -1, -2)
    dA = P * (dP - np.sum(dP * P, axis=-1, keepdims=True)) * scale
    dqh = dA @ kh
    dkh = np.swapaxes(dA, -1, -2) @ qh
    dq, dk, dv = _merge_heads(dqh), _merge_heads(dkh), _merge_heads(dvh)  # (B, S, D)
    dWq = dq.reshape(-1, D).T @ x2
    dWk = dk.reshape(-1, D).T @ x2
    dWv = dv.reshape(-1, D).T @ x2
    dx = dq @ Wq + dk @ Wk + dv @ Wv                                      # three paths add
    return dx, dWq, dWk, dWv, dWo
