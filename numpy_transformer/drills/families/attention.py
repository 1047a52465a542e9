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
#: the mask put on the scores (``scores = np.where(blocked, -np.inf, ...)``) up to the softmax's ``P = ...``
MASK_TO_P = (r"(?ms)^([ \t]*)scores = np\.where\((\w+), -np\.inf, ([^\n]*?)\)([ \t]*#[^\n]*)?\n(.*?)"
             r"^([ \t]*)P = ([^\n]*?)([ \t]*#[^\n]*)?$")

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
    Family("attn_causal_off_by_one_future", "causal mask off by one: each position also sees the next key "
           "(one future position leaks)",
           "Query i may attend keys j <= i only: the mask blocks j > i, np.triu(..., k=1) (k=T - S + 1 with a "
           "cache of T keys before the S new ones). k=2 lets key i + 1, the next token, through.",
           "block keys j > i: np.triu(np.ones((S, T), dtype=bool), k=1) (k=T - S + 1 with a cache).",
           (((TRIU, r"np.triu(np.ones((\1, \2), dtype=bool), k=2)"),),
            ((KV_CAUSAL, "np.triu(np.ones((S, N), dtype=bool), k=N - S + 2)"),),
            ((FLASH_CAUSAL, "np.arange(c0, c1)[None, :] > np.arange(r0, r1)[:, None] + 1"),))),
    Family("attn_causal_tile_local_indices", "causal mask built from tile-local indices (the tiles' offsets "
           "r0, c0 forgotten): every tile masked like a diagonal block",
           "Query row r0 + i and key column c0 + j are positions r0 + i and c0 + j of the whole sequence: "
           "the mask compares those, np.arange(c0, c1) against np.arange(r0, r1). Indices 0..tile-1 mask "
           "the upper triangle of EVERY tile, the ones below the diagonal included.",
           "blocked = np.arange(c0, c1)[None, :] > np.arange(r0, r1)[:, None].",
           (((FLASH_CAUSAL, "np.arange(c1 - c0)[None, :] > np.arange(r1 - r0)[:, None]"),),)),
    Family("attn_mask_after_softmax", "mask applied after the softmax (masked probabilities zeroed, rows "
           "not renormalised)",
           "Masked scores must be -inf BEFORE the softmax, so that the remaining probabilities of a row "
           "sum to 1; zeroing them afterwards leaves rows that sum to less than 1.",
           "scores = np.where(blocked, -np.inf, scores), then the softmax.",
           (((MASK_TO_P, r"\1scores = \3\n\5\6P = np.where(\2, 0.0, \7)"),),)),
    Family("attn_dv_untransposed", "dv = P dout: P not transposed in the value gradient (dv = P^T dout)",
           "out = P v, so dv = P^T dout (each key's value receives from every query that attended it); P "
           "dout multiplies along the wrong axis (the shapes agree only when S = T).",
           "dv = np.swapaxes(P, -1, -2) @ dout.",
           (((r"np\.swapaxes\(P, -1, -2\) @ (\w+)", r"P @ \1"),),)),
    Family("attn_mask_inverted", "mask convention inverted (True read as 'may attend')",
           "In this drill (as torch.nn.MultiheadAttention and nn.Transformer) True means 'may NOT attend'; "
           "torch.nn.functional.scaled_dot_product_attention reads a bool mask the other way round.",
           "scores = np.where(mask, -np.inf, scores) with the mask as given.",
           (((r"num_heads, (tgt_mask|mask)\)", r"num_heads, None if \1 is None else ~\1)"),),
            ((r"pad = (memory_key_padding_mask)\[", r"pad = ~\1["),),
            ((r"scores = np\.where\((mask|memory_key_padding_mask)\b", r"scores = np.where(~\1"),))),
)
