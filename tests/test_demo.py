"""The demo (the README's first command) runs, traces every stage, and agrees with the oracle."""

import re

import numpy as np
import pytest

from numpy_transformer.cli import main

SMALL = ["demo", "--vocab", "50", "--d-model", "32", "--nhead", "4", "--dim-feedforward", "64",
         "--batch", "2", "--seq-len", "5"]


def test_demo_default_configuration_shapes(capsys):
    assert main(["demo", "--no-torch"]) == 0
    out = capsys.readouterr().out
    assert "(4, 8, 10, 64)" in out                       # Q/K/V head split
    assert "(4, 8, 10, 10)" in out                       # scores
    assert "row sums in [1.000000, 1.000000]" in out
    assert "!!" not in out                               # every health check ok
    assert "encoder_block.self_attn.in_proj_weight" in out


@pytest.mark.parametrize("extra", [[], ["--activation", "gelu", "--norm-first"], ["--dtype", "float32"]])
def test_demo_against_torch(capsys, extra):
    pytest.importorskip("torch")
    assert main(SMALL + extra + ["--trace"]) == 0
    out = capsys.readouterr().out
    assert "AGAINST THE PYTORCH ORACLE" in out
    worst = float(re.search(r"largest relative error (\S+)", out).group(1))
    assert worst <= (1e-10 if "float32" not in extra else 1e-4)
    assert " bwd " in out                                # the backward trace is printed
    rows = re.findall(r"^(\S+ \(grad\))\s+(\S+)\s+(\S+)$", out, flags=re.M)
    assert len(rows) == 13                               # every parameter's gradient compared


def test_demo_flags_missing_scale(capsys, monkeypatch):
    """The health check catches a TokenEmbedding without its sqrt(d_model) scale."""
    import numpy_transformer as nt
    monkeypatch.setattr(nt.TokenEmbedding, "forward", lambda self, ids: self.embedding(ids))
    assert main(SMALL + ["--no-torch"]) == 0
    out = capsys.readouterr().out
    assert "[!!] embedding std" in out
