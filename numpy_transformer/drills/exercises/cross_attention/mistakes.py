"""The classic mistakes of the cross_attention drill: each a patch of this folder's ``solution.py``
(``(text in the solution, what a person making the mistake writes)``; see docs/drills.md)."""

from __future__ import annotations

from ...engine.definition import Mistake
from ..attention_mistakes import shared

MISTAKES = (
    Mistake("xattn_dmemory_one_path", "dmemory only from one projection (memory feeds k and v)",
            "memory is used twice, k = memory Wk^T and v = memory Wv^T: its gradient is the sum of both "
            "paths.",
            "dmemory = dk @ Wk + dv @ Wv (dk, dv merged back to (B, T, D)).",
        [
            ('dmemory = dk @ Wk + dv @ Wv',
             'dmemory = dk @ Wk'),
        ],
        also=([('dmemory = dk @ Wk + dv @ Wv', 'dmemory = dv @ Wv')],)),
    Mistake("xattn_mask_on_query_axis", "the memory padding mask applied on the query axis",
            "The mask (B, T) says which memory positions (keys) are padding; mask[:, None, :, None] "
            "lines it up with the queries instead (and only runs when S = T).",
            "scores = np.where(mask[:, None, None, :], -np.inf, scores)  # (B, 1, 1, T) over (B, H, S, T).",
        [
            ('memory_key_padding_mask[:, None, None, :]',
             'memory_key_padding_mask[:, None, :, None]'),
        ]),
    Mistake("xattn_causal_mask", "a causal mask applied in cross-attention",
            "The causal mask stops a decoder position from seeing later target positions in SELF-"
            "attention; the memory (the encoded source) is known entirely, so cross-attention masks only "
            "the padding.",
            "no np.triu(...) in cross-attention: block only memory_key_padding_mask.",
        [
            ('    m = scores.max(axis=-1, keepdims=True)\n',
             '    S, T = scores.shape[-2:]\n    scores = np.where(np.triu(np.ones((S, T), dtype=bool), k=1), -np.inf, scores)\n    m = scores.max(axis=-1, keepdims=True)\n'),
        ]),
    shared('attn_mask_after_softmax', [
        ('        scores = np.where(memory_key_padding_mask[:, None, None, :], -np.inf, scores)\n',
         '        pass\n'),
        ('    ctx = _merge_heads(P @ vh) ',
         '    if memory_key_padding_mask is not None:\n        P = np.where(memory_key_padding_mask[:, None, None, :], 0.0, P)\n    ctx = _merge_heads(P @ vh) '),
    ]),
    shared('attn_mask_inverted', [
        ('memory_key_padding_mask[:, None, None, :]',
         '~memory_key_padding_mask[:, None, None, :]'),
    ]),
)
