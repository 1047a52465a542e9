"""The classic mistakes of the swiglu drill: each a patch of this folder's ``solution.py``
(``(text in the solution, what a person making the mistake writes)``; see docs/drills.md)."""

from __future__ import annotations

from ...engine.definition import Mistake

MISTAKES = (
    Mistake("swiglu_gate_up_swapped", "gate and up swapped: SiLU applied to x W_up^T instead of x W_gate^T",
            "In LlamaMLP the gate projection goes through the activation: down(silu(gate(x)) * up(x)). "
            "Swapping the roles computes a different function of the same weights.",
            "g = x @ W_gate.T; u = x @ W_up.T; h = silu(g) * u.",
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
    Mistake("swiglu_silu_on_both", "SiLU applied to the up branch too",
            "Only the gate is activated; the up branch stays linear (that is what makes it a gated linear "
            "unit).",
            "h = silu(x @ W_gate.T) * (x @ W_up.T).",
        [
            ('h = a * u                                                   # (N..., F)',
             'h = a * (u * _sigmoid(u))'),
            ('    da = dh * u\n    du = dh * a\n',
             '    su = _sigmoid(u)\n    da = dh * u * su\n    du = dh * a * (su + u * su * (1.0 - su))\n'),
        ]),
    Mistake("swiglu_backward_no_product_rule", "SwiGLU backward: the product h = a * u not differentiated "
            "with the other factor",
            "The gradient reaching each factor of a product is dh times the other factor: da = dh * u "
            "and du = dh * a. Passing dh straight to the gate drops the u factor.",
            "da = dh * u; du = dh * a.",
        [
            ('    da = dh * u\n',
             '    da = dh\n'),
        ]),
    Mistake("swiglu_backward_one_branch", "SwiGLU backward: dx from one branch only",
            "x feeds both the gate and the up projection, so its gradient is the sum of both: "
            "dx = dg @ W_gate + du @ W_up.",
            "dx = dg @ W_gate + du @ W_up.",
        [
            ('dx = dg @ W_gate + du @ W_up',
             'dx = dg @ W_gate'),
        ]),
    Mistake("swiglu_backward_silu_slope", "SwiGLU backward: silu'(g) taken as sigmoid(g)",
            "silu(g) = g * sigmoid(g) is itself a product: silu'(g) = s + g * s * (1 - s).",
            "dg = da * (s + g * s * (1 - s)).",
        [
            ('dg = da * (s + g * s * (1.0 - s))',
             'dg = da * s'),
        ]),
)
