"""The classic mistakes of the scaled_dot_product_attention drill: each a patch of this folder's ``solution.py``
(``(text in the solution, what a person making the mistake writes)``; see docs/drills.md)."""

from __future__ import annotations

from ...engine.definition import Mistake
from ..attention_mistakes import shared

MISTAKES = (
    Mistake("attn_no_scale", "no 1/sqrt(Dh) scaling",
            "Without the scale the scores grow like sqrt(Dh) and the softmax saturates.",
            "scores = q @ k^T / np.sqrt(Dh), with Dh = q.shape[-1] (and the same factor in the backward).",
        [
            ('scale = 1.0 / np.sqrt(Dh)',
             'scale = 1.0'),
        ]),
    Mistake("attn_scale_1_over_dh", "scaled by 1/Dh instead of 1/sqrt(Dh)",
            "q.k sums Dh products of unit-variance terms: its std is sqrt(Dh), so the scale is 1/sqrt(Dh).",
            "scores = q @ k^T / np.sqrt(Dh).",
        [
            ('scale = 1.0 / np.sqrt(Dh)',
             'scale = 1.0 / Dh'),
        ]),
    Mistake("attn_softmax_wrong_axis", "softmax over the query axis instead of the key axis",
            "Each query's weights over the keys sum to 1: softmax along the last axis (T).",
            "Normalise along axis=-1 of the (..., S, T) scores.",
        [
            ('m = scores.max(axis=-1, keepdims=True)',
             'm = scores.max(axis=-2, keepdims=True)'),
            ('s = e.sum(axis=-1, keepdims=True)',
             's = e.sum(axis=-2, keepdims=True)'),
            ('np.sum(dP * P, axis=-1, keepdims=True)',
             'np.sum(dP * P, axis=-2, keepdims=True)'),
        ]),
    shared('attn_mask_after_softmax', [
        ('scores = np.where(blocked, -np.inf, scores)',
         'pass'),
        ('out = P @ v ',
         'P = np.where(blocked, 0.0, P)\n    out = P @ v '),
    ]),
    shared('attn_mask_inverted', [
        ('blocked | mask',
         'blocked | ~mask'),
    ]),
    shared('attn_masked_rows_not_zero', [
        ('scores = np.where(blocked, -np.inf, scores)',
         'scores = np.where(blocked, -1e9, scores)'),
    ]),
    shared('attn_masked_rows_nan', [
        ('m = np.where(np.isneginf(m), 0.0, m)',
         'pass'),
        ('P = e / np.where(s == 0, 1.0, s)',
         'P = e / s'),
    ]),
    shared('attn_causal_wrong_direction', [
        ('np.triu(np.ones((S, T), dtype=bool), k=1)',
         'np.tril(np.ones((S, T), dtype=bool), k=-1)'),
    ]),
    shared('attn_causal_blocks_diagonal', [
        ('np.triu(np.ones((S, T), dtype=bool), k=1)',
         'np.triu(np.ones((S, T), dtype=bool), k=0)'),
    ]),
    Mistake("attn_backward_no_rowsum", "softmax backward missing the row-sum term",
            "dscores = P * dP forgets the softmax Jacobian's -P P^T part.",
            "dscores = P * (dP - np.sum(dP * P, axis=-1, keepdims=True)).",
        [
            ('dA = P * (dP - np.sum(dP * P, axis=-1, keepdims=True))',
             'dA = P * dP'),
        ]),
    Mistake("attn_backward_no_scale", "the 1/sqrt(Dh) scale forgotten in the backward",
            "scores = c q k^T, so dq = c dscores k and dk = c dscores^T q.",
            "Multiply dscores by the same scale before computing dq and dk.",
        [
            ('dq = scale * (dA @ k)',
             'dq = dA @ k'),
            ('dk = scale * (np.swapaxes(dA, -1, -2) @ q)',
             'dk = np.swapaxes(dA, -1, -2) @ q'),
        ]),
    Mistake("attn_backward_missing_transpose", "a transpose missing in the backward matmuls",
            "out = P v gives dv = P^T dout; scores = q k^T gives dk = dscores^T q (both (..., T, .)).",
            "dv = np.swapaxes(P, -1, -2) @ dout; dk = np.swapaxes(dscores, -1, -2) @ q.",
        [
            ('dk = scale * (np.swapaxes(dA, -1, -2) @ q)',
             'dk = scale * (dA @ q)'),
        ],
        also=([('dv = np.swapaxes(P, -1, -2) @ dout', 'dv = P @ dout')],)),
)
