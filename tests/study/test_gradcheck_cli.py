"""The ``gradcheck`` CLI command: every op and module passes, a broken op fails (or raises) and is reported,
and the command works without torch.
"""

from __future__ import annotations

import sys

import pytest

from numpy_transformer import cli
from numpy_transformer import functional as F

# --------------------------------------------------------------------------------------------------
# the CLI command
# --------------------------------------------------------------------------------------------------

@pytest.fixture
def gradcheck_cli(monkeypatch):
    """``cli.main`` with only the gradcheck command registered (isolated from other commands' imports)."""
    assert "gradcheck" in cli.COMMAND_MODULES
    monkeypatch.setattr(cli, "COMMAND_MODULES", ["gradcheck"])
    return cli.main


def _rows_by_case(out):
    """The report's rows grouped under their case's name line: {case: [row, ...]}."""
    groups, case = {}, None
    lines = out.splitlines()
    body = lines[lines.index(next(row for row in lines if row.startswith("---"))) + 1:]
    name = ""                                        # a long tensor name stands on its own line
    for line in body:
        if line.startswith("---"):
            break
        if line.startswith("  ") and len(line.split()) == 1:
            name = line.strip()
        elif line.startswith("  "):
            groups[case].append(f"  {name}  {line.strip()}" if name else line)
            name = ""
        else:
            case = line
            groups[case] = []
    return groups


def test_cli_gradcheck_passes_every_op_and_module(gradcheck_cli, capsys):
    status = gradcheck_cli(["gradcheck"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "ALL PASS" in out and "FAIL" not in out
    for case in ["linear ", "embedding ", "layer_norm ", "softmax ", "relu ", "gelu (approximate=none)",
                 "gelu (approximate=tanh)", "dropout (fixed mask", "sdpa (bool mask)", "sdpa (float mask)",
                 "sdpa (causal)", "flash_attention", "multi_head_attention (", "Linear ", "Embedding ",
                 "LayerNorm ", "MultiheadAttention (kdim=3, vdim=5)", "TransformerEncoderLayer (relu, post-LN)",
                 "TransformerEncoderLayer (gelu, pre-LN)", "TransformerEncoder (2 layers, final norm",
                 "TokenEmbedding ", "PositionalEncoding ", "TransformerDecoderLayer (pre-LN, gelu",
                 "TransformerDecoder (2 layers, final norm", "Transformer (1+1 layers"]:
        rows = [row for name, group in _rows_by_case(out).items() if (name + " ").startswith(case) for row in group]
        assert rows and all(line.rstrip().endswith("PASS   PASS") for line in rows), case
    assert "layers.1.norm2.weight" in out and "out_proj.weight" in out
    assert "decoder.layers.0.multihead_attn.in_proj_weight" in out and "layers.1.norm3.weight" in out
    assert max(len(line) for line in out.splitlines()) <= 100, "the report is wider than 100 columns"


def test_cli_gradcheck_shows_the_real_shape_of_an_untested_probability_target(gradcheck_cli, capsys):
    """The '-' row of a probability target (no gradient) shows its shape, the input's: (5,), (2, 3, 3)."""
    gradcheck_cli(["gradcheck", "--only", "probability targets"])
    groups = _rows_by_case(capsys.readouterr().out)
    assert len(groups) == 2
    for rows in groups.values():
        shapes = {line.split()[0]: line[line.index("("):line.index(")") + 1] for line in rows}
        assert shapes["target"] == shapes["input"] != "()", rows


def test_cli_gradcheck_fails_on_a_broken_op(gradcheck_cli, capsys, monkeypatch):
    monkeypatch.setattr(F, "softmax_backward", lambda dout, cache: cache.y * dout)   # row-sum term missing
    status = gradcheck_cli(["gradcheck", "--only", "softmax", "--only", "relu"])
    out = capsys.readouterr().out
    assert status == 1
    groups = _rows_by_case(out)
    assert [row.split()[-1] for row in groups["softmax (axis=-1)"]] == ["FAIL"]
    assert [row.split()[-1] for row in groups["relu"]] == ["PASS"]
    assert "softmax (axis=-1): FAIL: gradient of input 'x'" in out and "FAILED: 2 gradient(s)" in out


def test_cli_gradcheck_reports_an_op_that_raises(gradcheck_cli, capsys, monkeypatch):
    def boom(dout, cache):
        raise RuntimeError("boom")
    monkeypatch.setattr(F, "gelu_backward", boom)
    assert gradcheck_cli(["gradcheck", "--only", "gelu (approximate=tanh)"]) == 1
    assert "RuntimeError: boom" in capsys.readouterr().out


def test_cli_gradcheck_without_torch(gradcheck_cli, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)                     # as if torch were not installed
    for name in [m for m in sys.modules if m == "reference_torch" or m.startswith("reference_torch.")]:
        monkeypatch.delitem(sys.modules, name)
    assert gradcheck_cli(["gradcheck", "--only", "layer_norm", "--dtype", "float32"]) == 0
    out = capsys.readouterr().out
    assert "torch not installed" in out and "ALL PASS" in out
