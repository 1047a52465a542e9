"""The drills grade correctly: every exercise's reference solution, and an implementation built on the library
itself, PASS; every known mistake, written into a copy of the reference solution the way a person would
make it, FAILS with that mistake as the first diagnosis, and unknown mistakes still get a hint.

Grading runs in a subprocess (as for a user); the tests use few cases and ``--no-torch`` to stay fast.
"""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

import numpy_transformer.drills as drills
from numpy_transformer.drills import exercises
from numpy_transformer.drills.engine import diagnose
from numpy_transformer.drills.engine.judge import grade_case
from tests.drills.drill_helpers import (
    MISTAKES,
    NAMES,
    apply_patches,
    check,
    check_inprocess,
    first_diagnosis,
    flat,
    solution_source,
)

# --------------------------------------------------------------------------------------------------
# the exercises PASS with our implementations
# --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_reference_solution_passes(name, tmp_path):
    path = tmp_path / f"{name}.py"
    path.write_text(solution_source(name))
    rc, out = check_inprocess(path, cases=40)
    assert rc == 0, out
    assert "-> " in out and out.rstrip().endswith("PASS"), out
    assert re.search(r"score: (\d+)/\1 checks passed \(100%\), 40/40 cases fully correct", out), out


# Implementations that call the library itself (functional.py, or the nn modules for the big ones):
# each exercise folder's via_library.py.
def _via_library(name):
    with open(os.path.join(drills.EXERCISES[name].folder, "via_library.py"), encoding="utf-8") as fh:
        return fh.read()


ADAPTERS = {name: _via_library(name) for name in NAMES}


def test_every_exercise_has_an_adapter():
    assert set(ADAPTERS) == set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_library_implementation_passes(name):
    """The library, driven through the skeleton's signatures, passes every case (graded here, in-process:
    a submission that imports numpy_transformer is refused by `drill check`, next test)."""
    ex = drills.EXERCISES[name]
    ns = {}
    exec(compile(ADAPTERS[name], f"lib_{name}.py", "exec"), ns)
    adapter = type("Adapter", (), {f: staticmethod(ns[f]) for f in ex.functions})
    for i in range(24):
        with np.errstate(all="ignore"):
            res = grade_case(ex, adapter, exercises.draw_case(ex, 0, i), None, None, {}, diagnose.TOL, None)
        bad = {k: v["message"] for k, v in res["results"].items() if not v["ok"]}
        assert not bad and res["failure"] is None and not res["mutations"], (i, bad, res["failure"])


def test_a_file_importing_the_library_is_refused(tmp_path):
    path = tmp_path / "lib_softmax.py"
    path.write_text("# drill: softmax\n" + ADAPTERS["softmax"])
    rc, out = check_inprocess(path)
    assert rc == 1 and "a drill is NumPy alone" in " ".join(out.split()), out


@pytest.mark.parametrize("name", NAMES)
def test_default_variant_is_correct(name):
    """Every mistake is a patch of the solution, which is correct unpatched (the variant with no patch)."""
    ex = drills.EXERCISES[name]
    ns = ex.variant()
    for i in range(24):
        with np.errstate(all="ignore"):
            res = grade_case(ex, ns, exercises.draw_case(ex, 3, i), None, None, {}, diagnose.TOL, None)
        bad = {k: v["message"] for k, v in res["results"].items() if not v["ok"]}
        assert not bad and res["failure"] is None, (i, bad, res["failure"])


# --------------------------------------------------------------------------------------------------
# every known mistake FAILS with the right diagnosis
# --------------------------------------------------------------------------------------------------


def test_every_known_mistake_has_a_test():
    registered = {(ex.name, m.id) for ex in drills.EXERCISES.values() for m in ex.mistakes}
    assert registered == set(MISTAKES)


@pytest.mark.parametrize("name,mistake", sorted(MISTAKES))
def test_known_mistake_is_diagnosed(name, mistake, tmp_path):
    path = tmp_path / f"{name}.py"
    path.write_text(apply_patches(solution_source(name), MISTAKES[(name, mistake)]))
    rc, out = check_inprocess(path, cases=16)
    assert rc == 1, out
    assert "FAIL" in out and "Traceback" not in out, out
    assert first_diagnosis(out) == mistake, out
    m = drills.EXERCISES[name].mistake(mistake)
    assert flat(m.title) in flat(out) and flat(m.fix) in flat(out)


def test_diagnosis_names_the_first_failing_shape_and_worst_element(tmp_path):
    path = tmp_path / "attn.py"
    path.write_text(apply_patches(solution_source("scaled_dot_product_attention"),
                                  MISTAKES[("scaled_dot_product_attention", "attn_backward_no_rowsum")]))
    rc, out = check(path, cases=10)
    assert rc == 1
    assert "dq" in out and re.search(r"dq +attention_backward +0/10 +FAIL", out), out
    assert re.search(r"first failure: case 1: q \(1, 1, 1, 1\)", out), out
    assert re.search(r"worst element dq\[\d+, \d+, \d+, \d+\]: got [-\d.e]+, expected [-\d.e]+ \(abs err", out), out
    assert re.search(r"out +attention_forward +10/10 +PASS", out), out


def test_generic_hint_for_an_unknown_mistake(tmp_path):
    """A wrong factor no known mistake explains is still described (here: dq off by a factor of 2)."""
    src = solution_source("scaled_dot_product_attention").replace("dq = scale * (dA @ k)", "dq = 2 * scale * (dA @ k)")
    path = tmp_path / "attn.py"
    path.write_text(src)
    rc, out = check(path, cases=6)
    assert rc == 1
    assert "dq: off by a constant factor 2" in out, out


def test_transposed_gradient_hint(tmp_path):
    src = solution_source("linear").replace("dW = dy2.T @ x2", "dW = (dy2.T @ x2).T")
    path = tmp_path / "linear.py"
    path.write_text(src)
    rc, out = check(path, cases=8)
    assert rc == 1 and first_diagnosis(out) == "linear_dW_transposed", out
