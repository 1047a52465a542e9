"""The drills' cases: deterministic per seed, edge shapes drawn, the reference solutions agree with the torch
oracle and with the library on hypothesis-drawn seeds, grading works without torch and the runtime never
imports it; the docs name every exercise and mistake.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import numpy_transformer.drills as drills
from numpy_transformer.drills import exercises
from numpy_transformer.drills.engine import diagnose
from numpy_transformer.drills.engine.judge import grade_case
from tests.drills.drill_helpers import (
    DATA_DIR,
    MISTAKES,
    NAMES,
    ROOT,
    apply_patches,
    check_inprocess,
    first_diagnosis,
    solution_source,
    write,
)

# --------------------------------------------------------------------------------------------------
# cases: deterministic, edge shapes, and the reference agrees with torch
# --------------------------------------------------------------------------------------------------

def test_exercises_sharing_function_names_are_told_apart_by_the_file_name(tmp_path):
    from numpy_transformer.drills.engine.grader import guess_exercise
    source = solution_source("cross_entropy_options")
    assert guess_exercise(source, str(tmp_path / "cross_entropy_options.py")).name == "cross_entropy_options"
    assert guess_exercise(source, str(tmp_path / "ce.py")).name == "cross_entropy"
    assert guess_exercise(source, str(tmp_path / "mine.py")).name == "cross_entropy"


def test_kv_cache_step_equals_the_full_causal_forwards_last_rows():
    """The kv-cache drill's solution and reference: the last S rows of causal attention over T + S."""
    from numpy_transformer import functional as F
    sol = _solution_module("causal_attention_kv_cache")
    ref = drills.EXERCISES["causal_attention_kv_cache"].reference()
    rng = np.random.default_rng(5)
    for t, s in [(0, 1), (1, 1), (5, 1), (4, 3), (0, 4)]:
        q, k = rng.standard_normal((2, 3, t + s, 4)), rng.standard_normal((2, 3, t + s, 4))
        v = rng.standard_normal((2, 3, t + s, 5))
        full, _ = F.scaled_dot_product_attention_forward(q, k, v, is_causal=True)
        for impl in (sol, ref):
            out, kc, vc = impl.kv_cache_attention(q[:, :, t:], k[:, :, t:], v[:, :, t:], k[:, :, :t], v[:, :, :t])
            np.testing.assert_allclose(out, full[:, :, t:], rtol=1e-12, atol=1e-12)
            np.testing.assert_array_equal(kc, k)
            np.testing.assert_array_equal(vc, v)


def test_cases_are_deterministic_per_seed():
    ex = drills.EXERCISES["scaled_dot_product_attention"]
    a = [exercises.draw_case(ex, 5, i) for i in range(20)]
    b = [exercises.draw_case(ex, 5, i) for i in range(20)]
    c = [exercises.draw_case(ex, 6, i) for i in range(20)]
    for x, y in zip(a, b):
        assert x.desc == y.desc and np.array_equal(x.inputs["q"], y.inputs["q"])
    assert any(x.desc != z.desc or not np.array_equal(x.inputs["q"], z.inputs["q"]) for x, z in zip(a, c))


def test_edge_shapes_are_drawn():
    att = [exercises.draw_case(drills.EXERCISES["scaled_dot_product_attention"], 0, i).inputs for i in range(40)]
    assert any(c["q"].shape[:3] == (1, 1, 1) for c in att)                        # B = H = S = 1
    assert any(c["k"].shape[2] == 1 for c in att)                                 # T = 1
    assert any(c["mask"] is not None and c["mask"].ndim == 4 for c in att)        # per-batch masks
    assert any(c["causal"] and c["mask"] is not None for c in att)                # both
    mha = [exercises.draw_case(drills.EXERCISES["multi_head_attention"], 0, i).inputs for i in range(40)]
    assert any(c["num_heads"] == 1 for c in mha) and any(c["x"].shape[:2] == (1, 1) for c in mha)
    assert any(c["num_heads"] > 1 for c in mha)
    enc = [exercises.draw_case(drills.EXERCISES["encoder_layer"], 0, i).inputs for i in range(40)]
    assert {c["norm_first"] for c in enc} == {False, True}
    emb = [exercises.draw_case(drills.EXERCISES["embedding"], 0, i).inputs for i in range(40)]
    assert sum(len(np.unique(c["ids"])) < c["ids"].size for c in emb) > 20        # repeated ids


def test_new_exercises_draw_their_edge_cases():
    def cases(name, n=40):
        return [exercises.draw_case(drills.EXERCISES[name], 0, i).inputs for i in range(n)]
    drop = cases("dropout")
    assert {c["training"] for c in drop} == {False, True}
    assert any(c["p"] == 0.0 for c in drop) and any(c["p"] == 1.0 for c in drop)
    ce = cases("cross_entropy_options")
    kept = [(c["targets"] != c["ignore_index"]).sum() for c in ce]
    assert min(kept) >= 1 and any(k < len(c["targets"]) for k, c in zip(kept, ce))     # ignored rows
    assert any(c["ignore_index"] >= 0 and (c["targets"] == c["ignore_index"]).any() for c in ce)  # a real id
    assert any(c["label_smoothing"] > 0 for c in ce) and any(c["label_smoothing"] == 0 for c in ce)
    adam = cases("adamw_step")
    assert any(c["step"] == 0 and not c["m"].any() for c in adam) and any(c["step"] > 100 for c in adam)
    assert any(np.abs(c["grad"]).max() < 1e-5 for c in adam) and any(c["weight_decay"] == 0 for c in adam)
    kv = cases("causal_attention_kv_cache")
    assert any(c["k_cache"].shape[2] == 0 for c in kv) and any(c["q"].shape[2] > 1 for c in kv)
    flash = cases("flash_attention_backward")
    assert any(c["causal"] for c in flash)
    assert any(c["q"].shape[2] > c["block_q"] and c["k"].shape[2] > c["block_k"] for c in flash)
    xattn = cases("cross_attention")
    assert any(c["memory_key_padding_mask"] is not None and c["memory_key_padding_mask"].any() for c in xattn)
    assert any(c["x"].shape[1] != c["memory"].shape[1] for c in xattn)
    dec = cases("decoder_layer")
    assert any(c["tgt_mask"] is None for c in dec) and any(c["memory_key_padding_mask"] is not None for c in dec)


@pytest.mark.parametrize("name", NAMES)
def test_reference_agrees_with_the_torch_oracle(name):
    pytest.importorskip("torch")
    from reference_torch import drill_oracle
    ex = drills.EXERCISES[name]
    for i in range(16):
        case = exercises.draw_case(ex, 11, i)
        from numpy_transformer.drills.engine.judge import _reference_outputs
        with np.errstate(all="ignore"):
            ref = _reference_outputs(ex, case.inputs)
        theirs = drill_oracle.run(name, case.inputs)
        assert set(theirs) == set(ref)
        for k in ref:
            r = diagnose.compare(theirs[k], ref[k], 1e-9)
            assert r["ok"], (name, i, case.desc, k, r["message"])


def test_oracle_is_reported_when_torch_is_installed(tmp_path):
    pytest.importorskip("torch")
    path = write(tmp_path, solution_source("softmax"))
    rc, out = check_inprocess(path, torch="auto", cases=6)
    assert rc == 0
    assert re.search(r"oracle: torch \S+ agrees with the reference on 6/6 cases", out), out


def test_grading_works_without_torch(tmp_path):
    """With torch unimportable, `--torch` still grades (NumPy reference only) and says so."""
    fake = tmp_path / "fake"
    (fake / "torch").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text("raise ImportError('No module named torch', name='torch')\n")
    path = write(tmp_path, solution_source("softmax"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(fake), ROOT]))
    env["NT_DRILL_DATA"] = DATA_DIR
    proc = subprocess.run([sys.executable, "-m", "numpy_transformer.cli.drill", "check", str(path), "-q",
                           "--cases", "6", "--torch"], capture_output=True, text=True, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "torch is not installed" in proc.stdout


def test_runtime_never_imports_torch():
    code = ("import sys, numpy_transformer.drills, numpy_transformer.cli.drill, "
            "numpy_transformer.drills.engine.worker\n"
            "import numpy_transformer.drills.engine.judge\n"
            "import numpy_transformer.drills.exercises\n"
            "assert not [m for m in sys.modules if m == 'torch' or m.startswith('torch.')], 'torch imported'\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 0, proc.stderr


# --------------------------------------------------------------------------------------------------
# property: the reference solutions agree with the library on hypothesis-drawn seeds
# --------------------------------------------------------------------------------------------------

def _solution_module(name, _cache={}):
    if name not in _cache:
        import importlib.util
        spec = importlib.util.spec_from_file_location(f"_drill_solution_{name}", drills.solution_path(name))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _cache[name] = mod
    return _cache[name]


@given(name=st.sampled_from(NAMES), seed=st.integers(0, 2**31 - 1), index=st.integers(0, 10_000))
def test_solutions_pass_on_drawn_cases(name, seed, index):
    ex = drills.EXERCISES[name]
    case = exercises.draw_case(ex, seed, index)
    with np.errstate(all="ignore"):
        res = grade_case(ex, _solution_module(name), case, None, None, {}, diagnose.TOL, None)
    bad = {k: v["message"] for k, v in res["results"].items() if not v["ok"]}
    assert not bad and res["failure"] is None, (case.desc, bad, res["failure"])


def test_two_mistakes_at_once_are_both_named(tmp_path):
    patches = (MISTAKES[("multi_head_attention", "mha_scale_sqrt_d")]
               + MISTAKES[("multi_head_attention", "mha_backward_no_rowsum")])
    path = tmp_path / "mha.py"
    path.write_text(apply_patches(solution_source("multi_head_attention"), patches))
    rc, out = check_inprocess(path, cases=20)
    assert rc == 1
    assert first_diagnosis(out) == "mha_scale_sqrt_d", out
    assert "two known mistakes at once" in out and "[mha_scale_sqrt_d + mha_backward_no_rowsum]" in out, out


def test_docs_name_every_exercise_and_mistake():
    """Each exercise's page is its folder's README.md (docs/drills.md links to them, lists none)."""
    for ex in drills.EXERCISES.values():
        with open(os.path.join(ex.folder, "README.md"), encoding="utf-8") as fh:
            doc = fh.read()
        assert f"`{ex.name}`" in doc, ex.name
        for fn in ex.functions:
            assert fn in doc, fn
        for m in ex.mistakes:
            assert f"`{m.id}`" in doc, m.id


def test_solutions_and_skeletons_fit_100_columns():
    """`drill solution` prints the solutions and `drill start` copies the skeletons: keep them
    within 100 columns."""
    import pathlib

    import numpy_transformer

    package = pathlib.Path(numpy_transformer.__file__).parent
    files = sorted((package / "drills" / "exercises").glob("*/solution.py"))
    files += sorted((package / "drills" / "exercises").glob("*/skeleton.py"))
    assert len(files) > 2
    long = [f"{path.relative_to(package)}:{n}: {len(line)} characters"
            for path in files
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if len(line) > 100]
    assert not long, "\n".join(long)
