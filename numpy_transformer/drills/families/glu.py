"""The gated linear unit's classic mistakes (SwiGLU, GeGLU): ``y = (act(g) * u) W_down^T`` with the gate
``g = x W_gate^T`` and the up branch ``u = x W_up^T``.

Written from the maths of the product ``h = a * u``, ``a = act(g)``, forward and backward:

* the activation applied to the up branch instead of the gate (the two projections exchanged in the
  forward);
* the product rule's factors swapped: ``da = dh * a``, ``du = dh * u`` (each factor receives ``dh`` times
  the *other* factor: ``da = dh * u``, ``du = dh * a``);
* ``du`` built from the gate's pre-activation ``g`` instead of its activation ``a = act(g)``;
* a weight's gradient from the wrong local gradient: ``dW_up`` from ``dh`` (the ``a`` factor forgotten),
  ``dW_gate`` from ``da`` (the activation's derivative forgotten), ``dW_down`` from one factor of ``h``;
* ``dx = dg W_gate + du W_up`` (x feeds both branches): one branch dropped, or each branch's gradient
  paired with the other branch's weight.

The activation's own mistakes (its derivative, its constants) are ``activations.py``'s; a transposed
weight gradient, a constant factor (a mean for a sum) or two results swapped are read off the numbers
(``engine/readings.py``).
"""

from . import Family

FAMILIES = (
    Family("glu_activation_on_up_branch",
           "the activation applied to the up branch instead of the gate (x W_up^T and x W_gate^T exchanged)",
           "In a gated linear unit the gate projection goes through the activation: down(act(x W_gate^T) * "
           "(x W_up^T)). Exchanging the two projections in the forward computes another function of the "
           "same weights (and the backward, written for the right forward, no longer matches it).",
           "g = x @ W_gate.T; u = x @ W_up.T; h = act(g) * u.",
           (((r"\b(\w+) = x @ W_gate\.T(.*\n\s*)(\w+) = x @ W_up\.T", r"\1 = x @ W_up.T\2\3 = x @ W_gate.T"),),)),
    Family("glu_product_rule_swapped", "product-rule factors swapped in h = a * u: da = dh * a, du = dh * u",
           "Each factor of a product receives the upstream gradient times the OTHER factor: h = a * u gives "
           "da = dh * u and du = dh * a.",
           "da = dh * u; du = dh * a.",
           (((r"\b(d(\w+)) = (d\w+) \* (\w+)(\s+)(d\4) = \3 \* \2\b", r"\1 = \3 * \2\5\6 = \3 * \4"),),)),
    Family("glu_up_grad_uses_pre_activation",
           "the up branch's gradient uses the gate's pre-activation g instead of act(g) (du = dh * g)",
           "h = act(g) * u, so dh/du = act(g): the gradient of the up branch is dh times the ACTIVATED gate, "
           "not its input g.",
           "du = dh * a with a = act(g).",
           (((r"\b(du = dh \* )a\b", r"\1g"),),)),
    Family("glu_dW_up_from_dh", "dW_up computed from dh instead of du (the act(g) factor forgotten)",
           "u = x W_up^T feeds h through the product h = a * u, so the up branch's gradient is du = dh * a "
           "and dW_up = du^T x; dh itself skips the gate factor a.",
           "dW_up = du.reshape(-1, F).T @ x2 with du = dh * a.",
           (((r"\b(dW_up = )du\b", r"\1dh"),),)),
    Family("glu_dW_gate_from_da", "dW_gate computed from da instead of dg (the activation's derivative forgotten)",
           "g = x W_gate^T reaches h through a = act(g): its gradient is dg = da * act'(g), and dW_gate = "
           "dg^T x. da is the gradient of the activation's output, not of g.",
           "dW_gate = dg.reshape(-1, F).T @ x2 with dg = da * act'(g).",
           (((r"\b(dW_gate = )dg\b", r"\1da"),),)),
    Family("glu_dx_one_branch", "dx through one branch only: x feeds the gate and the up projection, so "
           "dx = dg W_gate + du W_up",
           "x is used twice, g = x W_gate^T and u = x W_up^T: its gradient is the sum of the two paths "
           "(the multivariable chain rule), dg W_gate from the gate branch and du W_up from the up branch.",
           "dx = dg @ W_gate + du @ W_up.",
           (((r"\b(dx = )dg @ W_gate \+ (du @ W_up)\b", r"\1\2"),),
            ((r"\b(dx = dg @ W_gate) \+ du @ W_up\b", r"\1"),))),
    Family("glu_dx_weights_swapped", "dx pairs each branch's gradient with the other branch's weight "
           "(dg @ W_up + du @ W_gate)",
           "dg is the gradient of g = x W_gate^T, so it goes back to x through W_gate; du, of u = x W_up^T, "
           "through W_up: dx = dg W_gate + du W_up.",
           "dx = dg @ W_gate + du @ W_up.",
           (((r"\b(dx = dg @ )W_gate( \+ du @ )W_up\b", r"\1W_up\2W_gate"),),)),
    Family("glu_dW_down_from_one_factor", "dW_down from one factor of the hidden product h = act(g) * u "
           "(act(g) or u) instead of h itself",
           "y = h W_down^T with h = act(g) * u: W_down multiplies the hidden product, so dW_down = dy^T h. "
           "act(g) or u alone is what h was before the gating.",
           "dW_down = dy2.T @ h.reshape(-1, F).",
           (((r"\b(dW_down = dy2\.T @ )h2\b", r"\1a.reshape(-1, F)"),),
            ((r"\b(dW_down = dy2\.T @ )h2\b", r"\1u.reshape(-1, F)"),))),
)
