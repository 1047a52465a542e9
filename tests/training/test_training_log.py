"""``train`` writes a JSON-lines log (loss, token accuracy, lr per step, each validation) that a resumed
run continues exactly; ``--trace-every N`` traces every Nth step and reports its health checks."""

import json
import os

import numpy as np
import pytest

from numpy_transformer import functional as F
from numpy_transformer.cli import main
from numpy_transformer.training.runlog import RunLog, default_log_path, read_log

TINY = ["train", "--task", "shift", "--vocab-size", "12", "--seq-len", "6", "--num-train", "200", "--num-val",
        "40", "--d-model", "16", "--nhead", "2", "--layers", "2", "--dim-feedforward", "32", "--batch-size", "8",
        "--warmup", "4", "--quiet"]


def _train_lines(path):
    return [(e["step"], e["loss"], e["accuracy"], e["lr"]) for e in read_log(path) if e["kind"] == "train"]


def test_log_written_next_to_the_checkpoint(tmp_path):
    ckpt = tmp_path / "run.npz"
    assert main(TINY + ["--steps", "6", "--eval-every", "3", "--save", str(ckpt)]) == 0
    log = tmp_path / "run.log.jsonl"
    assert default_log_path(str(ckpt)) == str(log)
    entries = read_log(log)
    kinds = [e["kind"] for e in entries]
    assert kinds[0] == "start" and kinds[-1] == "end"
    assert entries[0]["config"]["d_model"] == 16
    train = [e for e in entries if e["kind"] == "train"]
    assert [e["step"] for e in train] == [1, 2, 3, 4, 5, 6]
    for e in train:
        assert np.isfinite(e["loss"]) and 0 <= e["accuracy"] <= 1 and e["lr"] > 0 and e["tokens"] == 8 * 6
    val = [e for e in entries if e["kind"] == "val"]
    assert [(e["step"], e["final"]) for e in val] == [(3, False), (6, True)]
    assert all(0 <= e["token_accuracy"] <= 1 and e["examples"] == 40 for e in val)
    for line in log.read_text().splitlines():                # strict JSON: no NaN literals
        json.loads(line, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))


def test_log_every_averages_and_explicit_path(tmp_path):
    log = tmp_path / "sub" / "my.jsonl"
    assert main(TINY + ["--steps", "7", "--eval-every", "0", "--log", str(log), "--log-every", "3"]) == 0
    train = [e for e in read_log(log) if e["kind"] == "train"]
    assert [(e["step"], e["steps"]) for e in train] == [(3, 3), (6, 3), (7, 1)]


def test_no_log_without_save_or_with_no_log(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(TINY + ["--steps", "2"]) == 0
    assert main(TINY + ["--steps", "2", "--save", "a.npz", "--no-log"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.config.json", "a.npz"]    # the run's config, no log


def test_resume_appends_exactly(tmp_path):
    """Stopped at step 4 (and lines past the checkpoint written by a run that died) then resumed to 9:
    the log's training lines are those of the uninterrupted 9-step run."""
    full = tmp_path / "full.npz"
    assert main(TINY + ["--steps", "9", "--eval-every", "4", "--save", str(full)]) == 0
    part = tmp_path / "part.npz"
    assert main(TINY + ["--steps", "4", "--eval-every", "4", "--save", str(part)]) == 0
    log = tmp_path / "part.log.jsonl"
    with open(log, "a") as f:                                # a crashed run got further than its checkpoint
        f.write(json.dumps({"kind": "train", "step": 5, "loss": 9.9, "accuracy": 0, "lr": 1}) + "\n")
        f.write('{"kind": "train", "step": 6, "lo')          # cut short mid-line
    assert main(["train", "--resume", str(part), "--steps", "9", "--eval-every", "4", "--quiet"]) == 0
    assert _train_lines(log) == _train_lines(tmp_path / "full.log.jsonl")
    kinds = [e["kind"] for e in read_log(log)]
    assert kinds.count("start") == 1 and kinds.count("resume") == 1
    resume = next(e for e in read_log(log) if e["kind"] == "resume")
    assert resume["step"] == 4


def test_runlog_roundtrip_and_truncation(tmp_path):
    path = tmp_path / "x.jsonl"
    with RunLog(path) as log:
        for step in range(1, 6):
            log.write("train", step, loss=float(step), accuracy=np.float32(0.5), lr=1e-3, grad_norm=float("nan"))
    assert [e["step"] for e in read_log(path)] == [1, 2, 3, 4, 5]
    assert read_log(path)[0]["grad_norm"] is None and read_log(path)[0]["accuracy"] == 0.5
    with RunLog(path, resume_step=3) as log:
        log.write("resume", 3)
    assert [(e["kind"], e["step"]) for e in read_log(path)] == [("train", 1), ("train", 2), ("train", 3), ("resume", 3)]
    with RunLog(path) as log:                                # a new run replaces the old log
        log.write("start", 0)
    assert len(read_log(path)) == 1


def test_trace_every_reports_and_logs(tmp_path, capsys):
    ckpt = tmp_path / "t.npz"
    assert main(TINY[:-1] + ["--steps", "4", "--eval-every", "0", "--trace-every", "2", "--save", str(ckpt)]) == 0
    err = capsys.readouterr().err
    assert "trace of step 2: " in err and "trace of step 4: " in err and "no problems" in err
    traces = [e for e in read_log(tmp_path / "t.log.jsonl") if e["kind"] == "trace"]
    assert [e["step"] for e in traces] == [2, 4]
    names = [r["name"] for r in traces[0]["records"]]
    assert "embed * sqrt(d_model)" in names and "encoder.layers.1.self_attn.softmax" in names
    assert traces[0]["problems"] == [] and traces[0]["first_nonfinite"] is None


def test_trace_every_changes_nothing(tmp_path):
    assert main(TINY + ["--steps", "5", "--log", str(tmp_path / "a.jsonl")]) == 0
    assert main(TINY + ["--steps", "5", "--log", str(tmp_path / "b.jsonl"), "--trace-every", "1"]) == 0
    assert _train_lines(tmp_path / "a.jsonl") == _train_lines(tmp_path / "b.jsonl")


def test_trace_every_flags_a_problem(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(F, "relu_backward", lambda dout, cache: np.zeros_like(dout))    # dead ReLUs
    log = tmp_path / "z.jsonl"
    assert main(TINY[:-1] + ["--steps", "3", "--eval-every", "0", "--trace-every", "3", "--log", str(log),
                             "--trace-table"]) == 0
    err = capsys.readouterr().err
    assert "trace of step 3:\n(every array float32)\nname " in err      # the whole table, then the summary
    assert "!! gradient exactly zero" in err and "flagged" in err
    trace = next(e for e in read_log(log) if e["kind"] == "trace")
    assert "encoder.layers.1.activation (backward): gradient exactly zero" in trace["problems"]


@pytest.mark.parametrize("opt,msg", [(["--log-every", "0"], "--log-every"), (["--trace-every", "-1"], "--trace-every")])
def test_bad_log_options(capsys, opt, msg):
    assert main(TINY + ["--steps", "1"] + opt) == 2
    assert msg in capsys.readouterr().err


def test_plot_out_a_directory_writes_inside_it_and_prints_the_real_path(tmp_path, capsys):
    """``--out DIR`` writes DIR/training.png (matplotlib alone would write DIR.png); a name without an
    extension gets .png; the path printed is the file written."""
    pytest.importorskip("matplotlib")
    log = tmp_path / "run.jsonl"
    assert main(TINY + ["--steps", "3", "--log", str(log)]) == 0
    capsys.readouterr()
    out_dir = tmp_path / "figures"
    out_dir.mkdir()
    for out, written in ((out_dir, out_dir / "training.png"), (tmp_path / "plain", tmp_path / "plain.png"),
                         (str(tmp_path / "new") + os.sep, tmp_path / "new" / "training.png")):
        assert main(["plot", "training", str(log), "--out", str(out)]) == 0
        assert capsys.readouterr().out == f"wrote {written}\n"
        assert written.is_file() and written.stat().st_size > 0
    assert not (tmp_path / "figures.png").exists()
