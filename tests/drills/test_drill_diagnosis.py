"""How `drill check` reaches a diagnosis beyond the listed mistakes (issue 24): the op families
(``drills/families/``) recognised in every exercise containing the op, the generic readings computed
from the error (``engine/readings.py``) and the localisation in composite layers
(``engine/localise.py``). Every example is a patch of an exercise's solution, written here."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest

from numpy_transformer import drills
from numpy_transformer.drills import families
from numpy_transformer.drills.engine import readings
from numpy_transformer.drills.engine.definition import Case
from numpy_transformer.drills.engine.harness import run_impl
from numpy_transformer.drills.exercises import draw_case


def solution(name):
    with open(drills.EXERCISES[name].solution_path, encoding="utf-8") as fh:
        return fh.read()


def check_patched(tmp_path, name, patches, cases=12):
    """``drill check`` of the solution of ``name`` with ``patches`` applied; (status, flat output)."""
    src = solution(name)
    for old, new in patches:
        assert old in src, old
        src = src.replace(old, new)
    path = tmp_path / f"{name}.py"
    path.write_text(src)
    buf = io.StringIO()
    rc = drills.check_file(str(path), stream=buf, cases=cases, torch="off", quiet=True)
    return rc, " ".join(buf.getvalue().split())


def named(out):
    m = re.search(r"known mistake \[(\w+)\]: ", out)
    return m.group(1) if m else None


def _twins(ex, listed, family_cfg, n=6):
    """True when some way of making the listed mistake ``listed`` gives the same outputs as the family
    patch ``family_cfg`` on ``n`` cases (the same error under two names)."""
    vb = ex.variant(family_cfg)
    for cfg in ex.mistake(listed).configs:
        va = ex.variant(cfg)
        same = True
        for i in range(n):
            inputs = draw_case(ex, 3, i).inputs
            with np.errstate(all="ignore"):
                oa, ob = (run_impl(ex, v, inputs, None, None, None).outputs for v in (va, vb))
            if oa.keys() != ob.keys() or any(not np.allclose(oa[k], ob[k], equal_nan=True) for k in oa):
                same = False
                break
        if same:
            return True
    return False


# --------------------------------------------------------------------------------------------------
# families: one mistake of an op, recognised in every exercise containing the op
# --------------------------------------------------------------------------------------------------

FAMILY_CASES = [(ex.name, m.id, k) for ex in drills.EXERCISES.values() for m in ex.families
                for k in range(len(m.configs))]


def test_every_op_an_exercise_declares_has_families():
    for ex in drills.EXERCISES.values():
        for op in ex.ops:
            assert families.families_of(op), (ex.name, op)


def test_an_unknown_op_is_refused_with_its_name():
    ops = families.OP_MODULES              # the modules of drills/families/, sorted: the message lists them all
    assert list(ops) == sorted(ops) and {"activations", "attention", "softmax"} <= set(ops)
    with pytest.raises(ValueError, match=re.escape(f"op: got 'softmx', expected one of {', '.join(ops)}")):
        families.families_of("softmx")


def test_a_rule_applies_only_where_its_pattern_occurs():
    fam = families.families_of("softmax")[0]
    assert families.instantiate(fam, "def f(x):\n    return x\n") is None
    m = families.instantiate(fam, "    return y * (dy - np.sum(dy * y, axis=-1, keepdims=True))\n")
    assert m.patches == (("y * (dy - np.sum(dy * y, axis=-1, keepdims=True))", "y * dy"),)


def test_a_family_the_exercise_already_lists_is_not_added_twice():
    ex = drills.EXERCISES["softmax"]           # lists softmax_backward_no_rowsum itself
    assert "softmax_backward_no_rowsum" in {m.id for m in ex.mistakes}
    assert "softmax_backward_no_rowsum" not in {m.id for m in ex.families}
    for e in drills.EXERCISES.values():          # nor a family patch that is exactly a listed one's
        own = {cfg for m in e.mistakes for cfg in m.configs}
        assert not any(cfg in own for m in e.families for cfg in m.configs), e.name


@pytest.mark.parametrize("name,family,k", FAMILY_CASES)
def test_family_is_named_in_each_exercise_containing_its_op(name, family, k, tmp_path):
    ex = drills.EXERCISES[name]
    cfg = ex.mistake(family).configs[k]
    rc, out = check_patched(tmp_path, name, cfg)
    assert rc == 1 and "Traceback" not in out, out
    got = named(out)
    # the family's own id, or a listed mistake of the exercise making the very same error (its twin)
    assert got == family or (got in {m.id for m in ex.mistakes} and _twins(ex, got, cfg)), out


@pytest.mark.parametrize("name,patches,family", [
    # the examples: known in one exercise, unknown in its sibling (all unnamed on main)
    ("flash_attention_backward", [("P * (dP - delta[..., r0:r1, :])", "P * dP")], "softmax_backward_no_rowsum"),
    ("grouped_query_attention", [("k=1), -np.inf, scores)", "k=0), -np.inf, scores)")],
     "attn_causal_blocks_diagonal"),
    ("grouped_query_attention", [("(scale * (dA @ kg))", "(dA @ kg)"),
                                 ("(scale * (np.swapaxes(dA, -1, -2) @ qg))", "(np.swapaxes(dA, -1, -2) @ qg)")],
     "attn_backward_no_scale"),
    ("relative_position_bias", [("query = np.arange(S)[:, None] + (T - S)", "query = np.arange(S)[:, None]")],
     "positions_top_left_aligned"),
    # never named anywhere before: the head split's transpose, a residual's gradient
    ("cross_attention", [("x.reshape(B, L, H, D // H).transpose(0, 2, 1, 3)", "x.reshape(B, H, L, D // H)")],
     "heads_split_without_transpose"),
    ("encoder_layer", [("dh = dz2 + _ffn_backward(dz2, c_f, p, g)", "dh = _ffn_backward(dz2, c_f, p, g)")],
     "residual_grad_dropped"),
    ("decoder_layer", [("dh2 = dz3 + _ffn_backward(dz3, c_f, p, g)", "dh2 = _ffn_backward(dz3, c_f, p, g)")],
     "residual_grad_dropped"),
    ("swiglu", [("np.where(z >= 0, 1.0, e) / (1.0 + e)", "np.where(z >= 0, e, 1.0) / (1.0 + e)")],
     "sigmoid_stable_branch_swapped"),
])
def test_the_sibling_exercise_names_the_mistake(name, patches, family, tmp_path):
    rc, out = check_patched(tmp_path, name, patches)
    assert rc == 1 and named(out) == family, out
    assert drills.EXERCISES[name].mistake(family).title in out


def test_kv_cache_mask_blocking_the_diagonal_is_not_called_attending_before_appending(tmp_path):
    """The `>=` mask: the code appends first; the diagonal is what it blocks (issue 24's wrong message)."""
    rc, out = check_patched(tmp_path, "causal_attention_kv_cache", [
        ("blocked = np.triu(np.ones((S, N), dtype=bool), k=N - S + 1)",
         "blocked = np.arange(N)[None, :] >= np.arange(S)[:, None] + (N - S)")], cases=16)
    assert rc == 1 and named(out) == "attn_causal_blocks_diagonal", out
    assert "before appending" not in out
    m = drills.EXERCISES["causal_attention_kv_cache"].mistake("kv_attend_before_append")
    assert "left out" in m.title and m.fix.startswith("concatenate first")


@pytest.mark.parametrize("patches,mistake", [
    ([("_mha_forward(h1, memory,", "_mha_forward(tgt, memory,")], "dec_cross_queries_wrong_stream"),
    ([("[p[k] for k in CA], num_heads, pad)", "[p[k] for k in CA], num_heads, None)")], "dec_padding_mask_ignored"),
])
def test_decoder_mistakes_never_named_before(patches, mistake, tmp_path):
    rc, out = check_patched(tmp_path, "decoder_layer", patches)
    assert rc == 1 and named(out) == mistake, out


def test_a_mistake_made_in_one_output_only_is_named_for_that_output(tmp_path):
    """The scale forgotten in dk alone: the family's variant (both dq and dk) would break dq, which is
    right, so the mistake is named as made in part of the code."""
    rc, out = check_patched(tmp_path, "grouped_query_attention",
                            [("(scale * (np.swapaxes(dA, -1, -2) @ qg))", "(np.swapaxes(dA, -1, -2) @ qg)")])
    assert rc == 1, out
    assert ("known mistake in part of your code [attn_backward_no_scale]: the 1/sqrt(Dh) scale forgotten in "
            "the backward (dq and dk), in dk only") in out, out


# --------------------------------------------------------------------------------------------------
# generic readings, computed from the error and verified
# --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,patches,needles", [
    ("scaled_dot_product_attention", [("dq = scale * (dA @ k)", "dq = 2 * scale * (dA @ k)")],
     ["dq: off by a constant factor 2 (verified to 1e-09)", "counted twice"]),
    ("layer_norm", [("dbeta = np.sum(dy, axis=lead)", "dbeta = np.sum(dy, axis=lead) / dy.shape[-1]")],
     ["dbeta: off by a constant factor", "= 1/D", "a sum where a mean over D items belongs"]),
    ("dropout", [("    return dy * keep * scale", "    return dy * keep * scale * scale")],
     ["dx: off by a constant factor", "= 1/(1-p)", "the inverted-dropout scale"]),
    ("gelu", [("    return dy * slope", "    return cache[0] * slope")],
     ["dx: what the right formula gives with dy replaced by x", "uses x where the upstream gradient dy belongs"]),
    ("softmax", [("    return y * (dy - np.sum(dy * y, axis=-1, keepdims=True))",
                  "    dy = y\n    return y * (dy - np.sum(dy * y, axis=-1, keepdims=True))")],
     ["dx: what the right formula gives with dy replaced by y (the forward's output",
      "uses y where the upstream gradient dy belongs"]),
    ("softmax", [("return y * (dy - np.sum(dy * y, axis=-1, keepdims=True))",
                  "return y * (dy - 0.5 * np.sum(dy * y, axis=-1, keepdims=True))")],
     ["the error is exactly 0.5 times the change that 'softmax backward missing the row-sum term' makes",
      "one additive term is off"]),
    ("scaled_dot_product_attention", [("blocked = blocked | np.triu", "blocked = np.triu")],
     ["dq: what the right formula gives with mask=None (no mask)", "mask is ignored (never applied)"]),
    ("swiglu", [("    dW_gate = dg.reshape(-1, F).T @ x2 ", "    dW_gate = du.reshape(-1, F).T @ x2 ")],
     ["dW_gate: holds what dW_up should be (verified to 1e-09): two results swapped"]),
    ("rms_norm", [("dx = rstd * (dxhat - xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True))",
                   "dx = rstd * (dxhat + xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True))")],
     ["one additive term is off", "its sign flipped"]),
])
def test_generic_reading_of_an_unlisted_mistake(name, patches, needles, tmp_path):
    rc, out = check_patched(tmp_path, name, patches)
    assert rc == 1 and named(out) is None, out
    assert "* no listed mistake, but the error reads (verified on your arrays):" in out, out
    assert "no known mistake explains" not in out, out
    for needle in needles:
        assert needle in out, (needle, out)


def test_a_sign_flipped_line_is_named_by_its_mutant(tmp_path):
    """-dy * slope: the mutation engine finds the one line whose negation reproduces the wrong arrays and
    names it (before the mutants, the generic reading said "off by a constant factor -1")."""
    rc, out = check_patched(tmp_path, "gelu", [("    return dy * slope", "    return -dy * slope")])
    assert rc == 1 and (named(out) or "").startswith("mutant_gelu_backward"), out
    assert "the value's sign flipped" in out, out


def _case(**inputs):
    return Case(inputs=inputs, desc="", factors={})


def test_a_scale_is_claimed_only_when_the_numbers_verify_it():
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((4, 5))
    case = _case(x=ref)
    assert readings.scaled(2 * ref, ref, case)[0] == "scaled:2"
    assert readings.scaled(2 * ref + 1e-6 * rng.standard_normal(ref.shape), ref, case) is None
    assert readings.scaled(ref, ref, case) is None
    key, msg = readings.scaled(ref / 5, ref, case)
    assert key == "scaled:1/N:axis 1 of x" and "the length of axis 1 of x" in msg
    assert readings.scaled(0.3 * ref, ref, case) == ("scaled:other",
                                                     "off by a constant factor 0.3 (verified to 1e-09)")


def test_a_term_reading_needs_the_error_along_that_term():
    ex = drills.EXERCISES["softmax"]
    rng = np.random.default_rng(1)
    ref, term = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    variants = {m.id: [] for m in ex.known}
    variants[ex.mistakes[0].id] = [{"dx": ref + term}]
    assert readings.term_off(ex, "dx", ref + 0.25 * term, ref, variants)[0] == f"term:{ex.mistakes[0].id}"
    assert readings.term_off(ex, "dx", ref + 0.25 * term + 1e-3 * rng.standard_normal((3, 4)), ref,
                             variants) is None


# --------------------------------------------------------------------------------------------------
# localisation in composite layers
# --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,patches,needle", [
    ("decoder_layer", [("[p[k] for k in CA], num_heads, pad)", "[p[k] for k in CA], num_heads, None)")],
     "with the memory padding mask switched off every array agrees: the mistake is in the memory padding mask"),
    ("decoder_layer", [("_mha_forward(h1, memory,", "_mha_forward(tgt, memory,")],
     "the mistake is in the cross-attention's scores and softmax"),
    ("multi_head_attention", [("return x.reshape(B, S, H, D // H).transpose(0, 2, 1, 3)",
                               "return x.reshape(B, H, S, D // H)")],
     "the mistake is in the head split and merge"),
    ("cross_attention", [("scale = 1.0 / np.sqrt(D // H)", "scale = 0.9 / np.sqrt(D // H)")],
     "the mistake is in the scores and softmax"),
    ("encoder_layer", [("da = dr * (a > 0)", "da = dr * (a > 0) * 0.5")],
     "the backward first goes wrong at the feed-forward"),
    ("decoder_layer", [("dh1 = dz2 + dq_ca", "dh1 = dq_ca + 0.5 * dz2")],
     "the backward first goes wrong at LN1"),
])
def test_composite_layers_say_which_sub_block_goes_wrong(name, patches, needle, tmp_path):
    rc, out = check_patched(tmp_path, name, patches)
    assert rc == 1, out
    assert "where it goes wrong" in out and needle in out, out


def test_a_correct_layer_reports_no_localisation(tmp_path):
    rc, out = check_patched(tmp_path, "decoder_layer", [], cases=6)
    assert rc == 0 and "where it goes wrong" not in out, out
