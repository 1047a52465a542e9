"""The softmax, attention, activation and gated-unit families (``drills/families/``) name mistakes that
no exercise lists, in the candidate's own spelling. Each example is a patch written here (not one of
the held-out ``tests/drills/unlisted/`` set), unnamed before these families existed."""

from __future__ import annotations

import pytest

from numpy_transformer import drills
from tests.drills.test_drill_diagnosis import check_patched, named


@pytest.mark.parametrize("name,patches,family", [
    # softmax: the forward's sum over the last-but-one axis; the backward's row sum unweighted, over axis 0
    ("softmax", [("y = e / e.sum(axis=-1, keepdims=True)", "y = e / e.sum(axis=-2, keepdims=True)")],
     "softmax_sum_wrong_axis"),
    ("softmax", [("np.sum(dy * y, axis=-1, keepdims=True)", "np.sum(dy, axis=-1, keepdims=True)")],
     "softmax_backward_rowsum_unweighted"),
    ("grouped_query_attention", [("np.sum(dP * P, axis=-1, keepdims=True)", "np.sum(dP * P, axis=-2, keepdims=True)")],
     "softmax_backward_rowsum_wrong_axis"),
    ("multi_head_attention", [("dA = P * (dP - np.sum(dP * P, axis=-1, keepdims=True)) * scale",
                               "dA = P * (1 - P) * dP * scale")], "softmax_backward_diagonal"),
    ("grouped_query_attention", [("dA = P * (dP - np.sum(dP * P, axis=-1, keepdims=True))", "dA = dP")],
     "softmax_backward_skipped"),
    ("grouped_query_attention", [("P = e / e.sum(axis=-1, keepdims=True)", "P = e / e.sum(axis=-2, keepdims=True)")],
     "softmax_sum_wrong_axis"),
    ("flash_attention_backward", [("P = np.exp(s - lse[..., r0:r1, None])", "P = np.exp(s + lse[..., r0:r1, None])")],
     "softmax_lse_sign_flipped"),
    # attention: the scale from a sequence length; a tile's gradient assigned
    ("grouped_query_attention", [("scale = 1.0 / np.sqrt(Dh)", "scale = 1.0 / np.sqrt(S)")],
     "attn_scale_sequence_length"),
    ("causal_attention_kv_cache", [("/ np.sqrt(Dh))", "/ np.sqrt(N))")], "attn_scale_sequence_length"),
    ("flash_attention_backward", [("dq[..., r0:r1, :] += dA", "dq[..., r0:r1, :] = dA"),
                                  ("dk[..., c0:c1, :] += np", "dk[..., c0:c1, :] = np"),
                                  ("dv[..., c0:c1, :] += np", "dv[..., c0:c1, :] = np")],
     "attn_tile_grad_not_accumulated"),
    # the sigmoid and SiLU
    ("silu", [("s + x * s * (1.0 - s)", "s + x * (1.0 - s)")], "sigmoid_derivative_wrong"),
    ("swiglu", [("dg = da * (s + g * s * (1.0 - s))", "dg = da * (s + g * (1.0 - s * s))")],
     "sigmoid_derivative_wrong"),
    ("silu", [("s + x * s * (1.0 - s)", "x * s * (1.0 - s)")], "silu_backward_no_s_term"),
    ("swiglu", [("a = g * s ", "a = s ")], "silu_forward_no_x"),
    ("swiglu", [("dg = da * (s + g * s * (1.0 - s))", "dg = da * (g + s * s * (1.0 - s))")],
     "act_product_rule_swapped"),
    # GELU, exact and tanh
    ("gelu", [("slope = cdf + x * pdf", "slope = x + cdf * pdf")], "act_product_rule_swapped"),
    ("gelu", [("pdf = np.exp(-0.5 * x * x)", "pdf = np.exp(-x * x)")], "gelu_pdf_exponent"),
    ("geglu", [("pdf = np.exp(-0.5 * g * g)", "pdf = np.exp(-g * g)")], "gelu_pdf_exponent"),
    ("gelu", [("y = x * 0.5 * (1.0 + _erf(x / math.sqrt(2.0)))", "y = x * _erf(x / math.sqrt(2.0))"),
              ("cdf = 0.5 * (1.0 + _erf(x / math.sqrt(2.0)))", "cdf = _erf(x / math.sqrt(2.0))")],
     "gelu_cdf_not_shifted"),
    ("geglu", [("_erf(g / math.sqrt(2.0))", "_erf(g)")], "gelu_erf_no_sqrt2"),
    ("gelu", [("(1.0 - t * t)", "(1.0 - t)")], "gelu_tanh_derivative_wrong"),
    ("gelu", [("(1.0 + 3 * 0.044715 * x * x)", "(1.0 + 0.044715 * x * x)")], "gelu_tanh_power_rule"),
    # the gated unit
    ("geglu", [("    da = dh * u\n    du = dh * a\n", "    da = dh * a\n    du = dh * u\n")],
     "glu_product_rule_swapped"),
    ("swiglu", [("du = dh * a", "du = dh * g")], "glu_up_grad_uses_pre_activation"),
    ("swiglu", [("dW_up = du.reshape", "dW_up = dh.reshape")], "glu_dW_up_from_dh"),
    ("geglu", [("dW_gate = dg.reshape", "dW_gate = da.reshape")], "glu_dW_gate_from_da"),
    ("geglu", [("g = x @ W_gate.T", "g = x @ W_up.T"), ("u = x @ W_up.T", "u = x @ W_gate.T")],
     "glu_activation_on_up_branch"),
])
def test_an_op_family_names_the_mistake(name, patches, family, tmp_path):
    rc, out = check_patched(tmp_path, name, patches)
    assert rc == 1 and named(out) == family, out
    assert drills.EXERCISES[name].mistake(family).title in out


def test_gelu_declares_its_op_and_the_gated_units_theirs():
    assert drills.EXERCISES["gelu"].ops == ("activations",)
    for name in ("swiglu", "geglu"):
        assert drills.EXERCISES[name].ops == ("activations", "glu")


def test_the_flash_row_sum_over_another_axis_is_not_a_family_there():
    """delta = rowsum(dout * out) over another axis breaks the tiles' broadcast (an exception, not a value
    the family could reproduce): the wrong-axis family applies to the Jacobian's own row sum only."""
    ex = drills.EXERCISES["flash_attention_backward"]
    assert "softmax_backward_rowsum_wrong_axis" not in {m.id for m in ex.families}
    assert "softmax_backward_rowsum_wrong_axis" in {m.id for m in drills.EXERCISES["softmax"].families}
