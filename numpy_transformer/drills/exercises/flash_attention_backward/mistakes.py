"""The classic mistakes of the flash_attention_backward drill: each a patch of this folder's ``solution.py``
(``(text in the solution, what a person making the mistake writes)``; see docs/drills.md)."""

from __future__ import annotations

from ...engine.definition import Mistake

MISTAKES = (
    Mistake("flash_delta_per_tile", "the softmax row sum delta computed per tile instead of per row",
            "dA = P * (dP - delta) needs delta_i = sum_j dP_ij P_ij over the WHOLE row i; a tile only sees "
            "block_k of its keys. The identity rowsum(dP * P) = rowsum(dout * out) gives it from whole rows "
            "before any tile.",
            "delta = np.sum(dout * out, axis=-1, keepdims=True) once; in each tile dA = P * (dP - "
            "delta[rows]).",
        [
            ('dA = P * (dP - delta[..., r0:r1, :]) * c ',
             'dA = P * (dP - np.sum(dP * P, axis=-1, keepdims=True)) * c '),
        ]),
    Mistake("flash_lse_not_subtracted", "the tile's probabilities not normalised by the saved lse",
            "exp(s) alone is the unnormalised softmax numerator; the probabilities are exp(s - lse) with the "
            "row's log-sum-exp from the forward (which is also what keeps exp from overflowing).",
            "P = np.exp(s - lse[..., rows, None]).",
        [
            ('P = np.exp(s - lse[..., r0:r1, None])',
             'P = np.exp(s)'),
        ]),
    Mistake("flash_dk_dv_not_accumulated", "dk and dv assigned per query tile instead of accumulated",
            "Every query tile contributes to the gradient of each key tile: dk[cols] = ... keeps only the "
            "last query tile's part.",
            "dk[..., c0:c1, :] += ...; dv[..., c0:c1, :] += ... (start from zeros).",
        [
            ('dv[..., c0:c1, :] += ',
             'dv[..., c0:c1, :] = '),
            ('dk[..., c0:c1, :] += ',
             'dk[..., c0:c1, :] = '),
        ]),
    Mistake("flash_backward_no_scale", "the 1/sqrt(Dh) scale forgotten in dq and dk",
            "s = c q k^T with c = 1/sqrt(Dh), so ds/dq and ds/dk both carry c (dv does not).",
            "dA = P * (dP - delta) * c before dq += dA @ k and dk += dA^T @ q.",
        [
            ('dA = P * (dP - delta[..., r0:r1, :]) * c ',
             'dA = P * (dP - delta[..., r0:r1, :]) '),
        ]),
)
