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

#: the layer written pre-LN (h = x + f(LN(x)), no final norm) where post-LN (torch's default) was asked
_POST_LN_FORWARD = """\
    sa, c_sa = _mha_forward(tgt, tgt, [p[k] for k in SA], num_heads, tgt_mask)
    h1, c_n1 = _ln_forward(tgt + sa, p["gamma1"], p["beta1"])
    pad = None
    if memory_key_padding_mask is not None:
        pad = memory_key_padding_mask[:, None, None, :]               # (B, 1, 1, T): the key axis
    ca, c_ca = _mha_forward(h1, memory, [p[k] for k in CA], num_heads, pad)
    h2, c_n2 = _ln_forward(h1 + ca, p["gamma2"], p["beta2"])
    f, c_f = _ffn_forward(h2, p)
    y, c_n3 = _ln_forward(h2 + f, p["gamma3"], p["beta3"])
"""
_PRE_LN_FORWARD = """\
    n1, c_n1 = _ln_forward(tgt, p["gamma1"], p["beta1"])
    sa, c_sa = _mha_forward(n1, n1, [p[k] for k in SA], num_heads, tgt_mask)
    h1 = tgt + sa
    pad = None
    if memory_key_padding_mask is not None:
        pad = memory_key_padding_mask[:, None, None, :]               # (B, 1, 1, T): the key axis
    n2, c_n2 = _ln_forward(h1, p["gamma2"], p["beta2"])
    ca, c_ca = _mha_forward(n2, memory, [p[k] for k in CA], num_heads, pad)
    h2 = h1 + ca
    n3, c_n3 = _ln_forward(h2, p["gamma3"], p["beta3"])
    f, c_f = _ffn_forward(n3, p)
    y = h2 + f
"""
_POST_LN_BACKWARD = """\
    dz3, g["gamma3"], g["beta3"] = _ln_backward(dout, c_n3)
    dh2 = dz3 + _ffn_backward(dz3, c_f, p, g)                             # z3 = h2 + FF(h2)
    dz2, g["gamma2"], g["beta2"] = _ln_backward(dh2, c_n2)
    dq_ca, dk_ca, dv_ca, gw = _mha_backward(dz2, c_ca, [p[k] for k in CA])
    g.update(zip(CA, gw))
    dmemory = dk_ca + dv_ca                                               # memory fed k and v
    dh1 = dz2 + dq_ca                                                     # z2 = h1 + CA(h1, memory)
    dz1, g["gamma1"], g["beta1"] = _ln_backward(dh1, c_n1)
    dq_sa, dk_sa, dv_sa, gw = _mha_backward(dz1, c_sa, [p[k] for k in SA])
    g.update(zip(SA, gw))
    dtgt = dz1 + dq_sa + dk_sa + dv_sa                                    # z1 = tgt + SA(tgt)
"""
_PRE_LN_BACKWARD = """\
    dn3, g["gamma3"], g["beta3"] = _ln_backward(_ffn_backward(dout, c_f, p, g), c_n3)
    dh2 = dout + dn3
    dq_ca, dk_ca, dv_ca, gw = _mha_backward(dh2, c_ca, [p[k] for k in CA])
    g.update(zip(CA, gw))
    dmemory = dk_ca + dv_ca
    dn2, g["gamma2"], g["beta2"] = _ln_backward(dq_ca, c_n2)
    dh1 = dh2 + dn2
    dq_sa, dk_sa, dv_sa, gw = _mha_backward(dh1, c_sa, [p[k] for k in SA])
    g.update(zip(SA, gw))
    dn1, g["gamma1"], g["beta1"] = _ln_backward(dq_sa + dk_sa + dv_sa, c_n1)
    dtgt = dh1 + dn1
"""

MISTAKES += (
    Mistake("dec_cross_queries_wrong_stream", "the cross-attention's queries taken from tgt instead of h1",
            "The cross-attention reads the decoder's stream AFTER its self-attention block: queries from "
            "h1 = LN1(tgt + SA(tgt)), keys and values from memory. Queries from tgt skip the "
            "self-attention for that block.",
            "ca = CA(h1, memory): queries h1 @ cWq^T (and dh1 += the query-path gradient).",
        [
            ('_mha_forward(h1, memory,', '_mha_forward(tgt, memory,'),
            ('dh1 = dz2 + dq_ca', 'dh1 = dz2'),
            ('dtgt = dz1 + dq_sa', 'dtgt = dz1 + dq_ca + dq_sa'),
        ],
        also=([('_mha_forward(h1, memory,', '_mha_forward(tgt, memory,')],)),
    Mistake("dec_padding_mask_ignored", "the memory padding mask never applied",
            "memory_key_padding_mask (B, T) marks padded memory positions (True = padding): the "
            "cross-attention must not attend to them (-inf on those keys, for every head and query).",
            "pass memory_key_padding_mask[:, None, None, :] as the cross-attention's blocked keys.",
        [
            ('[p[k] for k in CA], num_heads, pad)', '[p[k] for k in CA], num_heads, None)'),
        ]),
    Mistake("dec_pre_ln", "pre-LN written where post-LN was asked",
            "post-LN (torch's default, norm_first=False) normalises after each residual: "
            "h = LN(x + f(x)). pre-LN normalises each branch's input, h = x + f(LN(x)), a different "
            "function of the same weights.",
            "h1 = LN1(tgt + SA(tgt)); h2 = LN2(h1 + CA(h1, memory)); y = LN3(h2 + FF(h2)).",
        [
            (_POST_LN_FORWARD, _PRE_LN_FORWARD),
            (_POST_LN_BACKWARD, _PRE_LN_BACKWARD),
        ]),
)
