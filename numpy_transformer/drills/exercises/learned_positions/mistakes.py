"""The classic mistakes of the learned_positions drill: each a patch of this folder's ``solution.py``
(``(text in the solution, what a person making the mistake writes)``; see docs/drills.md)."""

from __future__ import annotations

from ...engine.definition import Mistake

MISTAKES = (
    Mistake("lpe_batch_not_summed", "dW from the first batch row only: the batch's rows not summed",
            "Every batch row added the same rows W[offset:offset+S]: a parameter used B times gets the sum "
            "of the B gradients.",
            "dW[offset:offset+S] = dy.sum(axis=0).",
        [
            ('dW[offset:offset + s] = dy.sum(axis=0)',
             'dW[offset:offset + s] = dy[0]'),
        ]),
    Mistake("lpe_batch_averaged", "dW averaged over the batch instead of summed",
            "The loss's own mean already divides; the table's gradient is the sum over the rows that used it.",
            "dW[offset:offset+S] = dy.sum(axis=0).",
        [
            ('dW[offset:offset + s] = dy.sum(axis=0)',
             'dW[offset:offset + s] = dy.mean(axis=0)'),
        ]),
    Mistake("lpe_offset_ignored", "positions taken from row 0 whatever the offset (a decode step reads W[0])",
            "At offset p the S new positions are p .. p+S-1: y = x + W[p:p+S], and their gradient goes "
            "to those rows.",
            "W[offset:offset + S] in the forward, dW[offset:offset + S] in the backward.",
        [
            ('return x + W[offset:offset + s], (W.shape, offset, s)',
             'return x + W[:s], (W.shape, 0, s)'),
        ]),
)
