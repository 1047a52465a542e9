"""``--json`` on evaluate, predict, gradcheck, check and drill check: exactly one JSON document on stdout
(the human report on stderr), the exit status unchanged, an error one ``error:`` line and no document."""

import json
import os
import re

import pytest
from _paths import REPO_ROOT

from numpy_transformer import drills
from numpy_transformer import functional as F
from numpy_transformer.cli import main

EXAMPLE = os.path.join(str(REPO_ROOT), "docs", "examples", "check_layer_norm.py")
TINY = ["--task", "reverse", "--seq-len", "6", "--d-model", "16", "--nhead", "2", "--layers", "1",
        "--dim-feedforward", "16", "--num-train", "64", "--num-val", "16", "--batch-size", "16", "--steps", "20",
        "--eval-every", "0", "--quiet"]


def _document(capsys, argv, status):
    """Run ``argv --json``; the one JSON document on stdout (json.loads of ALL of stdout) and stderr."""
    assert main(argv + ["--json"]) == status
    captured = capsys.readouterr()
    return json.loads(captured.out), captured.err


def _error_only(capsys, argv):
    """An error in --json mode: status 2, nothing on stdout, one ``error:`` line on stderr."""
    assert main(argv + ["--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    return lines[0]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("json") / "r.npz")
    assert main(["train", *TINY, "--save", path, "--no-log"]) == 0
    return path


def test_evaluate_json_holds_the_reports_figures(checkpoint, capsys):
    assert main(["evaluate", checkpoint]) == 0
    human = " ".join(capsys.readouterr().out.split())          # the report wraps at 100 columns
    doc, err = _document(capsys, ["evaluate", checkpoint], 0)
    assert " ".join(err.split()) == human                     # the same report, on stderr
    assert doc["command"] == "evaluate" and doc["task"] == "reverse" and doc["split"] == "val"
    assert doc["step"] == 20 and doc["examples"] == 16 and doc["bleu"] is None
    assert f"loss {doc['loss']:.4f}" in human
    assert f"token acc {100 * doc['token_accuracy']:.2f}%" in human
    assert f"sequence acc {100 * doc['sequence_accuracy']:.2f}%" in human
    assert "--num must be positive, got 0" in _error_only(capsys, ["evaluate", checkpoint, "--num", "0"])


def test_predict_json_one_object_per_example(checkpoint, capsys):
    assert main(["predict", checkpoint, "--random", "3"]) == 0
    human = capsys.readouterr().out
    doc, err = _document(capsys, ["predict", checkpoint, "--random", "3"], 0)
    assert err == human
    assert doc["command"] == "predict" and len(doc["examples"]) == 3
    for n, example in enumerate(doc["examples"], 1):
        assert len(example["source"]) == len(example["predicted"]) == len(example["expected"]) == 6
        assert example["expected"] == example["source"][::-1]               # the reverse task
        block = human.split(f"example {n}:")[1]
        assert [int(t) for t in re.search(r"predicted +([\d ]+)", block).group(1).split()] == example["predicted"]
        assert example["correct"] == block.lstrip().startswith("correct")
    assert "trained on length 6" in _error_only(capsys, ["predict", checkpoint, "--tokens", "3 4"])


def test_gradcheck_json_pass_and_fail(capsys, monkeypatch):
    doc, err = _document(capsys, ["gradcheck", "--only", "layer_norm"], 0)
    assert doc["command"] == "gradcheck" and doc["passed"] is True and doc["failed"] == []
    assert doc["gradients"] == len(doc["rows"]) and f"{doc['gradients']} gradients in {doc['cases']} cases" in err
    assert "ALL PASS" in err
    for row in doc["rows"]:
        assert row["passed"] and row["fd_pass"] and row["fd_err"] <= row["fd_tol"]
    real = F.softmax_backward
    monkeypatch.setattr(F, "softmax_backward", lambda dout, cache: 2 * real(dout, cache))
    doc, err = _document(capsys, ["gradcheck", "--only", "softmax (axis=-1)"], 1)
    assert doc["passed"] is False and doc["failed"] == ["softmax (axis=-1) / x"]
    assert "FAILED: 1 gradient(s): softmax (axis=-1) / x" in err
    row = doc["rows"][0]
    assert row["fd_pass"] is False and row["torch_pass"] is False and row["fd_err"] > row["fd_tol"]
    assert f"{row['fd_err']:.2e}" in err and row["notes"]
    assert "no case matches --only nothing-here" in _error_only(capsys, ["gradcheck", "--only", "nothing-here"])


def test_check_json_pass_and_fail(tmp_path, capsys):
    pytest.importorskip("torch")
    doc, err = _document(capsys, ["check", EXAMPLE], 0)
    assert doc["command"] == "check" and doc["passed"] is True and doc["form"] == "functions"
    assert err.rstrip().endswith("PASSED") and doc["dtype"] == "float64" and doc["rtol"] == 1e-10
    assert {c["name"] for c in doc["checks"]} >= {"x", "gamma", "beta"} and all(c["passed"] for c in doc["checks"])
    broken = tmp_path / "broken.py"
    broken.write_text(open(EXAMPLE).read().replace("dout.sum(axis=lead)", "2 * dout.sum(axis=lead)"))
    doc, err = _document(capsys, ["check", str(broken)], 1)
    assert doc["passed"] is False and "FAILED: gradient of input 'beta'" in err
    beta = next(c for c in doc["checks"] if c["name"] == "beta")
    assert beta["passed"] is False and beta["kind"] == "input" and beta["rel_err"] > doc["rtol"]
    assert all(c["passed"] for c in doc["checks"] if c["name"] != "beta")
    assert "does not exist" in _error_only(capsys, ["check", str(tmp_path / "nope.py")])


def test_drill_check_json_pass_and_fail(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("NT_DRILL_DATA", str(tmp_path / "data"))
    good = tmp_path / "softmax.py"
    good.write_text(open(drills.solution_path("softmax")).read())
    doc, err = _document(capsys, ["drill", "check", str(good), "--cases", "6", "-q"], 0)
    assert doc["command"] == "drill check" and doc["exercise"] == "softmax" and doc["passed"] is True
    assert doc["checks_passed"] == doc["checks"] == 12 and doc["cases_fully_correct"] == doc["cases"] == 6
    assert "score: 12/12 checks passed (100%), 6/6 cases fully correct" in err
    bad = tmp_path / "softmax_bad.py"
    bad.write_text(open(drills.solution_path("softmax")).read().replace(
        "y * (dy - np.sum(dy * y, axis=-1, keepdims=True))", "y * dy"))
    doc, err = _document(capsys, ["drill", "check", str(bad), "--cases", "6", "-q"], 1)
    assert doc["passed"] is False and doc["refused"] is False and doc["mistakes"] == ["softmax_backward_no_rowsum"]
    assert f"score: {doc['checks_passed']}/{doc['checks']} checks passed" in err
    dx = next(a for a in doc["arrays"] if a["name"] == "dx")
    assert dx["passed"] == 0 and dx["first_failure"] == 1
    assert not any(isinstance(v, list) and v and isinstance(v[0], list) for a in doc["arrays"] for v in a.values())
    refused = tmp_path / "softmax_refused.py"
    refused.write_text("import numpy_transformer\n" + open(drills.solution_path("softmax")).read())
    doc, _ = _document(capsys, ["drill", "check", str(refused), "--cases", "6", "-q"], 1)
    assert doc["passed"] is False and doc["refused"] is True
    line = _error_only(capsys, ["drill", "check", str(good), "--exercise", "no-such-drill"])
    assert "unknown exercise 'no-such-drill'" in line


def test_every_json_option_documents_its_schema():
    from numpy_transformer.cli import build_parser
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices
    drill_sub = next(a for a in sub["drill"]._actions if a.dest == "drill_command").choices
    for p in (sub["evaluate"], sub["predict"], sub["gradcheck"], sub["check"], drill_sub["check"]):
        action = next(a for a in p._actions if a.dest == "json")
        assert '"command"' in action.help and "stderr" in action.help
