"""The classic mistakes of the decoder_layer drill: each a patch of this folder's ``solution.py``
(``(text in the solution, what a person making the mistake writes)``; see docs/drills.md)."""

from __future__ import annotations

from ...engine.definition import Mistake

MISTAKES = (
    Mistake("dec_dmemory_incomplete", "dmemory missing a path (memory feeds the cross-attention's k and v)",
            "memory reaches the output only through the cross-attention, where it is used twice (k = memory "
            "cWk^T, v = memory cWv^T): dmemory is the sum of both paths, and it is not zero.",
            "dmemory = dk_cross @ cWk + dv_cross @ cWv.",
        [
            ('dmemory = dk_ca + dv_ca',
             'dmemory = dk_ca'),
        ],
        also=([('dmemory = dk_ca + dv_ca', 'dmemory = dv_ca')],
              [('dmemory = dk_ca + dv_ca', 'dmemory = 0 * dk_ca')],)),
    Mistake("dec_cross_query_grad_dropped", "h1's gradient through the cross-attention's queries dropped",
            "h1 = LN1(tgt + SA(tgt)) feeds the cross-attention's queries as well as its residual: "
            "dh1 = dz2 + dq_cross @ cWq.",
            "dh1 = dz2 + (the cross-attention's query-path gradient).",
        [
            ('dh1 = dz2 + dq_ca',
             'dh1 = dz2'),
        ]),
    Mistake("dec_residual_grad_dropped", "backward dropped a residual's identity path",
            "z = x + f(x) gives dx = dz + (df/dx)^T dz: the gradient reaches x directly *and* through f.",
            "Add the incoming gradient to the branch's gradient at each of the three residuals.",
        [
            ('dh2 = dz3 + _ffn_backward',
             'dh2 = _ffn_backward'),
            ('dh1 = dz2 + dq_ca',
             'dh1 = dq_ca'),
            ('dtgt = dz1 + dq_sa',
             'dtgt = dq_sa'),
        ]),
    Mistake("dec_self_attn_qkv_not_summed", "the self-attention's input gradient from one projection only",
            "tgt feeds the self-attention's q, k and v; its gradient is the sum of the three paths (plus "
            "the residual).",
            "dtgt = dz1 + dq @ Wq + dk @ Wk + dv @ Wv.",
        [
            ('dtgt = dz1 + dq_sa + dk_sa + dv_sa',
             'dtgt = dz1 + dq_sa'),
        ]),
    Mistake("dec_causal_in_cross_attention", "a causal mask applied in the cross-attention",
            "tgt_mask belongs to the self-attention; the memory is known entirely, so the cross-attention "
            "masks only the memory's padding.",
            "Pass tgt_mask to the self-attention only; the cross-attention gets memory_key_padding_mask.",
        [
            ('    ca, c_ca = _mha_forward(',
             '    causal = np.triu(np.ones((tgt.shape[1], memory.shape[1]), dtype=bool), k=1)\n    pad = causal if pad is None else pad | causal\n    ca, c_ca = _mha_forward('),
        ]),
    Mistake("dec_relu_backward_unmasked", "ReLU backward passes the gradient where the input was negative",
            "relu'(a) = 1 where a > 0 and 0 elsewhere.",
            "da = dr * (a > 0).",
        [
            ('da = dr * (a > 0)',
             'da = dr'),
        ]),
    Mistake("dec_no_scale", "no 1/sqrt(Dh) scaling in the attentions",
            "The attention scores are q k^T / sqrt(Dh) with Dh = D/H, in both attentions.",
            "scores = qh @ kh^T / np.sqrt(Dh).",
        [
            ('scale = 1.0 / np.sqrt(D // H)',
             'scale = 1.0'),
        ]),
)
