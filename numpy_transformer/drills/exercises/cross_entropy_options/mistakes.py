"""The classic mistakes of the cross_entropy_options drill: each a patch of this folder's ``solution.py``
(``(text in the solution, what a person making the mistake writes)``; see docs/drills.md)."""

from __future__ import annotations

from ...engine.definition import Mistake

MISTAKES = (
    Mistake("ceo_ignored_in_denominator", "ignored targets still counted in the mean's denominator",
            "torch's mean divides by the number of targets that are not ignore_index: padding rows must "
            "not dilute the loss (nor the gradient).",
            "loss = sum over kept rows / keep.sum(); the gradient's factor is dloss / keep.sum().",
        [
            ('n_keep = keep.sum()',
             'n_keep = N'),
        ]),
    Mistake("ceo_smoothing_over_v_minus_1", "smoothing spread over the V - 1 other classes instead of all V",
            "torch (and Szegedy et al.'s formula) mixes the target with the uniform over all V classes: "
            "q = (1 - e) onehot + e / V, so the target class gets 1 - e + e / V. Spreading e over the "
            "V - 1 wrong classes is another loss.",
            "loss row = (1 - e) * (-logp_y) + e * (-logp.mean(axis=-1)); gradient p - q with "
            "q = (1 - e) * onehot + e / V.",
        [
            ('smooth = -logp.mean(axis=-1)',
             'smooth = -(logp.sum(axis=-1) - logp[np.arange(N), t]) / (V - 1)'),
            ('d_smooth = p - 1.0 / V ',
             'd_smooth = p - (1.0 - np.eye(V)[t]) / (V - 1) '),
        ]),
    Mistake("ceo_smoothing_on_ignored_rows", "label smoothing applied to the ignored rows",
            "An ignored row costs nothing at all: the smoothing term -e * mean(logp) must be masked as "
            "well as the target term, in the loss and in the gradient.",
            "Multiply the whole row loss ((1 - e) * nll + e * smooth) by keep, and the whole gradient "
            "row by keep[:, None].",
        [
            ('loss = (((1 - e) * nll + e * smooth) * keep).sum() / n_keep',
             'loss = ((1 - e) * nll * keep + e * smooth).sum() / n_keep'),
            ('d = ((1 - e) * d_nll + e * d_smooth) * keep[:, None]',
             'd = (1 - e) * d_nll * keep[:, None] + e * d_smooth'),
        ]),
    Mistake("ceo_ignored_rows_get_gradient", "ignored rows still get a gradient",
            "The forward left the ignored rows out of the loss, so the loss does not depend on their "
            "logits: their gradient is exactly zero.",
            "d = (p - q) * keep[:, None].",
        [
            ('d = ((1 - e) * d_nll + e * d_smooth) * keep[:, None]',
             'd = (1 - e) * d_nll + e * d_smooth'),
        ]),
)
