"""Fresh unlisted mistakes for flash_attention_backward."""

MISTAKES = [
    dict(label="delta taken per tile (rowsum(dP * P) of the tile) instead of over the whole row",
         keywords=["delta", "row sum", "rowsum", "whole row"],
         patch=[("dA = P * (dP - delta[..., r0:r1, :]) * c ", "dA = P * (dP - np.sum(dP * P, axis=-1, keepdims=True)) * c ")]),
    dict(label="the causal mask never applied in the backward",
         keywords=["causal", "mask"],
         patch=[("                s = np.where(blocked, -np.inf, s)\n", "")]),
    dict(label="the 1/sqrt(Dh) scale applied twice to dq",
         keywords=["scale", "sqrt", "twice"],
         patch=[("dq[..., r0:r1, :] += dA @ k[..., c0:c1, :]", "dq[..., r0:r1, :] += (dA @ k[..., c0:c1, :]) * c")]),
    dict(label="causal mask built from tile-local indices (the tiles' offsets forgotten)",
         keywords=["offset", "tile", "causal", "block"],
         patch=[("blocked = np.arange(c0, c1)[None, :] > np.arange(r0, r1)[:, None]",
                 "blocked = np.arange(c1 - c0)[None, :] > np.arange(r1 - r0)[:, None]")]),
    dict(label="dk assigned per query tile instead of accumulated (= for +=)",
         keywords=["accumulat", "+=", "overwrit", "sum over"],
         patch=[("dk[..., c0:c1, :] += np.swapaxes(dA, -1, -2)", "dk[..., c0:c1, :] = np.swapaxes(dA, -1, -2)")]),
]

CORRECT = '''
import numpy as np


def flash_attention_backward(q, k, v, out, lse, dout, causal=False, block_q=2, block_k=2):
    n_q, n_k, width = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = width ** -0.5
    row_dot = np.einsum("...sd,...sd->...s", dout, out)
    grads_q = np.zeros_like(q, dtype=np.float64)
    grads_k = np.zeros_like(k, dtype=np.float64)
    grads_v = np.zeros_like(v, dtype=np.float64)
    for j in range(0, n_k, block_k):
        kj, vj = k[..., j:j + block_k, :], v[..., j:j + block_k, :]
        cols = np.arange(j, min(j + block_k, n_k))
        for i in range(0, n_q, block_q):
            qi, gi = q[..., i:i + block_q, :], dout[..., i:i + block_q, :]
            rows = np.arange(i, min(i + block_q, n_q))
            logits = np.einsum("...sd,...td->...st", qi, kj) * scale
            if causal:
                logits = np.where(cols[None, :] <= rows[:, None], logits, -np.inf)
            probs = np.exp(logits - lse[..., i:i + block_q][..., None])
            grads_v[..., j:j + block_k, :] += np.einsum("...st,...sv->...tv", probs, gi)
            dprobs = np.einsum("...sv,...tv->...st", gi, vj)
            dlog = probs * (dprobs - row_dot[..., i:i + block_q][..., None])
            grads_q[..., i:i + block_q, :] += scale * np.einsum("...st,...td->...sd", dlog, kj)
            grads_k[..., j:j + block_k, :] += scale * np.einsum("...st,...sd->...td", dlog, qi)
    return grads_q, grads_k, grads_v
'''
