"""Multi-head cross-attention (no biases) with a memory padding mask, forward and backward."""

import numpy as np


def _split_heads(x, H):
    """(B, L, D) -> (B, H, L, Dh)."""
    B, L, D = x.shape
    return x.reshape(B, L, H, D // H).transpose(0, 2, 1, 3)


def _merge_heads(x):
    """(B, H, L, Dh) -> (B, L, D)."""
    B, H, L, Dh = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, L, H * Dh)


def cross_attention_forward(x, memory, Wq, Wk, Wv, Wo, num_heads, memory_key_padding_mask=None):
    """x (B, S, D), memory (B, T, D), W* (D, D) -> (out (B, S, D), cache).

    Queries come from x, keys and values from memory; the padding mask (B, T) blocks memory
    positions for every query and head of its batch element: it lines up with the key axis of the
    (B, H, S, T) scores. No causal mask: the memory is entirely known.
    """
    H = num_heads
    D = x.shape[-1]
    qh = _split_heads(x @ Wq.T, H)                                       # (B, H, S, Dh)
    kh = _split_heads(memory @ Wk.T, H)                                  # (B, H, T, Dh)
    vh = _split_heads(memory @ Wv.T, H)                                  # (B, H, T, Dh)
    scale = 1.0 / np.sqrt(D // H)
    scores = (qh @ np.swapaxes(kh, -1, -2)) * scale                      # (B, H, S, T)
    if memory_key_padding_mask is not None:
        scores = np.where(memory_key_padding_mask[:, None, None, :], -np.inf, scores)
    m = scores.max(axis=-1, keepdims=True)
    e = np.exp(scores - np.where(np.isneginf(m), 0.0, m))
    s = e.sum(axis=-1, keepdims=True)
    P = e / np.where(s == 0, 1.0, s)                                     # (B, H, S, T)
    ctx = _merge_heads(P @ vh)                                           # (B, S, D)
    return ctx @ Wo.T, (x, memory, Wq, Wk, Wv, Wo, qh, kh, vh, P, ctx, scale, H)


def cross_attention_backward(dout, cache):
    """dout (B, S, D) -> (dx (B, S, D), dmemory (B, T, D), dWq, dWk, dWv, dWo (D, D)).

    As multi-head self-attention's backward, except for who feeds what: x only feeds the queries
    (dx = dq Wq), memory feeds both the keys and the values (dmemory = dk Wk + dv Wv).
    """
    x, memory, Wq, Wk, Wv, Wo, qh, kh, vh, P, ctx, scale, H = cache
    D = x.shape[-1]
    dWo = dout.reshape(-1, D).T @ ctx.reshape(-1, D)                     # (D, D)
    dctx = _split_heads(dout @ Wo, H)                                    # (B, H, S, Dh)
    dvh = np.swapaxes(P, -1, -2) @ dctx                                  # (B, H, T, Dh)
    dP = dctx @ np.swapaxes(vh, -1, -2)                                  # (B, H, S, T)
    dA = P * (dP - np.sum(dP * P, axis=-1, keepdims=True)) * scale
    dq = _merge_heads(dA @ kh)                                           # (B, S, D)
    dk = _merge_heads(np.swapaxes(dA, -1, -2) @ qh)                      # (B, T, D)
    dv = _merge_heads(dvh)                                               # (B, T, D)
    dWq = dq.reshape(-1, D).T @ x.reshape(-1, D)
    dWk = dk.reshape(-1, D).T @ memory.reshape(-1, D)
    dWv = dv.reshape(-1, D).T @ memory.reshape(-1, D)
    dx = dq @ Wq
    dmemory = dk @ Wk + dv @ Wv                                          # two paths add
    return dx, dmemory, dWq, dWk, dWv, dWo
