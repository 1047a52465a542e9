"""The classic mistakes of the dropout drill: each a patch of this folder's ``solution.py``
(``(text in the solution, what a person making the mistake writes)``; see docs/drills.md)."""

from __future__ import annotations

from ...engine.definition import Mistake

MISTAKES = (
    Mistake("dropout_no_scale", "kept elements not scaled by 1/(1-p)",
            "Without the scale E[y] = (1 - p) x in training but y = x at evaluation: the next layer "
            "sees smaller activations while training than at test time. Inverted dropout scales by "
            "1/(1-p) in training so that evaluation needs nothing.",
            "y = x * keep / (1 - p), and dx = dy * keep / (1 - p).",
        [
            ('scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)',
             'scale = 1.0'),
        ]),
    Mistake("dropout_backward_no_scale", "the backward forgets the 1/(1-p) scale",
            "The forward multiplied x by keep / (1 - p); the derivative of y with respect to x is that "
            "same factor, scale included.",
            "dx = dy * keep / (1 - p) (store the scale, or p, in the cache).",
        [
            ('return dy * keep * scale',
             'return dy * keep'),
        ]),
    Mistake("dropout_backward_resampled", "the backward draws a new mask instead of reusing the forward's",
            "The gradient flows only through the elements the forward kept. A second rng.random(...) in "
            "the backward gives a different mask: gradient reaches dropped elements and misses kept ones.",
            "Save keep in the cache in the forward; the backward uses that one (no random numbers).",
        [
            ('return x * keep * scale, (keep, scale)',
             'return x * keep * scale, (rng, p, scale)'),
            ('keep, scale = cache\n',
             'rng, p, scale = cache\n    keep = rng.random(dy.shape) >= p\n'),
        ]),
    Mistake("dropout_applied_at_eval", "dropout applied at evaluation (training=False)",
            "At evaluation dropout is the identity (model.eval()); the 1/(1-p) scaling in training is "
            "what makes that right.",
            "if not training: return x (a copy) and let the backward return dy.",
        [
            ('    if not training:\n        return x.copy(), None\n',
             ''),
        ]),
    Mistake("dropout_p_as_keep_probability", "p read as the keep probability (keep = u < p, scale 1/p)",
            "torch's p is the probability of DROPPING an element (TensorFlow 1's keep_prob was the "
            "opposite): an element is kept with probability 1 - p.",
            "keep = rng.random(x.shape) >= p; scale 1 / (1 - p).",
        [
            ('keep = rng.random(x.shape) >= p ',
             'keep = rng.random(x.shape) < p '),
            ('scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)',
             'scale = 0.0 if p == 0.0 else 1.0 / p'),
        ]),
)
