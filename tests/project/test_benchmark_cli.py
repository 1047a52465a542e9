"""benchmarks/bench_layer.py's command line and harness: results go to a path given or to an untracked
default (never a tracked file), no benchmark sets an environment variable for the timed processes, and
its --help, benchmarks/README.md and the README quote the same durations. (The benchmark itself is
never run by the tests: it takes minutes; the harness's summary is checked on a tiny fake case.)"""

import glob
import os
import re
import subprocess
import sys

import pytest
from _paths import REPO_ROOT

ROOT = str(REPO_ROOT)


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import bench_layer
    finally:
        sys.path.pop(0)
    return bench_layer


def test_results_go_to_the_path_given_or_an_untracked_default(bench):
    parser = bench.build_parser()
    default = parser.parse_args([]).json
    assert default == parser.parse_args(["--quick"]).json == bench.DEFAULT_OUT
    assert parser.parse_args(["--out", "x.json"]).json == "x.json"
    assert parser.parse_args(["--json", "x.json"]).json == "x.json"           # the old spelling still works
    with pytest.raises(SystemExit):
        parser.parse_args(["--update"])                                       # no tracked file is rewritten
    rel = os.path.relpath(default, ROOT)
    try:
        ignored = subprocess.run(["git", "check-ignore", "-q", rel], cwd=ROOT).returncode
        tracked = subprocess.run(["git", "ls-files", "--error-unmatch", rel], cwd=ROOT, capture_output=True).returncode
    except FileNotFoundError:                                                 # no git binary
        ignored = tracked = 128
    if ignored == 128:            # not a git checkout: the .gitignore line that keeps it out is still checked
        lines = open(os.path.join(ROOT, ".gitignore"), encoding="utf-8").read().split()
        assert any(rel.replace(os.sep, "/").startswith(line.rstrip("/"))
                   for line in lines if line.startswith("benchmarks/")), rel
    else:
        assert ignored == 0 and tracked != 0, rel


def test_no_benchmark_sets_an_environment_variable_for_its_timing():
    for path in glob.glob(os.path.join(ROOT, "benchmarks", "*.py")):
        text = open(path, encoding="utf-8").read()
        assert "OPENBLAS_THREAD_TIMEOUT" not in text, path
        assert "os.environ.setdefault" not in text and "os.environ[" not in text, path


def test_harness_summary_medians_ratios_and_spread(bench, monkeypatch):
    harness = bench.harness
    replies = iter([{"seconds": {"s": [0.010, 0.012, 0.011]}},       # round 1: a, then b
                    {"seconds": {"s": [0.005, 0.005, 0.006]}},
                    {"seconds": {"s": [0.004, 0.004, 0.004]}},       # round 2: b first, then a
                    {"seconds": {"s": [0.012, 0.012, 0.013]}}])
    order = []
    monkeypatch.setattr(harness, "_run_child", lambda script, req, env=None: order.append(req["side"]) or next(replies))
    res = harness.compare("x.py", "c", {}, sides=("a", "b"), rounds=2, repeats=3)
    assert order == ["a", "b", "b", "a"]                                      # alternating
    assert res["sides"]["a"]["s"]["rounds_ms"] == pytest.approx([11.0, 12.0])
    assert res["sides"]["a"]["s"]["median_ms"] == pytest.approx(12.0)       # median of all six steps
    assert res["ratio"]["s"] == pytest.approx({"median": 2.6, "low": 2.2, "high": 3.0})


def _durations(text):
    # "(about 25 min", "(on 2 quiet cores: about 25 minutes", "--quick` about 3\nminutes"
    full = re.search(r"bench_layer\.py`? +(?:#[^\n]*?)?\(?(?:on [^:)\n]*: )?about (\w+)\s+min", text)
    quick = re.search(r"--quick`?[^.]{0,60}?about (a|\w+)\s+min", text)
    return full and full.group(1), quick and quick.group(1)


def test_help_and_docs_agree_on_how_long_it_takes(bench, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    with pytest.raises(SystemExit):
        bench.build_parser().parse_args(["--help"])
    help_text = capsys.readouterr().out
    assert "``" not in help_text and max(map(len, help_text.splitlines())) <= 100
    docs = {name: open(os.path.join(ROOT, *name.split("/")), encoding="utf-8").read()
            for name in ("benchmarks/README.md", "README.md")}
    expect = _durations(help_text)
    assert expect == ("25", "3"), expect
    for name, text in docs.items():
        assert _durations(text) == expect, name


def test_profile_by_op_shares_add_up():
    """``profile_layer.py --by-op`` times each functional op inside real steps (each op's own time);
    with the modules' own work the shares make the whole step."""
    out = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "profile_layer.py"), "--batch", "1",
                          "--seq", "4", "--steps", "1", "--by-op"], capture_output=True, text=True, check=True,
                         cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT)).stdout
    shares = [float(m) for m in re.findall(r"^ *([0-9.]+)% ", out, re.M)]
    names = re.findall(r"^ *[0-9.]+% +[0-9.]+  (\w+)", out, re.M)
    assert {"linear_forward", "linear_backward", "scaled_dot_product_attention_backward",
            "layer_norm_forward"} <= set(names), out
    assert abs(sum(shares) - 100) < 1.0, out
