"""The composite layers' mistake families (issue 24): the projections around attention
(``families/projections.py``), the feed-forward's backward (``feedforward.py``), the norm placement
and the residual (``residual.py``) and the head merge (``heads.py``), in multi-head attention,
cross-attention and the encoder and decoder layers. Each mistake below is written as a candidate
would spell it, not as the family's rewrite of the reference solution."""

from __future__ import annotations

import pytest

import numpy_transformer.drills as drills
from numpy_transformer.drills import families
from tests.drills.drill_helpers import apply_patches, check_inprocess, first_diagnosis, solution_source

LAYERS = ("multi_head_attention", "cross_attention", "encoder_layer", "decoder_layer")


@pytest.mark.parametrize("name", LAYERS)
def test_every_attention_layer_knows_the_projection_mistakes(name):
    ex = drills.EXERCISES[name]
    assert "projections" in ex.ops
    ids = {m.id for m in ex.families} | {m.id for m in ex.mistakes}
    for fam in families.families_of("projections"):
        if name == "cross_attention" and fam.id == "proj_input_grad_no_query_path":
            continue                                      # x feeds the queries alone: no sum to drop from
        assert fam.id in ids, (name, fam.id)


@pytest.mark.parametrize("name", ("encoder_layer", "decoder_layer"))
def test_the_layers_know_the_feed_forward_and_norm_placement_mistakes(name):
    ex = drills.EXERCISES[name]
    assert "feedforward" in ex.ops
    ids = {m.id for m in ex.families}
    listed = {cfg for m in ex.mistakes for cfg in m.configs}
    for fam in families.families_of("feedforward"):   # a family, or a listed mistake making the same patch
        made = families.instantiate(fam, open(ex.solution_path).read())
        assert fam.id in ids or (made is not None and set(made.configs) <= listed), (name, fam.id)
    assert "residual_pre_ln_for_post_ln" in ids
    pre_ln = ex.mistake("residual_pre_ln_for_post_ln")
    assert len(pre_ln.configs) == {"encoder_layer": 2, "decoder_layer": 4}[name]   # each sub-layer, or all


CASES = [
    ("multi_head_attention", [("dx = dq @ Wq + dk @ Wk + dv @ Wv", "dx = (dq @ Wq) + (dv @ Wv)")],
     "proj_input_grad_no_key_path"),
    ("multi_head_attention", [("dctx = _split_heads(dout @ Wo, H)",
                               "dctx = _split_heads(np.einsum('bsd,ed->bse', dout, Wo), H)")],
     "proj_out_backward_transposed_weight"),
    ("encoder_layer", [("return dx_q + dx_k + dx_v", "return dx_k + dx_v")], "proj_input_grad_no_query_path"),
    ("encoder_layer", [("da = dr * (a > 0)", "da = np.where(dr > 0, dr, 0.0)")], "ffn_relu_gate_on_gradient"),
    ("encoder_layer", [('dr, g["W2"] = _lin_grads(dy, r, p["W2"])',
                        'dr, g["W2"] = _lin_grads(dy, x @ p["W1"].T + p["b1"], p["W2"])')],
     "ffn_dw2_from_pre_activation"),
    ("encoder_layer", [("        h = x + a\n", "        h = a + n1\n")], "residual_adds_normed_input"),
    ("encoder_layer", [("ctx = (P @ vh).transpose(0, 2, 1, 3).reshape(B, S, D)", "ctx = np.reshape(P @ vh, (B, S, D))"),
                       ("merge = lambda t: t.transpose(0, 2, 1, 3).reshape(B, S, D)",
                        "merge = lambda t: np.reshape(t, (B, S, D))")], "heads_merge_without_transpose"),
    ("decoder_layer", [("    f, c_f = _ffn_forward(h2, p)\n"
                        "    y, c_n3 = _ln_forward(h2 + f, p[\"gamma3\"], p[\"beta3\"])\n",
                        "    z, c_n3 = _ln_forward(h2, p[\"gamma3\"], p[\"beta3\"])\n    f, c_f = _ffn_forward(z, p)\n"
                        "    y = h2 + f\n")], "residual_pre_ln_for_post_ln"),
    ("decoder_layer", [("dtgt = dz1 + dq_sa + dk_sa + dv_sa", "dtgt = dz1 + dq_sa + dk_sa")],
     "proj_input_grad_no_value_path"),
]


@pytest.mark.parametrize("name,patches,family", CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_a_layer_mistake_in_the_candidates_spelling_is_named(name, patches, family, tmp_path):
    path = tmp_path / f"{name}.py"
    path.write_text(apply_patches(solution_source(name), patches))
    rc, out = check_inprocess(path, exercise=name, cases=12)
    assert rc == 1, out
    assert first_diagnosis(out) == family, out
    assert drills.EXERCISES[name].mistake(family).title in " ".join(out.split())
