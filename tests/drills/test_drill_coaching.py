"""The drills' coaching: each test feeds the grader a file making one mistake and checks what it says.

* an in-place change of an input FAILS (tests/drills/test_drill_broken_files.py); a diagnosis is named only
  when it explains most of the failure (the two reported misdiagnoses reproduced), else one quiet line;
* what the failing cases share ("fails only when approximate='tanh'", "with a mask", "with pre-LN",
  "with repeated ids");
* the gradient check of the candidate's own forward, the smallest failing case and ``--dump``;
* ``drill mock``, ``drill stats`` (plain JSON under the data directory), ``start --no-hints``, topics.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np

import numpy_transformer.drills as drills
from numpy_transformer.drills.engine import diagnosis, mock, stats
from tests.drills.drill_helpers import (
    DATA_DIR,
    MISTAKES,
    ROOT,
    apply_patches,
    check,
    check_inprocess,
    first_diagnosis,
    flat,
    solution_source,
)


def patched(tmp_path, name, patches, filename=None):
    path = tmp_path / (filename or f"{name}.py")
    path.write_text(apply_patches(solution_source(name), patches))
    return path


def diagnosis_bullets(out):
    block = out.split("diagnosis:", 1)[1].split("\n\n", 1)[0]
    return [line for line in block.splitlines() if line.startswith("  * ")]


# --------------------------------------------------------------------------------------------------
# a mistake is named only when it explains most of the failure
# --------------------------------------------------------------------------------------------------

def test_inverted_mask_in_mha_is_named_not_a_one_projection_dx(tmp_path):
    """Reported: an inverted mask in multi-head attention was diagnosed as "dx only from one projection"."""
    path = patched(tmp_path, "multi_head_attention", [("blocked = blocked | mask", "blocked = blocked | ~mask")])
    rc, out = check_inprocess(path, cases=16)
    assert rc == 1
    assert first_diagnosis(out) == "attn_mask_inverted", out
    assert "mha_backward_qkv_not_summed" not in out, out
    assert "fails only with a mask" in flat(out), out


def test_inverted_mask_written_another_way_is_never_misnamed(tmp_path):
    """Inverting the causal part too is no known variant: the right name or none, never a wrong one."""
    path = patched(tmp_path, "multi_head_attention",
                   [("scores = np.where(blocked, -np.inf,", "scores = np.where(~blocked, -np.inf,")])
    rc, out = check_inprocess(path, cases=16)
    assert rc == 1
    named = first_diagnosis(out)
    if named and named.startswith("mutant_"):      # the mutation engine: np.where(~m, a, b) is np.where(m, b, a)
        assert "the where's arguments `-np.inf` and" in out and "exchanged" in out, out
    else:
        assert named in (None, "attn_mask_inverted"), out


def test_ln2_with_ln1_parameters_is_not_called_a_missing_scale(tmp_path):
    """Reported: LN2 using LN1's parameters in the encoder layer was diagnosed as "no 1/sqrt(Dh) scaling"."""
    path = patched(tmp_path, "encoder_layer", [('_ln_forward(h, p["gamma2"], p["beta2"])',
                                                '_ln_forward(h, p["gamma1"], p["beta1"])'),
                                               ('_ln_forward(h + f, p["gamma2"], p["beta2"])',
                                                '_ln_forward(h + f, p["gamma1"], p["beta1"])')])
    rc, out = check_inprocess(path, cases=16)
    assert rc == 1
    assert first_diagnosis(out) is None and "enc_no_scale" not in out, out
    # the gradient check still points at the culprit: the LayerNorm parameters' gradients
    assert re.search(r"grads\[gamma2\] +d/dparams\.gamma2: +DOES NOT match your forward", out), out
    assert re.search(r"grads\[Wv\] +d/dparams\.Wv: +consistent with your forward", out), out


def _events(results_per_case, contradicted=()):
    """Fake case events: each case a dict {output: [variant ids]} (an empty list: wrong, unmatched)."""
    events = []
    for i, per in enumerate(results_per_case):
        res = {n: {"ok": v is None, "problem": None if v is None else "value", "variants": v or []}
               for n, v in per.items()}
        events.append({"index": i, "desc": f"case {i}", "results": res, "contradicted": list(contradicted),
                       "features": []})
    return events


def _fails(ex, events):
    fails = {}
    for name, _ in ex.outputs:
        bad = [(e, e["results"][name]) for e in events if name in e["results"] and not e["results"][name]["ok"]]
        if bad:
            fails[name] = bad
    return fails


def test_ranking_needs_most_of_the_failure():
    ex = drills.EXERCISES["multi_head_attention"]
    names = [n for n, _ in ex.outputs]
    # a stray match: one wrong array of 6 x 4 -> nothing is named
    cases = [{n: [] for n in names} for _ in range(4)]
    cases[0]["dx"] = ["mha_backward_qkv_not_summed"]
    ev = _events(cases)
    assert diagnosis.explanation(ex, _fails(ex, ev), ev) == (None, [])
    assert diagnosis.known_mistake_lines(ex, _fails(ex, ev), ev) == []
    # a mistake reproducing 20 of 24 wins over one reproducing 1
    for c in cases:
        for n in names[:5]:
            c[n] = c[n] + ["attn_mask_inverted"]
    ev = _events(cases)
    best, _ = diagnosis.explanation(ex, _fails(ex, ev), ev)
    assert best[0] == ("attn_mask_inverted",) and abs(best[2] - 20 / 24) < 1e-12
    # ... unless it would break an array the candidate got right (contradicted): then nothing
    ev = _events(cases, contradicted=["attn_mask_inverted"])
    assert diagnosis.explanation(ex, _fails(ex, ev), ev) == (None, [])


def test_unknown_mistake_gets_one_quiet_line(tmp_path):
    """No known mistake: one bullet, not one "no known mistake matches" per array."""
    path = patched(tmp_path, "encoder_layer", [("scale = 1.0 / np.sqrt(D // H)", "scale = 0.9 / np.sqrt(D // H)")])
    rc, out = check_inprocess(path, cases=12)
    assert rc == 1
    bullets = diagnosis_bullets(out)
    assert bullets[0].startswith("  * no known mistake explains this failure"), out
    assert len(bullets) <= 2, bullets
    assert "no known mistake matches" not in out


# --------------------------------------------------------------------------------------------------
# what the failing cases share
# --------------------------------------------------------------------------------------------------

def test_fails_only_when_approximate_tanh(tmp_path):
    path = patched(tmp_path, "gelu", [("* c * (1.0 + 3 * 0.044715 * x * x)", "* c * (1.0 + 3 * 0.04 * x * x)")])
    rc, out = check_inprocess(path, cases=16)
    assert rc == 1
    assert "fails only when approximate='tanh'" in flat(out), out


def test_fails_only_with_repeated_ids(tmp_path):
    path = patched(tmp_path, "embedding", MISTAKES[("embedding", "embedding_repeated_ids_dropped")])
    rc, out = check_inprocess(path, cases=16)
    assert rc == 1 and first_diagnosis(out) == "embedding_repeated_ids_dropped"
    assert "fails only with repeated ids" in flat(out), out


def test_fails_only_pre_ln(tmp_path):
    path = patched(tmp_path, "encoder_layer", [("dh = dout + dn2", "dh = dout + 0.5 * dn2")])
    rc, out = check_inprocess(path, cases=16)
    assert rc == 1
    assert "fails only with pre-LN" in flat(out), out


def test_shared_options_summary():
    def ev(i, ok, feats):
        return {"index": i, "results": {"y": {"ok": ok}}, "features": feats}
    evs = [ev(0, False, ["with a mask", "when H=2"]), ev(1, False, ["with a mask", "when H=1"]),
           ev(2, True, ["without a mask", "when H=2"])]
    assert diagnosis.shared_options(evs).startswith("fails only with a mask")
    evs = [ev(0, False, ["when H=2"]), ev(1, False, ["when H=3"]), ev(2, True, ["when H=1"]),
           ev(3, True, ["when H=1"])]
    assert diagnosis.shared_options(evs).startswith("passes only when H=1")
    assert diagnosis.shared_options(evs[:1]) is None          # one failing case shares everything


# --------------------------------------------------------------------------------------------------
# the gradient check of the candidate's own code; the smallest failing case
# --------------------------------------------------------------------------------------------------

def test_backward_that_disagrees_with_its_own_forward(tmp_path):
    path = patched(tmp_path, "softmax", [("return y * (dy - np.sum(dy * y, axis=-1, keepdims=True))",
                                          "return y * (dy - 0.5 * np.sum(dy * y, axis=-1, keepdims=True))")])
    rc, out = check_inprocess(path, cases=8)
    assert rc == 1
    assert re.search(r"dx +d/dx: +DOES NOT match your forward", out), out
    assert "your forward is right; your backward does not match it (dx): the bug is in the backward" in flat(out)


def test_wrong_forward_with_a_consistent_backward(tmp_path):
    path = patched(tmp_path, "linear", [("y = x @ W.T + b", "y = x @ W.T + 2 * b"),
                                        ("db = dy2.sum(axis=0)", "db = 2 * dy2.sum(axis=0)")])
    rc, out = check_inprocess(path, cases=8)
    assert rc == 1
    assert re.search(r"db +d/db: +consistent with your forward", out), out
    assert "your forward is wrong; your backward is consistent with it" in flat(out), out


def test_smallest_failing_case_is_shown_and_dumped(tmp_path):
    path = patched(tmp_path, "softmax", [("return y * (dy - np.sum(dy * y, axis=-1, keepdims=True))",
                                          "return y * (dy - 0.5 * np.sum(dy * y, axis=-1, keepdims=True))")])
    dump = tmp_path / "dump"
    rc, out = check(path, "--dump", str(dump), cases=8)
    assert rc == 1
    assert "smallest failing case: case 1: x (1, 1)" in out, out
    assert re.search(r"dx expected: shape \(1, 1\)\n +\[\[", out) and "dx received: shape (1, 1)" in out, out
    saved = dump / "softmax_case1.npz"
    assert f"saved to {saved}" in flat(out), out
    with np.load(saved) as z:
        assert {"input.x", "input.dy", "expected.dx", "got.dx", "expected.y", "got.y"} <= set(z.files)
        x, dy = z["input.x"], z["input.dy"]
        y = np.exp(x - x.max(-1, keepdims=True))
        y /= y.sum(-1, keepdims=True)
        np.testing.assert_allclose(z["expected.dx"], y * (dy - (dy * y).sum(-1, keepdims=True)), rtol=1e-12)
        np.testing.assert_allclose(z["got.dx"], y * (dy - 0.5 * (dy * y).sum(-1, keepdims=True)), rtol=1e-12)


def test_the_numpy_reference_is_the_default_oracle(tmp_path):
    path = tmp_path / "softmax.py"
    path.write_text(solution_source("softmax"))
    rc, out = check(path, cases=4)
    assert rc == 0 and "oracle: not used (the verified NumPy reference is the oracle; --torch" in out, out


# --------------------------------------------------------------------------------------------------
# mock interviews, stats, --no-hints, topics
# --------------------------------------------------------------------------------------------------

def drill_cli(*args, data=DATA_DIR, cwd=ROOT):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), NT_DRILL_DATA=str(data))
    proc = subprocess.run([sys.executable, "-m", "numpy_transformer.cli.drill", *args], capture_output=True,
                          text=True, env=env, timeout=600, cwd=cwd, stdin=subprocess.DEVNULL)
    return proc.returncode, proc.stdout + proc.stderr


def test_plan_draws_by_difficulty_within_the_time():
    for minutes in (10, 30, 45, 60, 90):
        for seed in range(5):
            chosen = mock.plan(minutes, seed)
            assert chosen and sum(e.minutes for e in chosen) <= minutes
            if minutes >= 45:
                assert len({e.difficulty for e in chosen}) >= 2, [e.name for e in chosen]
    assert [e.name for e in mock.plan(45, 3)] == [e.name for e in mock.plan(45, 3)]


def test_mock_interview_and_stats(tmp_path):
    data = tmp_path / "data"
    session = tmp_path / "mock"
    rc, out = drill_cli("mock", "--minutes", "30", "--dir", str(session), "--seed", "2", "--cases", "3", data=data)
    assert rc == 1, out                                # skeletons: nothing implemented yet
    info = json.loads((session / "mock.json").read_text())
    assert info["minutes"] == 30 and sum(drills.get(n).minutes for n in info["exercises"]) <= 30
    for f in info["files"]:
        text = (session / f).read_text()
        assert "Hints:" not in text and "Conventions" in text
    assert "(stdin closed: grading now)" in out and f"result: 0/{len(info['files'])} passed" in out, out
    # solve the first one and grade the session again
    first = info["exercises"][0]
    (session / info["files"][0]).write_text(solution_source(first))
    rc, out = drill_cli("mock", "--grade", str(session), "--cases", "3", data=data)
    assert re.search(rf"PASS +{first} ", out), out
    saved = json.loads((data / stats.FILENAME).read_text())["exercises"]
    assert saved[first]["attempts"] == 2 and saved[first]["passes"] == 1 and saved[first]["time_to_pass"] >= 0
    rc, out = drill_cli("stats", data=data)
    assert rc == 0 and first in out and "RECURRING MISTAKES" in out, out


def test_check_records_attempts_and_recurring_mistakes(tmp_path):
    data = tmp_path / "data"
    path = patched(tmp_path, "linear", MISTAKES[("linear", "linear_db_mean")])
    for _ in range(2):
        rc, out = drill_cli("check", str(path), "-q", "--cases", "4", data=data)
        assert rc == 1, out
    e = json.loads((data / stats.FILENAME).read_text())["exercises"]["linear"]
    assert e["attempts"] == 2 and e["passes"] == 0 and e["mistakes"] == {"linear_db_mean": 2}
    rc, out = drill_cli("stats", data=data)
    assert re.search(r"linear +2 +0 +- +- +linear_db_mean x2", out), out


def test_stats_live_in_the_user_data_directory(monkeypatch, tmp_path):
    monkeypatch.delenv("NT_DRILL_DATA", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert stats.data_dir() == str(tmp_path / "xdg" / "numpy-transformer")
    monkeypatch.delenv("XDG_DATA_HOME")
    home = os.path.expanduser("~")
    assert stats.data_dir() == os.path.join(home, ".local", "share", "numpy-transformer")
    assert not os.path.realpath(stats.data_dir()).startswith(os.path.realpath(ROOT) + os.sep)
    monkeypatch.setenv("NT_DRILL_DATA", str(tmp_path / "x"))
    assert stats.load() == {} and "no attempts yet" in stats.stats_text()


def test_start_without_hints(tmp_path):
    rc, out = drill_cli("start", "softmax", "--dir", str(tmp_path), "--no-hints")
    assert rc == 0, out
    text = (tmp_path / "softmax.py").read_text()
    assert "Hints:" not in text and "Conventions" in text and "def softmax_backward" in text
    with_hints = drills.skeleton_text("softmax")
    assert "Hints:" in with_hints and drills.strip_hints(with_hints).count('"""') == with_hints.count('"""')


def test_list_shows_difficulty_and_topic():
    text = drills.list_text()
    for ex in drills.EXERCISES.values():
        line = next(row for row in text.splitlines() if row.startswith(f"  {ex.name} "))
        assert ex.difficulty in line and drills.topic_of(ex) in line and drills.topic_of(ex) != "-", line
