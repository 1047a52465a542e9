"""Scaled dot-product attention's classic mistakes (the causal mask, the 1/sqrt(Dh) scale), in every
exercise that attends: attention, multi-head, cross-attention, grouped-query, the KV cache, the flash
backward, the encoder and decoder layers."""

from . import Family

TRIU = r"np\.triu\(np\.ones\(\((\w+), (\w+)\), dtype=bool\), k=1\)"
FLASH_CAUSAL = r"np\.arange\(c0, c1\)\[None, :\] > np\.arange\(r0, r1\)\[:, None\]"
KV_CAUSAL = r"np\.triu\(np\.ones\(\(S, N\), dtype=bool\), k=N - S \+ 1\)"

FAMILIES = (
    Family("attn_causal_blocks_diagonal", "causal mask also blocks the diagonal (a position cannot see itself)",
           "np.triu(..., k=0) (or keys j >= i) includes the diagonal; position i must see key i (with a "
           "cache of T keys, new query i sits at T + i and sees keys j <= T + i).",
           "block keys j > i only: np.triu(np.ones((S, T), dtype=bool), k=1) (k=T - S + 1 with a cache).",
           (((TRIU, r"np.triu(np.ones((\1, \2), dtype=bool), k=0)"),),
            ((KV_CAUSAL, "np.triu(np.ones((S, N), dtype=bool), k=N - S)"),),
            ((FLASH_CAUSAL, "np.arange(c0, c1)[None, :] >= np.arange(r0, r1)[:, None]"),))),
    Family("attn_causal_wrong_direction", "causal mask blocks the past instead of the future",
           "Position i may attend keys j <= i: block j > i (the upper triangle), not j < i.",
           "block keys j > i: np.triu(np.ones((S, T), dtype=bool), k=1).",
           (((TRIU, r"np.tril(np.ones((\1, \2), dtype=bool), k=-1)"),),
            ((KV_CAUSAL, "np.tril(np.ones((S, N), dtype=bool), k=N - S - 1)"),),
            ((FLASH_CAUSAL, "np.arange(c0, c1)[None, :] < np.arange(r0, r1)[:, None]"),))),
    Family("attn_backward_no_scale", "the 1/sqrt(Dh) scale forgotten in the backward (dq and dk)",
           "The scores are A = c q k^T with c = 1/sqrt(Dh), so dq = c dA k and dk = c dA^T q: the scale "
           "of the forward appears again in the gradients of q and k (not in dv).",
           "dq = scale * (dA @ k), dk = scale * (dA^T @ q) (or scale dA once).",
           (((r"scale \* (\((?:np\.swapaxes\(dA, -1, -2\)|dA) @ \w+\))", r"\1"),),
            ((r"(dA = P \* \(dP - np\.sum\(dP \* P, (?:axis=)?-1, keepdims=True\)\)) \* scale", r"\1"),),
            ((r"(dA = P \* \(dP - delta\[\.\.\., r0:r1, :\]\)) \* c\b", r"\1"),))),
    Family("attn_scale_sqrt_d", "scaled by 1/sqrt(D) (model width) instead of 1/sqrt(Dh) (head width)",
           "Each head's dot products are over Dh = D / H features; their variance grows with Dh, so the "
           "scale is 1/sqrt(Dh), not 1/sqrt(D).",
           "scale = 1.0 / np.sqrt(D // H).",
           (((r"np\.sqrt\(D // H\)", "np.sqrt(D)"),),)),
    Family("attn_no_scale", "no 1/sqrt(Dh) scaling of the scores",
           "Dot products of Dh-dimensional vectors grow like sqrt(Dh); without the scale the softmax "
           "saturates. The scale is in the forward and, through dA, in dq and dk.",
           "scores = (q @ k^T) / np.sqrt(Dh).",
           (((r"scale = 1\.0 / np\.sqrt\([^()]*\)", "scale = 1.0"),),
            ((r" / np\.sqrt\(Dh\)\)", ")"),),
            ((r"c = 1\.0 / np\.sqrt\(Dh\)", "c = 1.0"),))),
    Family("attn_scale_1_over_dh", "scaled by 1/Dh instead of 1/sqrt(Dh)",
           "The scale is 1/sqrt(Dh): it undoes the sqrt(Dh) growth of a dot product's spread.",
           "scale = 1.0 / np.sqrt(Dh).",
           (((r"scale = 1\.0 / np\.sqrt\(([^()]*)\)", r"scale = 1.0 / (\1)"),),
            ((r"c = 1\.0 / np\.sqrt\(Dh\)", "c = 1.0 / Dh"),),
            ((r" / np\.sqrt\(Dh\)\)", " / Dh)"),))),
)
