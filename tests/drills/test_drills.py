"""The interview drills (``python -m numpy_transformer drill ...``).

* every exercise's reference solution, and an implementation built on the library itself, PASS;
* every known mistake, written into a copy of the reference solution the way a person would make it,
  FAILS with that mistake as the first diagnosis;
* broken files (syntax error, missing function, wrong arity, exceptions, infinite loops, exits) are
  reported, never crash the grader, and give a non-zero exit status;
* list / start / solution, the interview clock, determinism, and that nothing imports torch.

Grading runs in a subprocess (as for a user); the tests use few cases and ``--no-torch`` to stay fast,
and one test per exercise checks our reference against the torch oracle directly.
"""

from __future__ import annotations

import ast
import io
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest
from _paths import REPO_ROOT
from hypothesis import given
from hypothesis import strategies as st

import numpy_transformer.drills as drills
from numpy_transformer import cli
from numpy_transformer.cli import drill as cli_drill
from numpy_transformer.drills import exercises
from numpy_transformer.drills.engine import diagnose
from numpy_transformer.drills.engine.judge import grade_case

ROOT = str(REPO_ROOT)
NAMES = list(drills.EXERCISES)


#: `drill check` records every attempt in the stats file: the tests keep it out of the user's data directory
DATA_DIR = tempfile.mkdtemp(prefix="nt-drill-test-")


def check(path, *extra, cases=12):
    """Run ``drill check`` as a user would (a subprocess); return (exit status, output)."""
    cmd = [sys.executable, "-m", "numpy_transformer.cli.drill", "check", str(path), "-q",
           "--cases", str(cases), *extra]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               NT_DRILL_DATA=DATA_DIR)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    return proc.returncode, proc.stdout + proc.stderr


def check_inprocess(path, **kw):
    """``drills.check_file`` called directly: the grading still runs in a subprocess, only the CLI process
    is saved (most tests; ``check`` covers the command line itself). Returns (status, output)."""
    buf = io.StringIO()
    kw.setdefault("cases", 8)
    kw.setdefault("torch", "off")
    kw.setdefault("quiet", True)
    rc = drills.check_file(str(path), stream=buf, **kw)
    return rc, buf.getvalue()


def solution_source(name):
    with open(drills.solution_path(name), encoding="utf-8") as fh:
        return fh.read()


def first_diagnosis(output):
    m = re.search(r"known mistake \[(\w+)\]: ", output)
    return m.group(1) if m else None


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

# (exercise, mistake id): [(text in the reference solution, what a person making the mistake writes), ...]:
# each mistake's own patch of its folder's solution.py (mistakes.py), applied as a user's file here
MISTAKES = {(ex.name, m.id): list(m.patches) for ex in drills.EXERCISES.values() for m in ex.mistakes}


def test_every_known_mistake_has_a_test():
    registered = {(ex.name, m.id) for ex in drills.EXERCISES.values() for m in ex.mistakes}
    assert registered == set(MISTAKES)


def apply_patches(source, patches):
    for old, new in patches:
        assert old in source, f"patch target not in the reference solution: {old!r}"
        source = source.replace(old, new)
    return source


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


# --------------------------------------------------------------------------------------------------
# broken files: reported, never a crash, non-zero exit
# --------------------------------------------------------------------------------------------------

SOFTMAX_OK_FORWARD = """
import numpy as np
def softmax_forward(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    y = e / e.sum(axis=-1, keepdims=True)
    return y, y
"""


def write(tmp_path, text, name="softmax.py"):
    path = tmp_path / name
    path.write_text(text)
    return path


def flat(text):
    """The report with its line wraps undone (it wraps at 100 columns, between words)."""
    return " ".join(text.split())


def assert_reported(rc, out, status, *needles):
    assert rc == status, out
    assert "Traceback" not in out, out
    for n in needles:
        assert flat(n) in flat(out), (n, out)


def test_syntax_error(tmp_path):
    rc, out = check(write(tmp_path, "# drill: softmax\ndef softmax_forward(x)\n    return x, x\n"))
    assert_reported(rc, out, 2, "syntax error, line 2")


def test_no_function_of_the_exercise(tmp_path):
    rc, out = check(write(tmp_path, "# drill: softmax\ndef softmax_fwd(x):\n    return x, x\n"))
    assert_reported(rc, out, 2, "defines none of the 'softmax' functions", "did you mean 'softmax_forward'")


def test_missing_backward_grades_the_forward(tmp_path):
    rc, out = check(write(tmp_path, SOFTMAX_OK_FORWARD))
    assert_reported(rc, out, 1, "softmax_backward is not defined in your file", "not defined in your file")
    assert re.search(r"y +softmax_forward +12/12 +PASS", out), out


def test_forward_without_cache(tmp_path):
    src = SOFTMAX_OK_FORWARD.replace("return y, y", "return y") + "def softmax_backward(dy, c):\n    return dy\n"
    rc, out = check(write(tmp_path, src))
    assert_reported(rc, out, 1, "softmax_forward must return (y, cache); it returned an ndarray of shape")


def test_wrong_backward_arity(tmp_path):
    src = solution_source("layer_norm").replace("return dx, dgamma, dbeta", "return dx, dgamma")
    rc, out = check(write(tmp_path, src, "layer_norm.py"))
    assert_reported(rc, out, 1,
                    "layer_norm_backward must return 3 values (dx, dgamma, dbeta); it returned a tuple of 2")
    assert re.search(r"y +layer_norm_forward +12/12 +PASS", out), out


def test_missing_return(tmp_path):
    src = SOFTMAX_OK_FORWARD + "def softmax_backward(dy, cache):\n    dx = dy * cache\n"
    rc, out = check(write(tmp_path, src))
    assert_reported(rc, out, 1, "returned None")


def test_exception_points_at_the_users_line(tmp_path):
    src = SOFTMAX_OK_FORWARD + "def softmax_backward(dy, cache):\n    return dy @ cache @ cache\n"
    rc, out = check(write(tmp_path, src))
    assert_reported(rc, out, 1, "softmax_backward raised ValueError", "your line 8: `return dy @ cache @ cache`")


def test_not_implemented_skeleton(tmp_path):
    path = drills.start("softmax", str(tmp_path))
    rc, out = check(path)
    assert_reported(rc, out, 1, "softmax_forward is not implemented yet", "score: 0/24 checks passed")


def test_infinite_loop_in_a_function(tmp_path):
    src = SOFTMAX_OK_FORWARD + "def softmax_backward(dy, cache):\n    while True:\n        pass\n"
    t0 = time.time()
    rc, out = check(write(tmp_path, src), "--call-timeout", "0.5", cases=4)
    assert_reported(rc, out, 1, "softmax_backward did not return within 0.5 s", "timed out on an earlier case")
    assert time.time() - t0 < 30


def test_whole_run_time_limit(tmp_path):
    src = SOFTMAX_OK_FORWARD + "def softmax_backward(dy, cache):\n    while True:\n        pass\n"
    rc, out = check(write(tmp_path, src), "--call-timeout", "0", "--timeout", "3", cases=4)
    assert_reported(rc, out, 1, "grading stopped during case 1: it ran past the time limit of 3 s")


def test_module_level_infinite_loop(tmp_path):
    rc, out = check(write(tmp_path, SOFTMAX_OK_FORWARD + "while True:\n    pass\n"), "--call-timeout", "1")
    assert_reported(rc, out, 2, "importing the file did not finish within 1 s")


def test_sys_exit_at_import(tmp_path):
    rc, out = check(write(tmp_path, "import sys\n" + SOFTMAX_OK_FORWARD + "sys.exit(3)\n"))
    assert_reported(rc, out, 2, "importing the file raised SystemExit: 3")


def test_exception_at_import(tmp_path):
    rc, out = check(write(tmp_path, SOFTMAX_OK_FORWARD + "x = undefined_name + 1\n"))
    assert_reported(rc, out, 2, "importing the file raised NameError", "your line 7")


def test_hard_exit_inside_a_function(tmp_path):
    src = "import os\n" + SOFTMAX_OK_FORWARD + "def softmax_backward(dy, cache):\n    os._exit(7)\n"
    rc, out = check(write(tmp_path, src))
    assert_reported(rc, out, 1, "exited unexpectedly during case 1 (exit status 7)")


def test_sys_exit_inside_a_function_is_an_ordinary_failure(tmp_path):
    src = "import sys\n" + SOFTMAX_OK_FORWARD + "def softmax_backward(dy, cache):\n    sys.exit('bye')\n"
    rc, out = check(write(tmp_path, src))
    assert_reported(rc, out, 1, "softmax_backward raised SystemExit: bye")


def test_wrong_types_and_shapes(tmp_path):
    src = SOFTMAX_OK_FORWARD + "def softmax_backward(dy, cache):\n    return 'dx'\n"
    rc, out = check(write(tmp_path, src))
    assert_reported(rc, out, 1, "is not numeric")
    src = SOFTMAX_OK_FORWARD + "def softmax_backward(dy, cache):\n    return np.stack([dy, dy])\n"
    rc, out = check(write(tmp_path, src))
    assert_reported(rc, out, 1, "wrong shape: shape")


def test_in_place_modification_of_an_input_fails(tmp_path):
    """`x -= x.max(...)` changes the caller's array: a FAIL naming the argument, though every value is right."""
    src = ("import numpy as np\ndef softmax_forward(x):\n    x -= x.max(axis=-1, keepdims=True)\n"
           "    e = np.exp(x)\n    y = e / e.sum(axis=-1, keepdims=True)\n    return y, y\n"
           "def softmax_backward(dy, y):\n    return y * (dy - (dy * y).sum(axis=-1, keepdims=True))\n")
    rc, out = check(write(tmp_path, src))
    assert_reported(rc, out, 1, "FAIL: softmax_forward modified its input `x` in place",
                    "12 case(s) modified an input in place", "-> FAIL")
    # changing its own cache in the backward is the function's business: a note, not a failure
    src = ("import numpy as np\ndef softmax_forward(x):\n    e = np.exp(x - x.max(axis=-1, keepdims=True))\n"
           "    y = e / e.sum(axis=-1, keepdims=True)\n    return y, y.copy()\n"
           "def softmax_backward(dy, y):\n    y *= dy - (dy * y).sum(axis=-1, keepdims=True)\n    return y\n")
    rc, out = check(write(tmp_path, src))
    assert_reported(rc, out, 0, "note: softmax_backward modified its argument `y` (its own cache) in place")


def test_unreadable_files(tmp_path):
    rc, out = check(tmp_path / "nope.py")
    assert_reported(rc, out, 2, "no such file")
    rc, out = check(tmp_path)
    assert_reported(rc, out, 2, "is a directory")
    bad = tmp_path / "bin.py"
    bad.write_bytes(b"\xff\xfe\x00garbage")
    rc, out = check(bad)
    assert_reported(rc, out, 2, "not UTF-8")
    empty = tmp_path / "empty.py"
    empty.write_text("")
    rc, out = check(empty)
    assert_reported(rc, out, 2, "cannot tell which exercise")


def test_printing_code_is_graded(tmp_path):
    src = SOFTMAX_OK_FORWARD.replace("return y, y", "print('debug', y.shape)\n    return y, y") + \
        "def softmax_backward(dy, y):\n    print('bwd')\n    return y * (dy - (dy * y).sum(axis=-1, keepdims=True))\n"
    rc, out = check(write(tmp_path, src), "--show-output")
    assert_reported(rc, out, 0, "debug (1, 1)")


# --------------------------------------------------------------------------------------------------
# list, start, solution, clock, CLI
# --------------------------------------------------------------------------------------------------

REQUIRED = ["softmax", "layer_norm", "gelu", "linear", "cross_entropy", "scaled_dot_product_attention",
            "multi_head_attention", "positional_encoding", "encoder_layer", "embedding"]


def test_list(capsys):
    assert cli_drill.main(["list"]) == 0
    out = capsys.readouterr().out
    for name in REQUIRED:
        line = next(row for row in out.splitlines() if row.strip().startswith(name + " "))
        assert re.search(r"\b(easy|medium|hard)\b", line) and "min" in line, line


def test_registered_in_the_cli():
    assert "drill" in cli.COMMAND_MODULES
    import argparse
    parser = argparse.ArgumentParser()
    cli_drill.register(parser.add_subparsers())
    args = parser.parse_args(["drill", "check", "f.py", "--cases", "3"])
    assert args.func is cli_drill.cmd_check and args.cases == 3


def test_cli_through_the_package_entry_point():
    proc = subprocess.run([sys.executable, "-m", "numpy_transformer", "drill", "list"], capture_output=True,
                          text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 0, proc.stderr
    assert "scaled_dot_product_attention" in proc.stdout


@pytest.mark.parametrize("name", NAMES)
def test_skeleton_matches_the_solution_and_gives_nothing_away(name):
    with open(drills.skeleton_path(name), encoding="utf-8") as fh:
        skel = ast.parse(fh.read())
    sol = ast.parse(solution_source(name))

    def public(tree):
        return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")}

    s_fns, r_fns = public(skel), public(sol)
    ex = drills.EXERCISES[name]
    assert list(s_fns) == list(ex.functions) and set(r_fns) == set(ex.functions)
    for fname, fn in s_fns.items():
        assert ast.dump(fn.args) == ast.dump(r_fns[fname].args), fname          # exact signature
        doc = ast.get_docstring(fn)
        assert doc and "Returns" in doc and "shape" in doc, fname
        body = fn.body[1:]                                                       # after the docstring
        assert len(body) == 1 and isinstance(body[0], ast.Raise), f"{fname} must have an empty body"
    module_doc = ast.get_docstring(skel)
    assert "Hints:" in module_doc and "Conventions" in module_doc


def test_start_writes_a_skeleton_and_refuses_to_overwrite(tmp_path, capsys):
    assert cli_drill.main(["start", "attention", "--dir", str(tmp_path)]) == 0
    path = tmp_path / "scaled_dot_product_attention.py"
    text = path.read_text()
    assert text.startswith("# drill: scaled_dot_product_attention")
    assert re.search(r"^# started: .*\(unix \d+\)$", text, re.M)
    assert "drill check" in capsys.readouterr().out
    path.write_text(text + "\n# my work\n")
    assert cli_drill.main(["start", "scaled_dot_product_attention", "--dir", str(tmp_path)]) == 2
    assert "--force" in capsys.readouterr().out
    assert path.read_text().endswith("# my work\n")
    assert cli_drill.main(["start", "scaled_dot_product_attention", "--dir", str(tmp_path), "--force"]) == 0
    assert "# my work" not in path.read_text()


def test_unknown_names(capsys):
    assert cli_drill.main(["start", "layernrom"]) == 2
    assert "did you mean 'layer_norm'" in capsys.readouterr().out
    assert cli_drill.main(["solution", "nope"]) == 2
    assert cli_drill.main(["check", "x.py", "--exercise", "nope"]) == 2


@pytest.mark.parametrize("name", NAMES)
def test_solution_prints_the_reference_and_its_derivation(name, capsys):
    assert cli_drill.main(["solution", name]) == 0
    out = capsys.readouterr().out
    assert solution_source(name).strip() in out
    ex = drills.get(name)
    assert f"# Derivation ({name}/derivation.md):" in out
    with open(ex.derivation_path, encoding="utf-8") as fh:
        derivation = fh.read()
    assert all(("# " + line).rstrip() in out for line in derivation.splitlines())   # the exercise's own
    assert "numpy_transformer." in out


def test_interview_clock(tmp_path):
    path = drills.start("softmax", str(tmp_path), now=time.time() - 3725)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(solution_source("softmax").split('"""', 2)[2])
    rc, out = check_inprocess(path)
    assert rc == 0, out
    assert re.search(r"interview clock: 1h 02m 0[5-9]s since `drill start` \(target 10 min\)  \(over the target\)",
                     out), out
    assert re.search(r"time 1h 02m", out), out


def test_format_duration():
    assert drills.format_duration(0) == "0m 00s"
    assert drills.format_duration(61) == "1m 01s"
    assert drills.format_duration(3725) == "1h 02m 05s"


def test_exercise_from_function_names_and_explicit_flag(tmp_path):
    path = write(tmp_path, solution_source("gelu"), "anything.py")        # no header: found by its functions
    rc, out = check_inprocess(path)
    assert rc == 0 and "drill check: gelu" in out, out
    rc, out = check_inprocess(path, exercise="softmax")
    assert rc == 2 and "defines none of the 'softmax' functions" in flat(out), out


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
