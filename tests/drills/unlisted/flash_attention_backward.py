"""Unlisted mistakes for flash_attention_backward."""

MISTAKES = [
    dict(label="the rowsum(dout * out) term dropped from dA",
         keywords=["rowsum", "delta", "dout * out", "row sum"],
         patch=[("dA = P * (dP - delta[..., r0:r1, :]) * c", "dA = P * dP * c")]),
    dict(label="the 1/sqrt(Dh) scale missing in the backward (dA not scaled)",
         keywords=["sqrt", "scale"],
         patch=[("dA = P * (dP - delta[..., r0:r1, :]) * c ", "dA = P * (dP - delta[..., r0:r1, :]) ")]),
    dict(label="causal mask blocks the diagonal (>= instead of >)",
         keywords=["diagonal", "causal", ">="],
         patch=[("blocked = np.arange(c0, c1)[None, :] > np.arange(r0, r1)[:, None]",
                 "blocked = np.arange(c0, c1)[None, :] >= np.arange(r0, r1)[:, None]")]),
    dict(label="P recomputed as exp(s + lse) (sign of the log-sum-exp flipped)",
         keywords=["lse", "log-sum-exp", "sign"],
         patch=[("P = np.exp(s - lse[..., r0:r1, None])", "P = np.exp(s + lse[..., r0:r1, None])")]),
    dict(label="dv built from the forward's output instead of dout",
         keywords=["dv", "dout", "forward's output", "upstream"],
         patch=[("dv[..., c0:c1, :] += np.swapaxes(P, -1, -2) @ dout[..., r0:r1, :]",
                 "dv[..., c0:c1, :] += np.swapaxes(P, -1, -2) @ out[..., r0:r1, :]")]),
    dict(label="delta computed over the wrong axis (sum over positions, not features)",
         keywords=["axis", "delta", "rowsum"],
         patch=[("delta = np.sum(dout * out, axis=-1, keepdims=True)", "delta = np.sum(dout * out, axis=-2, keepdims=True)")]),
    dict(label="dq assigned per key tile instead of accumulated (= for +=)",
         keywords=["accumulat", "+=", "tile", "block"],
         patch=[("dq[..., r0:r1, :] += dA @ k[..., c0:c1, :]", "dq[..., r0:r1, :] = dA @ k[..., c0:c1, :]")]),
]

CORRECT = '''
import numpy as np


def flash_attention_backward(q, k, v, out, lse, dout, causal=False, block_q=2, block_k=2):
    S, T = q.shape[-2], k.shape[-2]
    scale = q.shape[-1] ** -0.5
    D = (dout * out).sum(-1)[..., None]
    dq = np.zeros_like(q, dtype=np.float64)
    dk = np.zeros_like(k, dtype=np.float64)
    dv = np.zeros_like(v, dtype=np.float64)
    for j0 in range(0, T, block_k):
        kj, vj = k[..., j0:j0 + block_k, :], v[..., j0:j0 + block_k, :]
        cols = np.arange(j0, min(j0 + block_k, T))
        for i0 in range(0, S, block_q):
            rows = np.arange(i0, min(i0 + block_q, S))
            qi, doi = q[..., i0:i0 + block_q, :], dout[..., i0:i0 + block_q, :]
            logits = np.einsum("...id,...jd->...ij", qi, kj) * scale
            if causal:
                logits = np.where(cols[None, :] <= rows[:, None], logits, -np.inf)
            prob = np.exp(logits - lse[..., i0:i0 + block_q][..., None])
            dv[..., j0:j0 + block_k, :] += np.einsum("...ij,...id->...jd", prob, doi)
            dprob = np.einsum("...id,...jd->...ij", doi, vj)
            dlog = prob * (dprob - D[..., i0:i0 + block_q, :])
            dq[..., i0:i0 + block_q, :] += scale * np.einsum("...ij,...jd->...id", dlog, kj)
            dk[..., j0:j0 + block_k, :] += scale * np.einsum("...ij,...id->...jd", dlog, qi)
    return dq, dk, dv
'''
