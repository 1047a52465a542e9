"""The classic mistakes of the silu drill: each a patch of this folder's ``solution.py``
(``(text in the solution, what a person making the mistake writes)``; see docs/drills.md)."""

from __future__ import annotations

from ...engine.definition import Mistake

MISTAKES = (
    Mistake("silu_backward_no_product_rule", "SiLU backward dx = dy * sigmoid(x): the x * s * (1 - s) term "
            "missing",
            "y = x * sigmoid(x) is a product; the x in front is not a constant. The product rule gives "
            "y' = s + x * s * (1 - s).",
            "dx = dy * (s + x * s * (1 - s)) with s = sigmoid(x).",
        [
            ('return dy * (s + x * s * (1.0 - s))',
             'return dy * s'),
        ]),
    Mistake("silu_backward_sigmoid_derivative", "SiLU backward uses the sigmoid's derivative s * (1 - s) alone",
            "s * (1 - s) is the derivative of sigmoid(x), not of x * sigmoid(x); the product rule adds s and "
            "multiplies the s' term by x.",
            "dx = dy * (s + x * s * (1 - s)).",
        [
            ('return dy * (s + x * s * (1.0 - s))',
             'return dy * s * (1.0 - s)'),
        ]),
    Mistake("silu_unstable_sigmoid", "sigmoid computed as exp(x) / (1 + exp(x)): inf / inf = nan for large x",
            "exp(x) overflows to inf for x > ~709 in float64, and inf / inf is nan.",
            "With e = np.exp(-np.abs(x)): s = np.where(x >= 0, 1, e) / (1 + e).",
        [
            ('e = np.exp(-np.abs(x))\n    return np.where(x >= 0, 1.0, e) / (1.0 + e)',
             'e = np.exp(x)\n    return e / (1.0 + e)'),
        ]),
    Mistake("silu_gelu_sigmoid_approximation", "x * sigmoid(1.702 x) (the sigmoid form of GELU) used for SiLU",
            "SiLU is x * sigmoid(x) (Swish with beta = 1); 1.702 is the constant of GELU's sigmoid "
            "approximation.",
            "y = x * sigmoid(x), dx = dy * (s + x * s * (1 - s)).",
        [
            ('s = _sigmoid(x)',
             's = _sigmoid(1.702 * x)'),
            ('return dy * (s + x * s * (1.0 - s))',
             'return dy * (s + 1.702 * x * s * (1.0 - s))'),
        ]),
)
