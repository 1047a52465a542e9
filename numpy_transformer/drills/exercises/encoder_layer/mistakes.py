"""The classic mistakes of the encoder_layer drill: each a patch of this folder's ``solution.py``
(``(text in the solution, what a person making the mistake writes)``; see docs/drills.md)."""

from __future__ import annotations

from ...engine.definition import Mistake
from ..attention_mistakes import shared

MISTAKES = (
    Mistake("enc_norm_placement", "post-LN and pre-LN swapped",
            "norm_first=False (post-LN): x = LN1(x + SA(x)); x = LN2(x + FF(x)). "
            "norm_first=True (pre-LN): x = x + SA(LN1(x)); x = x + FF(LN2(x)).",
            "Branch on norm_first exactly as above, forward and backward.",
        [
            ('if norm_first:',
             'if not norm_first:'),
        ]),
    Mistake("enc_residual_grad_dropped", "backward dropped a residual's identity path",
            "y = x + f(x) gives dx = dy + (df/dx)^T dy: the gradient reaches x directly *and* through f.",
            "Add the incoming gradient to the branch's gradient at every residual.",
        [
            ('dh = dout + dn2',
             'dh = dn2'),
            ('dx = dh + dn1',
             'dx = dn1'),
            ('dh = dz2 + _ffn_backward(dz2, c_f, p, g)',
             'dh = _ffn_backward(dz2, c_f, p, g)'),
            ('dx = dz1 + _attn_backward(dz1, c_a, p, g)',
             'dx = _attn_backward(dz1, c_a, p, g)'),
        ]),
    Mistake("enc_qkv_grads_not_summed", "attention input gradient from one projection only",
            "The attention input feeds q, k and v; its gradient is the sum of the three paths.",
            "d_in = dq @ Wq + dk @ Wk + dv @ Wv.",
        [
            ('return dx_q + dx_k + dx_v',
             'return dx_q'),
        ]),
    Mistake("enc_relu_backward_unmasked", "ReLU backward passes the gradient where the input was negative",
            "relu'(a) = 1 where a > 0 and 0 elsewhere.",
            "da = dr * (a > 0).",
        [
            ('da = dr * (a > 0)',
             'da = dr'),
        ]),
    Mistake("enc_no_scale", "no 1/sqrt(Dh) scaling in the attention",
            "The attention scores are q k^T / sqrt(Dh) with Dh = D/H.",
            "scores = qh @ kh^T / np.sqrt(Dh).",
        [
            ('scale = 1.0 / np.sqrt(D // H)',
             'scale = 1.0'),
        ]),
    shared('attn_mask_after_softmax', [
        ('        scores = np.where(mask, -np.inf, scores)\n',
         '        pass\n'),
        ('    ctx = (P @ vh)',
         '    P = P if mask is None else np.where(mask, 0.0, P)\n    ctx = (P @ vh)'),
    ]),
    shared('attn_mask_inverted', [
        ('scores = np.where(mask, -np.inf, scores)',
         'scores = np.where(~mask, -np.inf, scores)'),
    ]),
    shared('attn_masked_rows_not_zero', [
        ('scores = np.where(mask, -np.inf, scores)',
         'scores = np.where(mask, -1e9, scores)'),
    ]),
    shared('attn_masked_rows_nan', [
        ('e = np.exp(scores - np.where(np.isneginf(m), 0.0, m))',
         'e = np.exp(scores - m)'),
        ('P = e / np.where(s == 0, 1.0, s)',
         'P = e / s'),
    ]),
)
