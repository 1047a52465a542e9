"""The demo (the README's first command) runs, traces every stage, and agrees with the oracle."""

import re

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


# -- --block decoder -------------------------------------------------------------------------------------

def test_demo_decoder_default_configuration_shapes(capsys):
    """The seed design's sizes through one decoder block: causal self-attention (B, H, S, S),
    cross-attention (B, H, S, T) over a memory of another length, every stage traced and healthy."""
    assert main(["demo", "--block", "decoder", "--no-torch"]) == 0
    out = capsys.readouterr().out
    assert "S=10 T=12" in out and "memory (4, 12, 512)" in out
    for name, shape in [("self_attn.scores", "(4, 8, 10, 10)"), ("multihead_attn.scores", "(4, 8, 10, 12)"),
                        ("multihead_attn.k (heads)", "(4, 8, 12, 64)"), ("linear1", "(4, 10, 2048)"),
                        ("norm3", "(4, 10, 512)")]:
        assert re.search(rf"^decoder_block\.{re.escape(name)}.*\n?.*fwd\s+{re.escape(shape)}", out, flags=re.M), name
    assert out.count("row sums in [1.000000, 1.000000]") == 2                 # both softmaxes
    assert "[ok] multihead_attn (4, 8, 10, 12) attention scores range" in out
    assert "!!" not in out
    assert "decoder_block.multihead_attn.in_proj_weight" in out and "dL/dmemory" in out
    assert all(len(line) <= 100 for line in out.splitlines())


@pytest.mark.parametrize("extra", [[], ["--activation", "gelu", "--norm-first"], ["--dtype", "float32"],
                                   ["--dropout", "0"]])
def test_demo_decoder_against_torch(capsys, extra):
    """Output, dL/dtgt, dL/dmemory and all 19 parameter gradients against torch.nn.TransformerDecoderLayer
    (dropout masks replayed: with dropout 0.1 the masks must match for the errors to be this small)."""
    pytest.importorskip("torch")
    assert main(SMALL + ["--block", "decoder", "--memory-len", "7", "--trace"] + extra) == 0
    out = capsys.readouterr().out
    assert "torch.nn.TransformerDecoderLayer" in out
    assert ("torch's own modules" in out) == ("--dropout" in extra)
    worst = float(re.search(r"largest relative error (\S+)", out).group(1))
    tol = 1e-10 if "float32" not in extra else 1e-4
    assert worst <= tol
    errors = dict((name.strip(), float(rel)) for name, _, rel in
                  re.findall(r"^(\S.*?)\s+(\d\.\d+e[-+]\d+)\s+(\d\.\d+e[-+]\d+)$", out, flags=re.M))
    for name in ("output", "dL/dtgt (the block's target input)", "dL/dmemory"):
        assert errors[name] <= tol, name
    assert len([n for n in errors if n.endswith("(grad)")]) == 19            # embedding + 18 in the block
    assert " bwd " in out and "d memory" in out                              # the backward trace: both inputs


def test_demo_block_option_is_checked(capsys):
    with pytest.raises(SystemExit):
        main(["demo", "--block", "both"])
    assert "--block" in capsys.readouterr().err
