"""The classic mistakes of the grouped_query_attention drill: each a patch of this folder's ``solution.py``
(``(text in the solution, what a person making the mistake writes)``; see docs/drills.md)."""

from __future__ import annotations

from ...engine.definition import Mistake

MISTAKES = (
    Mistake("gqa_grad_one_member", "a shared head's gradient taken from one query head of its group",
            "k_j and v_j are used by all G query heads of group j; each use changes the loss, so their "
            "gradient is the sum over the group, not one member's.",
            "dk = dk_per_query_head.reshape(B, Hkv, G, T, Dh).sum(axis=2) (and the same for dv).",
        [
            ('dv = (np.swapaxes(P, -1, -2) @ doutg).sum(axis=2)',
             'dv = (np.swapaxes(P, -1, -2) @ doutg)[:, :, 0]'),
            ('dk = (scale * (np.swapaxes(dA, -1, -2) @ qg)).sum(axis=2)',
             'dk = (scale * (np.swapaxes(dA, -1, -2) @ qg))[:, :, 0]'),
        ]),
    Mistake("gqa_grad_mean", "a shared head's gradient averaged over its group instead of summed",
            "A broadcast in the forward is a sum in the backward: dk_j = sum_g dk_(j, g). The mean is "
            "that sum divided by G.",
            "Sum over the group axis: .sum(axis=2), not .mean(axis=2).",
        [
            ('dv = (np.swapaxes(P, -1, -2) @ doutg).sum(axis=2)',
             'dv = (np.swapaxes(P, -1, -2) @ doutg).mean(axis=2)'),
            ('dk = (scale * (np.swapaxes(dA, -1, -2) @ qg)).sum(axis=2)',
             'dk = (scale * (np.swapaxes(dA, -1, -2) @ qg)).mean(axis=2)'),
        ]),
    Mistake("gqa_head_mapping_modulo", "query head h paired with key/value head h % Hkv instead of h // G",
            "Consecutive query heads share a key/value head (torch's repeat_interleave: heads 0, 0, 1, 1 "
            "for Hkv = 2, G = 2); np.tile or torch's repeat gives 0, 1, 0, 1.",
            "q.reshape(B, Hkv, G, S, Dh) (not (B, G, Hkv, ...)), or np.repeat(k, G, axis=1), not np.tile.",
        [
            ('qg = q.reshape(B, Hkv, G, S, Dh)',
             'qg = q.reshape(B, G, Hkv, S, Dh).swapaxes(1, 2)'),
            ('out = (P @ vg).reshape(B, Hq, S, -1)',
             'out = (P @ vg).swapaxes(1, 2).reshape(B, Hq, S, -1)'),
            ('doutg = dout.reshape(B, Hkv, G, S, -1)',
             'doutg = dout.reshape(B, G, Hkv, S, -1).swapaxes(1, 2)'),
            ('dq = (scale * (dA @ kg)).reshape(B, Hkv * G, S, Dh)',
             'dq = (scale * (dA @ kg)).swapaxes(1, 2).reshape(B, Hkv * G, S, Dh)'),
        ]),
    Mistake("gqa_no_scale", "no 1/sqrt(Dh) scaling",
            "Without the scale the scores grow like sqrt(Dh) and the softmax saturates.",
            "scores = q @ k^T / np.sqrt(Dh), with Dh = q.shape[-1] (and the same factor in the backward).",
        [
            ('scale = 1.0 / np.sqrt(Dh)',
             'scale = 1.0'),
        ]),
    Mistake("gqa_backward_no_rowsum", "softmax backward missing the row-sum term",
            "dscores = P * dP forgets the softmax Jacobian's -P P^T part.",
            "dA = P * (dP - np.sum(dP * P, axis=-1, keepdims=True)).",
        [
            ('dA = P * (dP - np.sum(dP * P, axis=-1, keepdims=True))',
             'dA = P * dP'),
        ]),
)
