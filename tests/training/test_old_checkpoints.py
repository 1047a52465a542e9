"""Checkpoints written before the layout move (commit a50dc1c) keep loading: today's ``load_checkpoint``
builds the same model, whose logits equal those the old tree recorded, and ``evaluate``/``predict`` print
what they printed then (see ``fixtures/pre_move/README.md`` for how the fixtures were made)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from numpy_transformer.cli import main
from numpy_transformer.training.checkpoint import load_checkpoint

FIXTURES = Path(__file__).parent / "fixtures" / "pre_move"
KINDS = ("encoder", "seq2seq", "gpt")
SRC = np.array([[1, 2, 3, 4], [4, 3, 2, 1]])          # (B, S)
TGT_IN = np.array([[1, 2, 3], [3, 2, 1]])             # (B, L), the seq2seq decoder's input


@pytest.mark.parametrize("kind", KINDS)
def test_pre_move_checkpoint_builds_the_model_that_wrote_its_logits(kind):
    model = load_checkpoint(FIXTURES / f"{kind}.npz").build_model()
    assert model.model_kind == kind
    model.eval()
    logits = model(SRC, TGT_IN) if kind == "seq2seq" else model(SRC)
    expected = np.load(FIXTURES / f"{kind}_logits.npy")
    assert logits.shape == expected.shape
    np.testing.assert_array_equal(np.asarray(logits, dtype=np.float64), expected)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("command", ["evaluate", "predict"])
def test_pre_move_checkpoint_evaluates_and_predicts_as_it_did(kind, command, capsys):
    path = FIXTURES / f"{kind}.npz"
    args = [command, str(path)] + (["--random", "3"] if command == "predict" else [])
    assert main(args) in (0, None)
    out = capsys.readouterr().out
    expected = (FIXTURES / f"{kind}_{command}.txt").read_text()
    if command == "evaluate":
        expected = expected.replace("CHECKPOINT", str(path))
    # the path's length moves where the evaluate line wraps: compare the words, in order
    assert out.split() == expected.split()
