"""Third-set mistakes for flash_attention_backward."""

MISTAKES = [
    dict(label="the recomputed scores not scaled by 1/sqrt(Dh) before the exp (P wrong)",
         keywords=["scale", "scores", "1/sqrt"],
         patch=[("s = (q[..., r0:r1, :] @ np.swapaxes(k[..., c0:c1, :], -1, -2)) * c ", "s = (q[..., r0:r1, :] @ np.swapaxes(k[..., c0:c1, :], -1, -2)) ")]),
    dict(label="dv accumulates P dout (P not transposed)",
         keywords=["transpos", "p^t"],
         patch=[("dv[..., c0:c1, :] += np.swapaxes(P, -1, -2) @ dout[..., r0:r1, :]", "dv[..., c0:c1, :] += P @ dout[..., r0:r1, :]")]),
    dict(label="causal mask transposed (blocks the past, keeps the future)",
         keywords=["causal", "future", "past"],
         patch=[("blocked = np.arange(c0, c1)[None, :] > np.arange(r0, r1)[:, None]", "blocked = np.arange(r0, r1)[None, :] > np.arange(c0, c1)[:, None]")]),
    dict(label="lse sliced with the key tile's indices instead of the query tile's",
         keywords=["lse", "log-sum-exp", "logsumexp"],
         patch=[("P = np.exp(s - lse[..., r0:r1, None])", "P = np.exp(s - lse[..., c0:c1, None])")]),
]

CORRECT = '''
import numpy as np


def flash_attention_backward(q, k, v, out, lse, dout, causal=False, block_q=2, block_k=2):
    S, T, Dh = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = Dh ** -0.5
    D = np.einsum("...sd,...sd->...s", dout, out)
    dq = np.zeros_like(q, dtype=np.float64)
    dk = np.zeros_like(k, dtype=np.float64)
    dv = np.zeros_like(v, dtype=np.float64)
    for c0 in range(0, T, block_k):
        cols = slice(c0, min(T, c0 + block_k))
        kj, vj = k[..., cols, :], v[..., cols, :]
        for r0 in range(0, S, block_q):
            rows = slice(r0, min(S, r0 + block_q))
            qi, gi = q[..., rows, :], dout[..., rows, :]
            logits = np.einsum("...id,...jd->...ij", qi, kj) * scale
            if causal:
                ri = np.arange(S)[rows][:, None]
                cj = np.arange(T)[cols][None, :]
                logits = np.where(cj <= ri, logits, -np.inf)
            Pt = np.exp(logits - lse[..., rows][..., None])
            dv[..., cols, :] += np.einsum("...ij,...id->...jd", Pt, gi)
            dPt = np.einsum("...id,...jd->...ij", gi, vj)
            ds = Pt * (dPt - D[..., rows][..., None])
            dq[..., rows, :] += scale * np.einsum("...ij,...jd->...id", ds, kj)
            dk[..., cols, :] += scale * np.einsum("...ij,...id->...jd", ds, qi)
    return dq, dk, dv
'''
