"""Rotary position embeddings' classic mistakes (Su et al., 2021): each pair (a, b) of features at
position p is rotated by theta = p * base^(-2i/Dh); the backward rotates the gradient back by
-theta (a rotation's transpose is its inverse)."""

from . import Family

_FREQ = r"base \*\* \(-np\.arange\(0, (\w+), 2\) / \1\)"

FAMILIES = (
    Family("rope_positions_ignored", "positions ignored: theta uses 0..S-1 whatever positions are given",
           "theta[p, i] = positions[p] * base^(-2i/Dh): a decode step, an offset or packed sequences give "
           "positions that are not 0..S-1.",
           "theta = np.asarray(positions, dtype=np.float64)[:, None] * w.",
           (((r"np\.asarray\(positions, dtype=np\.float64\)", "np.arange(x.shape[-2], dtype=np.float64)"),),)),
    Family("rope_exponent_sign_flipped", "frequencies base^(+2i/Dh) instead of base^(-2i/Dh) (the exponent's "
           "sign flipped)",
           "The frequencies fall from 1 (the first pair) to about 1/base (the last): w_i = base^(-2i/Dh).",
           "w = base ** (-np.arange(0, Dh, 2) / Dh).",
           (((_FREQ, r"base ** (np.arange(0, \1, 2) / \1)"),),)),
    Family("rope_base_ignored", "the base argument ignored (10000 always)",
           "The base is an argument (10000 in the paper, 500000 in Llama 3): w_i = base^(-2i/Dh).",
           "w = base ** (-np.arange(0, Dh, 2) / Dh).",
           (((r"\bbase \*\* \(-np\.arange", "10000.0 ** (-np.arange"),),)),
    Family("rope_cos_sin_swapped", "cos and sin swapped (cos = sin(theta), sin = cos(theta))",
           "The rotation by theta is (a cos - b sin, a sin + b cos); with cos and sin exchanged it is not a "
           "rotation by theta (position 0 is no longer the identity).",
           "cos, sin = np.cos(theta), np.sin(theta).",
           (((r"cos, sin = np\.cos\(theta\), np\.sin\(theta\)", "cos, sin = np.sin(theta), np.cos(theta)"),),)),
    Family("rope_backward_not_rotated", "backward returns dy unrotated (dx = dy)",
           "y = R(theta) x per pair, so dx = R(theta)^T dy = R(-theta) dy: the gradient is rotated back.",
           "dx = rotate(dy, cos, -sin).",
           (((r"return _rotate\(dy, cos, -sin, (\w+), (\w+)\)", "return dy.copy()"),),)),
    Family("rope_backward_no_sine", "backward drops the sine (dx = dy cos only)",
           "R(theta)^T = [[cos, sin], [-sin, cos]]: each component of dx mixes both components of dy.",
           "dx = rotate(dy, cos, -sin).",
           (((r"return _rotate\(dy, cos, -sin, (\w+), (\w+)\)", r"return _rotate(dy, cos, 0.0 * sin, \1, \2)"),),)),
    Family("rope_rotation_factors_mixed", "the rotation's rows mix up the factors (b sin + a cos instead of "
           "a sin + b cos, or b cos - a sin)",
           "Rotating the pair (a, b) by theta: (a cos - b sin, a sin + b cos); each output keeps its own "
           "component on the cosine (a in the first, b in the second).",
           "out[first] = a cos - b sin; out[second] = a sin + b cos.",
           (((r"= a \* sin \+ b \* cos", "= b * sin + a * cos"),),
            ((r"= a \* cos - b \* sin", "= b * cos - a * sin"),))),
    Family("rope_rotation_direction_flipped", "the rotation's sine terms with flipped signs (a rotation by "
           "-theta in the forward)",
           "The forward rotates by +theta, (a cos - b sin, a sin + b cos); (a cos + b sin, -a sin + b cos) "
           "is the inverse rotation, the backward's.",
           "out[first] = a cos - b sin; out[second] = a sin + b cos.",
           (((r"return _rotate\(x, cos, sin, (\w+), (\w+)\)", r"return _rotate(x, cos, -sin, \1, \2)"),),)),
)
