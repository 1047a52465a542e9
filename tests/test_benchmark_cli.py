"""benchmarks/bench_layer.py's command line: the tracked results.json is rewritten only on request, and
its --help, benchmarks/README.md and the README quote the same durations. (The benchmark itself is
never run by the tests: it takes minutes.)"""

import os
import re
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import bench_layer
    finally:
        sys.path.pop(0)
    return bench_layer


def test_results_json_is_written_only_when_asked(bench):
    parser = bench.build_parser()
    assert parser.parse_args([]).json is None                                  # a plain run writes nothing
    assert parser.parse_args(["--quick"]).json is None
    assert parser.parse_args(["--out", "x.json"]).json == "x.json"
    assert parser.parse_args(["--json", "x.json"]).json == "x.json"           # the old spelling still works
    assert parser.parse_args(["--update"]).json == os.path.join(ROOT, "benchmarks", "results.json")
    with pytest.raises(SystemExit):
        parser.parse_args(["--update", "--out", "x.json"])


def _durations(text):
    full = re.search(r"bench_layer\.py`? +(?:#[^\n]*?)?\(?about (\w+) min", text)
    quick = re.search(r"--quick`?[^.]{0,60}?about (a|\w+) min", text)
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
    assert expect == ("6", "a"), expect
    for name, text in docs.items():
        assert _durations(text) == expect, name
