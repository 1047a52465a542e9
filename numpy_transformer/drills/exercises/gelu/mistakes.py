"""The classic mistakes of the gelu drill: each a patch of this folder's ``solution.py``
(``(text in the solution, what a person making the mistake writes)``; see docs/drills.md)."""

from __future__ import annotations

from ...engine.definition import Mistake

MISTAKES = (
    Mistake("gelu_tanh_for_exact", "the tanh approximation used where the exact GELU was asked",
            "approximate='none' is x * Phi(x) with Phi(x) = (1 + erf(x / sqrt(2))) / 2; the tanh "
            "formula differs by up to ~1e-3.",
            "When approximate == 'none': y = 0.5 * x * (1 + erf(x / sqrt(2))).",
        [
            ('if approximate == "tanh":',
             'if True:'),
        ]),
    Mistake("gelu_sigmoid_approximation", "the sigmoid approximation x * sigmoid(1.702 x) used",
            "x * sigmoid(1.702 x) is a coarse approximation (error ~2e-2), not GELU.",
            "y = 0.5 * x * (1 + erf(x / sqrt(2))) (or the tanh formula when approximate == 'tanh').",
        [
            ('y = x * 0.5 * (1.0 + _erf(x / math.sqrt(2.0)))',
             'y = x / (1.0 + np.exp(-1.702 * x))'),
            ('slope = cdf + x * pdf',
             's = 1.0 / (1.0 + np.exp(-1.702 * x))\n        slope = s + 1.702 * x * s * (1 - s)'),
        ]),
    Mistake("gelu_backward_no_x_pdf", "GELU backward missing the x * phi(x) term (product rule)",
            "y = x * Phi(x) is a product: y' = Phi(x) + x * phi(x), phi the standard normal density.",
            "dx = dy * (Phi(x) + x * np.exp(-x**2 / 2) / np.sqrt(2 * np.pi)).",
        [
            ('slope = cdf + x * pdf',
             'slope = cdf'),
        ]),
    Mistake("gelu_backward_pdf_unnormalised", "GELU backward with phi(x) missing 1/sqrt(2*pi)",
            "The standard normal density is exp(-x^2/2) / sqrt(2 pi).",
            "phi = np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi).",
        [
            ('pdf = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)',
             'pdf = np.exp(-0.5 * x * x)'),
        ]),
    Mistake("gelu_tanh_backward_no_inner", "tanh-GELU backward missing the inner derivative",
            "u = sqrt(2/pi) (x + 0.044715 x^3) has du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2).",
            "slope = 0.5 * (1 + t) + 0.5 * x * (1 - t**2) * sqrt(2/pi) * (1 + 3 * 0.044715 * x**2).",
        [
            ('* c * (1.0 + 3 * 0.044715 * x * x)',
             '* c'),
        ]),
)
