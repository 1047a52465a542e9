"""The drill command line: list, start, solution, the interview clock, and how a file names its exercise.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import time

import pytest

import numpy_transformer.drills as drills
from numpy_transformer import cli
from numpy_transformer.cli import drill as cli_drill
from tests.drills.drill_helpers import (
    NAMES,
    ROOT,
    check_inprocess,
    flat,
    solution_source,
    write,
)

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
