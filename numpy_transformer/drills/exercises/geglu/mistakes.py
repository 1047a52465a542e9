"""The classic mistakes of the geglu drill: each a patch of this folder's ``solution.py``
(``(text in the solution, what a person making the mistake writes)``; see docs/drills.md)."""

from __future__ import annotations

from ...engine.definition import Mistake

MISTAKES = (
    Mistake("geglu_gate_up_swapped", "gate and up swapped: GELU applied to x W_up^T instead of x W_gate^T",
            "In the GELU-gated MLP the gate projection goes through the activation: "
            "down(gelu(gate(x)) * up(x)). Swapping the roles computes a different function of the same weights.",
            "g = x @ W_gate.T; u = x @ W_up.T; h = gelu(g) * u.",
        [
            ('g = x @ W_gate.T',
             'g = x @ W_up.T'),
            ('u = x @ W_up.T',
             'u = x @ W_gate.T'),
            ('dW_gate = dg.reshape(-1, F).T @ x2',
             'dW_up_ = dg.reshape(-1, F).T @ x2'),
            ('dW_up = du.reshape(-1, F).T @ x2',
             'dW_gate = du.reshape(-1, F).T @ x2'),
            ('dW_up_ =',
             'dW_up ='),
            ('dx = dg @ W_gate + du @ W_up',
             'dx = dg @ W_up + du @ W_gate'),
        ]),
    Mistake("geglu_tanh_gelu", "the tanh approximation of GELU where the exact one was asked",
            "The statement asks for torch's default GELU, x * Phi(x) with the erf; "
            "0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) is Gemma's approximation, close but not equal.",
            "cdf = 0.5 * (1 + erf(g / sqrt(2))); a = g * cdf (and its slope cdf + g * pdf).",
        [
            ('cdf = 0.5 * (1.0 + _erf(g / math.sqrt(2.0)))',
             'cdf = 0.5 * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (g + 0.044715 * g ** 3)))'),
        ]),
    Mistake("geglu_backward_no_product_rule", "GeGLU backward: the product h = a * u not differentiated "
            "with the other factor",
            "The gradient reaching each factor of a product is dh times the other factor: da = dh * u "
            "and du = dh * a. Passing dh straight to the gate drops the u factor.",
            "da = dh * u; du = dh * a.",
        [
            ('    da = dh * u\n',
             '    da = dh\n'),
        ]),
    Mistake("geglu_backward_one_branch", "GeGLU backward: dx from one branch only",
            "x feeds both the gate and the up projection, so its gradient is the sum of both: "
            "dx = dg @ W_gate + du @ W_up.",
            "dx = dg @ W_gate + du @ W_up.",
        [
            ('dx = dg @ W_gate + du @ W_up',
             'dx = dg @ W_gate'),
        ]),
    Mistake("geglu_backward_gelu_slope", "GeGLU backward: gelu'(g) taken as Phi(g) (the g * phi(g) term dropped)",
            "gelu(g) = g * Phi(g) is itself a product: gelu'(g) = Phi(g) + g * phi(g), phi the normal "
            "density exp(-g^2/2) / sqrt(2 pi).",
            "dg = da * (Phi(g) + g * phi(g)).",
        [
            ('dg = da * (cdf + g * pdf)',
             'dg = da * cdf'),
        ]),
)
