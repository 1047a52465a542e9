"""The classic mistakes of the rope drill: each a patch of this folder's ``solution.py``
(``(text in the solution, what a person making the mistake writes)``; see docs/drills.md)."""

from __future__ import annotations

from ...engine.definition import Mistake

MISTAKES = (
    Mistake("rope_wrong_layout", "the wrong pair layout (interleaved (2i, 2i+1) vs rotate-half (i, i + Dh/2))",
            "interleaved=False pairs feature i with feature i + Dh/2 (GPT-NeoX, Hugging Face Llama); "
            "interleaved=True pairs 2i with 2i + 1 (the paper, Meta's Llama). Both are rotations, but "
            "weights trained with one layout are wrong under the other.",
            "interleaved: a, b = x[..., 0::2], x[..., 1::2]; rotate half: a, b = x[..., :Dh // 2], "
            "x[..., Dh // 2:].",
        [
            ('if interleaved:',
             'if not interleaved:'),
        ]),
    Mistake("rope_freq_missing_two", "frequencies base^(-i/Dh) instead of base^(-2i/Dh) (i the pair index)",
            "Pair i turns with frequency base ** (-2i / Dh): the exponents run over 0, 2, 4, ... Dh-2, "
            "so np.arange(Dh // 2) / Dh drops the 2 and leaves the slowest pair far too fast.",
            "w = base ** (-np.arange(0, Dh, 2) / Dh).",
        [
            ('w = base ** (-np.arange(0, dh, 2) / dh)',
             'w = base ** (-np.arange(dh // 2) / dh)'),
        ]),
    Mistake("rope_sin_sign_flipped", "the sine's sign flipped (a rotation by -theta: rotate_half as cat(x2, -x1))",
            "The rotation is a' = a cos - b sin, b' = a sin + b cos (rotate_half(x) = cat(-x2, x1)). "
            "With the sign flipped every position turns backwards: still relative, but not RoPE's "
            "convention, and a checkpoint trained the usual way is read wrongly.",
            "out_a = a * cos - b * sin; out_b = a * sin + b * cos.",
        [
            ('out[..., first] = a * cos - b * sin',
             'out[..., first] = a * cos + b * sin'),
            ('out[..., second] = a * sin + b * cos',
             'out[..., second] = -a * sin + b * cos'),
        ]),
    Mistake("rope_backward_same_rotation", "backward rotates dy by +theta (the forward again) instead of -theta",
            "The forward is linear with one rotation R(theta) per pair, so dx = R(theta)^T dy, and "
            "R(theta)^T = R(-theta): the gradient is rotated back. Applying the forward to dy is R(theta).",
            "dx: the forward's formula on dy with the sine negated (same cos, -sin).",
        [
            ('return _rotate(dy, cos, -sin, first, second)',
             'return _rotate(dy, cos, sin, first, second)'),
        ]),
)
