"""The backward of tiled (flash) attention from the forward's log-sum-exp."""

import numpy as np


def flash_attention_backward(q, k, v, out, lse, dout, causal=False, block_q=2, block_k=2):
    """(q, k, v, out, lse, dout) -> (dq, dk, dv), one (block_q, block_k) tile at a time.

    P = exp(s - lse) recomputes a tile of the exact softmax. Per tile: dv += P^T dout,
    dP = dout v^T, dA = P * (dP - delta), dq += c dA k, dk += c dA^T q, where the softmax's row
    sum delta = rowsum(dP * P) = rowsum(dout * (P v)) = rowsum(dout * out) is known per row before
    any tile: that is what lets tiles be processed independently.
    """
    S, T, Dh = q.shape[-2], k.shape[-2], q.shape[-1]
    c = 1.0 / np.sqrt(Dh)
    delta = np.sum(dout * out, axis=-1, keepdims=True)          # (B, H, S, 1): whole rows
    dq, dk, dv = np.zeros(q.shape), np.zeros(k.shape), np.zeros(v.shape)
    for r0 in range(0, S, block_q):
        r1 = min(r0 + block_q, S)
        for c0 in range(0, T, block_k):
            c1 = min(c0 + block_k, T)
            s = (q[..., r0:r1, :] @ np.swapaxes(k[..., c0:c1, :], -1, -2)) * c   # (B, H, bq, bk)
            if causal:
                blocked = np.arange(c0, c1)[None, :] > np.arange(r0, r1)[:, None]
                s = np.where(blocked, -np.inf, s)
            P = np.exp(s - lse[..., r0:r1, None])               # exact probabilities of the tile
            dv[..., c0:c1, :] += np.swapaxes(P, -1, -2) @ dout[..., r0:r1, :]
            dP = dout[..., r0:r1, :] @ np.swapaxes(v[..., c0:c1, :], -1, -2)
            dA = P * (dP - delta[..., r0:r1, :]) * c            # (B, H, bq, bk), scale included
            dq[..., r0:r1, :] += dA @ k[..., c0:c1, :]
            dk[..., c0:c1, :] += np.swapaxes(dA, -1, -2) @ q[..., r0:r1, :]
    return dq, dk, dv
