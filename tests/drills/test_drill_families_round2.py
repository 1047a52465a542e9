"""The second round of families for softmax, the activations, the gated units, cross-entropy, the
norms and AdamW (issue 24): each names a mistake that no exercise lists, in a candidate's own spelling
(an exercise or a spelling other than the held-out sets' where the op allows one), and none of them was
named before its family existed."""

from __future__ import annotations

import pytest

from numpy_transformer import drills
from tests.drills.test_drill_diagnosis import check_patched, named

ROUND2 = [
    # softmax: the outer factor y dropped (in attention), log-softmax's backward, the exponentials cached
    ("multi_head_attention", [("dA = P * (dP - np.sum(dP * P, axis=-1, keepdims=True)) * scale",
                               "dA = (dP - np.sum(dP * P, axis=-1, keepdims=True)) * scale")],
     "softmax_backward_no_outer_factor"),
    ("softmax", [("return y * (dy - np.sum(dy * y, axis=-1, keepdims=True))",
                  "return dy - np.sum(dy, axis=-1, keepdims=True) * y")], "softmax_backward_log_softmax"),
    ("softmax", [("return y, y", "return y, np.exp(z)")], "softmax_cache_unnormalised"),
    # the activations: the product rule's terms multiplied, f' alone, GELU's Phi term, its CDF's 1/2
    ("swiglu", [("dg = da * (s + g * s * (1.0 - s))", "dg = da * (s * (g * s * (1.0 - s)))")],
     "act_product_rule_terms_multiplied"),
    ("geglu", [("dg = da * (cdf + g * pdf)", "dg = da * pdf")], "act_derivative_of_factor_only"),
    ("gelu", [("slope = cdf + x * pdf", "slope = x * pdf")], "gelu_backward_no_cdf_term"),
    ("geglu", [("cdf = 0.5 * (1.0 + _erf(g / math.sqrt(2.0)))", "cdf = 1.0 + _erf(g / math.sqrt(2.0))")],
     "gelu_cdf_half_dropped"),
    ("swiglu", [("g * s * (1.0 - s)", "g * s * (1.0 + s)")], "sigmoid_derivative_wrong"),
    # tanh-GELU: the constant without its root (backward only), x^2 for x^3, the 1/2 dropped, the option
    ("gelu", [("c = math.sqrt(2.0 / math.pi)", "c = 2.0 / math.pi")], "gelu_tanh_constant_no_root"),
    ("gelu", [("0.044715 * x ** 3", "0.044715 * x * x")], "gelu_tanh_cubic_power"),
    ("gelu", [("y = 0.5 * x * (1.0 + np.tanh(u))", "y = x * (1.0 + np.tanh(u))")], "gelu_tanh_half_dropped"),
    ("gelu", [('x, approximate = cache\n    if approximate == "tanh":',
               'x, approximate = cache\n    if approximate == "Tanh":')], "gelu_approximate_ignored"),
    # the gated units: dx through one branch, its weights swapped, dW_down from one factor
    ("swiglu", [("dx = dg @ W_gate + du @ W_up", "dx = du @ W_up")], "glu_dx_one_branch"),
    ("geglu", [("dx = dg @ W_gate + du @ W_up", "dx = du @ W_gate + dg @ W_up")], "glu_dx_weights_swapped"),
    ("swiglu", [("dW_down = dy2.T @ h2", "dW_down = dy2.T @ u.reshape(-1, F)")], "glu_dW_down_from_one_factor"),
    # cross-entropy (the options exercise's spelling)
    ("cross_entropy_options", [("np.log(np.exp(z).sum(axis=-1, keepdims=True))",
                                "np.log(np.sum(np.exp(logits), axis=-1, keepdims=True))")],
     "ce_lse_of_unshifted_logits"),
    ("cross_entropy_options", [("nll = -logp[np.arange(N), t]", "nll = logp[np.arange(N), t]")],
     "ce_loss_not_negated"),
    ("cross_entropy_options", [("nll = -logp[np.arange(N), t]", "nll = -logp[:, t]")], "ce_loss_gathers_columns"),
    ("cross_entropy_options", [("d_nll = p - np.eye(V)[t]", "d_nll = p - np.ones_like(p)")],
     "ce_onehot_everywhere"),
    ("cross_entropy_options", [("return loss, (np.exp(logp), keep", "return loss, (logp, keep")],
     "ce_log_probabilities_as_probabilities"),
    ("cross_entropy_options", [("return d * (dloss / n_keep)", "return d * (dloss / V)")], "ce_mean_over_classes"),
    # the norms: gamma forgotten in one term of dx; the affine step in the wrong order
    ("layer_norm", [("dxhat.mean(axis=-1, keepdims=True)", "dy.mean(axis=-1, keepdims=True)")],
     "norm_backward_term_without_gamma"),
    ("rms_norm", [("np.mean(dxhat * xhat, axis=-1", "np.mean(xhat * dy, axis=-1")],
     "norm_backward_term_without_gamma"),
    ("encoder_layer", [("return xhat * gamma + beta,", "return gamma * (xhat + beta),")], "ln_affine_wrong_order"),
    # AdamW: a correction with the other beta
    ("adamw_step", [("m_hat = m / (1.0 - beta1 ** t)", "m_hat = m / (1.0 - beta2 ** t)")], "adamw_other_beta"),
]


@pytest.mark.parametrize("name,patches,family", ROUND2, ids=[f"{n}-{f}" for n, _, f in ROUND2])
def test_a_round2_family_names_the_mistake(name, patches, family, tmp_path):
    rc, out = check_patched(tmp_path, name, patches)
    assert rc == 1 and named(out) == family, out
    assert drills.EXERCISES[name].mistake(family).title in out
