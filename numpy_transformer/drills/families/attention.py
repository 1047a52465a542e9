"""Scaled dot-product attention's classic mistakes (the causal mask, the 1/sqrt(Dh) scale), in every
exercise that attends: attention, multi-head, cross-attention, grouped-query, the KV cache, the flash
backward, the encoder and decoder layers."""

from . import Family

TRIU = r"np\.triu\(np\.ones\(\((\w+), (\w+)\), dtype=bool\), k=1\)"
FLASH_CAUSAL = r"np\.arange\(c0, c1\)\[None, :\] > np\.arange\(r0, r1\)\[:, None\]"
KV_CAUSAL = r"np\.triu\(np\.ones\(\(S, N\), dtype=bool\), k=N - S \+ 1\)"
#: from the code line that assigns a length ``L`` (``S, T, Dh = ...``, ``N = ...``) to the scale's square root
SCALE_AFTER = (r"(?m)(^[ \t]*[\w, ]*\b{L}\b[\w, ]* = [^\n]*\n(?:[^\n]*\n)*?"
               r"[^\n]*(?:(?:scale|c) = 1\.0 |\)\) )/ np\.sqrt\()(?:Dh|D // H)\)")
#: a tile's gradient added into its rows of the whole gradient (the flash backward)
TILE_ADD = r"({g}\[\.\.\., \w+:\w+, :\]) \+="

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
    Family("attn_scale_sequence_length", "scaled by 1/sqrt(sequence length) instead of 1/sqrt(Dh) (the head width)",
           "The scale undoes the growth of a dot product of two Dh-dimensional vectors (its spread grows "
           "like sqrt(Dh)); the number of keys or queries has nothing to do with it.",
           "scale = 1.0 / np.sqrt(Dh) with Dh = q.shape[-1].",
           (((SCALE_AFTER.format(L="T"), r"\1T)"),),
            ((SCALE_AFTER.format(L="N"), r"\1N)"),),
            ((SCALE_AFTER.format(L="S"), r"\1S)"),))),
    Family("attn_tile_grad_not_accumulated", "a gradient assigned per tile instead of accumulated over the tiles "
           "(= for +=)",
           "Each query row meets every key tile, and each key every query tile: dq of a row is the sum of "
           "its tiles' dA k, dk and dv of a key the sums over the query tiles. Assigning keeps only the "
           "last tile's share.",
           "dq[..., r0:r1, :] += dA @ k[..., c0:c1, :] (and += for dk and dv).",
           # (dk or dv alone: the flash exercise lists that one, "dk and dv assigned per query tile")
           (((TILE_ADD.format(g="dq"), r"\1 ="),),
            ((TILE_ADD.format(g="d[qkv]"), r"\1 ="),))),
)
