"""What a new user sees first: every report fits 100 columns, --help is plain text, and a pipe that
closes early (``... | head``) ends the command quietly."""

import argparse
import io
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from _paths import REPO_ROOT

import numpy_transformer as nt
from numpy_transformer import drills
from numpy_transformer.cli import build_parser
from numpy_transformer.utils.text import WIDTH, fit, plain

ROOT = str(REPO_ROOT)
RST = re.compile(r"``|:(func|class|mod|meth|attr|data|exc|ref):`|\S::$", re.M)


def _parsers(parser, prog=()):
    """``(command words, parser)`` for the parser and every sub-parser below it."""
    yield prog, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, prog + (name,))


def _wide(text):
    return [line for line in text.splitlines() if len(line) > WIDTH]


def test_every_help_is_plain_text_within_100_columns(monkeypatch):
    monkeypatch.setenv("COLUMNS", str(WIDTH))               # argparse wraps to the terminal's width
    seen = []
    for words, parser in _parsers(build_parser()):
        text = parser.format_help()
        assert not RST.search(text), f"{' '.join(words)} --help shows markup: {RST.search(text).group(0)!r}"
        assert not _wide(text), f"{' '.join(words)} --help: {_wide(text)}"
        seen.append(" ".join(words))
    assert {"demo", "gradcheck", "drill check", "train", "predict", "evaluate", "plot attention"} <= set(seen)


def test_the_checker_help_is_plain_text(monkeypatch, capsys):
    pytest.importorskip("torch")
    from reference_torch import check
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    with pytest.raises(SystemExit):
        check.main(["--help"])
    text = capsys.readouterr().out
    assert "numpy_transformer against torch.nn" in text and not RST.search(text) and not _wide(text)


def test_plain_strips_the_markup():
    assert plain("``plot``: see :func:`numpy_transformer.study.gradcheck.gradcheck` and :class:`~nt.Linear`") == \
        "plot: see numpy_transformer.study.gradcheck.gradcheck and nt.Linear"
    assert plain("Usage::\n\n    x") == "Usage:\n\n    x"


def test_fit_wraps_long_lines_keeping_their_indent():
    text = "  " + " ".join(["word"] * 60)
    lines = fit(text).splitlines()
    assert max(map(len, lines)) <= WIDTH and lines[0].startswith("  word") and lines[1].startswith("      word")
    assert fit("short") == "short"


def test_trace_table_fits_100_columns():
    model = nt.TransformerModel(vocab_size=20, d_model=16, nhead=2, num_layers=2, dim_feedforward=32,
                                max_len=8, seed=0)
    ids = np.random.default_rng(1).integers(0, 20, size=(3, 8))
    with nt.trace(model) as t:
        y = model(ids)
        dy = np.random.default_rng(2).standard_normal(y.shape).astype(y.dtype)
        dy[0, 0, 0] = np.nan                                        # flags on many rows: long notes
        with np.errstate(invalid="ignore"):
            model.backward(dy)
    table = t.table()
    assert not _wide(table), _wide(table)
    assert "encoder.layers.0.self_attn.scores (q k^T / sqrt(Dh))\n" in table     # a long name: its own line
    assert "!! " in table and " fwd " in table and " bwd " in table and " grad " in table
    assert max(map(len, t.table(width=140).splitlines())) > WIDTH                # width is honoured


@pytest.mark.parametrize("which", ["solution", "skeleton"])
def test_drill_check_report_fits_100_columns(tmp_path, which):
    path = tmp_path / "softmax.py"
    if which == "solution":
        path.write_text(open(drills.solution_path("softmax"), encoding="utf-8").read())
    else:
        drills.start("softmax", str(tmp_path))
    buf = io.StringIO()
    drills.check_file(str(path), cases=6, stream=buf)
    out = buf.getvalue()
    assert "cases: 6 of 6 graded" in out and "oracle:" in out
    assert not _wide(out), _wide(out)


@pytest.mark.parametrize("argv", [["drill", "check", "{solution}", "--cases", "8"], ["gradcheck", "--only", "softmax"],
                                  ["drill", "solution", "attention"]])
def test_a_reader_that_closes_early_ends_the_command_quietly(argv):
    """``python -m numpy_transformer drill check FILE | head -0``: no BrokenPipeError traceback, no
    "the grader itself failed ... please report this bug"; the exit status a shell gives SIGPIPE. The
    reader closes the pipe before the command starts writing (it is still importing), so every run
    meets the closed pipe on its first line."""
    argv = [a.format(solution=drills.solution_path("softmax")) for a in argv]
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, "-m", "numpy_transformer", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=ROOT)
    proc.stdout.close()                                                 # the reader is gone
    err = proc.stderr.read().decode()
    assert (proc.wait(timeout=120), err) == (141, "")


def test_drill_list_fits_100_columns(capsys):
    from numpy_transformer.cli import main
    assert main(["drill", "list"]) == 0
    out = capsys.readouterr().out
    assert max(map(len, out.splitlines())) <= 100, out
    assert "multi_head_attention" in out
