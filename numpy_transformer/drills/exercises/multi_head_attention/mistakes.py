"""The classic mistakes of the multi_head_attention drill: each a patch of this folder's ``solution.py``
(``(text in the solution, what a person making the mistake writes)``; see docs/drills.md)."""

from __future__ import annotations

from ...engine.definition import Mistake
from ..attention_mistakes import shared

MISTAKES = (
    Mistake("mha_reshape_only_split", "heads split with a reshape only (no transpose)",
            "(B, S, D).reshape(B, H, S, Dh) cuts the flat memory into H blocks that mix positions; "
            "a head is the Dh-wide slice of every position: reshape to (B, S, H, Dh), then transpose.",
            "q.reshape(B, S, H, Dh).transpose(0, 2, 1, 3); merge back with .transpose(0, 2, 1, 3)"
            ".reshape(B, S, D).",
        [
            ('return x.reshape(B, S, H, D // H).transpose(0, 2, 1, 3)',
             'return x.reshape(B, H, S, D // H)'),
            ('return x.transpose(0, 2, 1, 3).reshape(B, S, H * Dh)',
             'return x.reshape(B, S, H * Dh)'),
        ],
        also=([('return x.reshape(B, S, H, D // H).transpose(0, 2, 1, 3)', 'return x.reshape(B, H, S, D // H)')],)),
    Mistake("mha_merge_without_transpose", "heads merged without the transpose",
            "(B, H, S, Dh).reshape(B, S, D) interleaves positions of one head instead of concatenating "
            "the heads of one position.",
            "ctx.transpose(0, 2, 1, 3).reshape(B, S, D).",
        [
            ('ctx = _merge_heads(P @ vh)',
             'ctx = (P @ vh).reshape(B, S, D)'),
            ('dctx = _split_heads(dout @ Wo, H)',
             'dctx = (dout @ Wo).reshape(dout.shape[0], H, -1, D // H)'),
        ]),
    Mistake("mha_no_scale", "no 1/sqrt(Dh) scaling",
            "The scores need the 1/sqrt(Dh) factor (Dh = D/H, the head width).",
            "scores = qh @ kh^T / np.sqrt(Dh).",
        [
            ('scale = 1.0 / np.sqrt(Dh)',
             'scale = 1.0'),
        ]),
    Mistake("mha_scale_1_over_dh", "scaled by 1/Dh instead of 1/sqrt(Dh)",
            "The dot product's std grows like sqrt(Dh), so the scale is 1/sqrt(Dh).",
            "scores = qh @ kh^T / np.sqrt(Dh).",
        [
            ('scale = 1.0 / np.sqrt(Dh)',
             'scale = 1.0 / Dh'),
        ]),
    Mistake("mha_scale_sqrt_d", "scaled by 1/sqrt(D) (model width) instead of 1/sqrt(Dh) (head width)",
            "Each head's dot product has Dh = D/H terms: the scale uses the head width.",
            "scores = qh @ kh^T / np.sqrt(D // H).",
        [
            ('scale = 1.0 / np.sqrt(Dh)',
             'scale = 1.0 / np.sqrt(D)'),
        ]),
    Mistake("mha_weights_untransposed", "projections computed as x @ W instead of x @ W.T",
            "Weights have torch's layout (Dout, Din): q = x @ Wq.T.",
            "q = x @ Wq.T, ..., out = ctx @ Wo.T; then dW = dy2.T @ x2.",
        [
            ('q, k, v = x @ Wq.T, x @ Wk.T, x @ Wv.T',
             'q, k, v = x @ Wq, x @ Wk, x @ Wv'),
            ('out = ctx @ Wo.T',
             'out = ctx @ Wo'),
            ('dWo = dout.reshape(-1, D).T @ ctx.reshape(-1, D)',
             'dWo = ctx.reshape(-1, D).T @ dout.reshape(-1, D)'),
            ('dctx = _split_heads(dout @ Wo, H)',
             'dctx = _split_heads(dout @ Wo.T, H)'),
            ('dWq = dq.reshape(-1, D).T @ x2',
             'dWq = x2.T @ dq.reshape(-1, D)'),
            ('dWk = dk.reshape(-1, D).T @ x2',
             'dWk = x2.T @ dk.reshape(-1, D)'),
            ('dWv = dv.reshape(-1, D).T @ x2',
             'dWv = x2.T @ dv.reshape(-1, D)'),
            ('dx = dq @ Wq + dk @ Wk + dv @ Wv',
             'dx = dq @ Wq.T + dk @ Wk.T + dv @ Wv.T'),
        ]),
    Mistake("mha_backward_qkv_not_summed", "dx only from one projection (x feeds q, k and v)",
            "x is used three times (q = x Wq^T, k = x Wk^T, v = x Wv^T): its gradient is the sum of the "
            "three paths.",
            "dx = dq @ Wq + dk @ Wk + dv @ Wv (with dq, dk, dv merged back to (B, S, D)).",
        [
            ('dx = dq @ Wq + dk @ Wk + dv @ Wv',
             'dx = dq @ Wq'),
        ]),
    Mistake("mha_backward_no_rowsum", "softmax backward missing the row-sum term",
            "dscores = P * dP forgets the softmax Jacobian's -P P^T part.",
            "dscores = P * (dP - np.sum(dP * P, axis=-1, keepdims=True)).",
        [
            ('dA = P * (dP - np.sum(dP * P, axis=-1, keepdims=True)) * scale',
             'dA = P * dP * scale'),
        ]),
    shared('attn_mask_after_softmax', [
        ('scores = np.where(blocked, -np.inf, (qh @ np.swapaxes(kh, -1, -2)) * scale)',
         'scores = (qh @ np.swapaxes(kh, -1, -2)) * scale'),
        ('ctx = _merge_heads(P @ vh)',
         'P = np.where(blocked, 0.0, P)\n    ctx = _merge_heads(P @ vh)'),
    ]),
    shared('attn_mask_inverted', [
        ('blocked = blocked | mask',
         'blocked = blocked | ~mask'),
    ]),
    shared('attn_masked_rows_not_zero', [
        ('np.where(blocked, -np.inf, (qh',
         'np.where(blocked, -1e9, (qh'),
    ]),
    shared('attn_masked_rows_nan', [
        ('e = np.exp(scores - np.where(np.isneginf(m), 0.0, m))',
         'e = np.exp(scores - m)'),
        ('P = e / np.where(s == 0, 1.0, s)',
         'P = e / s'),
    ]),
    shared('attn_causal_wrong_direction', [
        ('np.triu(np.ones((S, S), dtype=bool), k=1)',
         'np.tril(np.ones((S, S), dtype=bool), k=-1)'),
    ]),
    shared('attn_causal_blocks_diagonal', [
        ('np.triu(np.ones((S, S), dtype=bool), k=1)',
         'np.triu(np.ones((S, S), dtype=bool), k=0)'),
    ]),
)
