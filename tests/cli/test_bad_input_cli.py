"""Bad input, data, the training configuration and the command line: one ``error: ...`` line, no
traceback, a non-zero exit status.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from numpy_transformer.cli import main
from numpy_transformer.models.gpt_config import GPT_FFNS
from numpy_transformer.tasks import data as ntdata
from numpy_transformer.training.trainer import TrainConfig
from tests.cli.bad_input_helpers import (
    expect,
    not_numbers,
    not_positive_ints,
    not_probabilities,
)

# ------------------------------------------------------------------------------------------------
# data and the training configuration
# ------------------------------------------------------------------------------------------------

def test_data_refusals():
    expect(ValueError, lambda: ntdata.make_task("add"), "task must be one of", "'add'")
    expect(ValueError, lambda: ntdata.make_task("copy", seed=-1), "seed must be a non-negative int", "-1")
    expect(ValueError, lambda: ntdata.make_task("copy", seed="a"), "seed must be a non-negative int", "'a'")
    expect(ValueError, lambda: ntdata.make_task("copy", vocab_size=2), "vocab_size must be > 2", "2")
    expect(ValueError, lambda: ntdata.make_task("copy", seq_len=0), "seq_len must be a positive int", "0")
    expect(TypeError, lambda: ntdata.make_targets("copy", np.zeros(3)), "src must be an integer array", "float64")
    expect(ValueError, lambda: ntdata.make_targets("copy", np.int64(3)), "src must have shape (..., L)")
    src = np.zeros((10, 3), int)
    expect(ValueError, lambda: ntdata.Batcher(src, src[:9], 2), "same number of rows N", "(10, 3) and (9, 3)")
    expect(ValueError, lambda: ntdata.Batcher(src[0], src[0], 2), "src must have shape (N, L)", "(3,)")
    expect(TypeError, lambda: ntdata.Batcher(src.astype(float), src, 2), "src must be an integer array", "float64")
    expect(ValueError, lambda: ntdata.Batcher(src, src, 11), "batch_size 11 exceeds the 10 training examples")
    expect(ValueError, lambda: ntdata.Batcher(src, src, 0), "batch_size must be a positive int", "0")
    expect(KeyError, lambda: ntdata.Batcher(src, src, 2).load_state_dict({"pos": 0}),
           "missing ['rng', 'perm', 'epoch']")


CONFIG_BAD = {
    "lr": st.one_of(not_numbers, st.floats(max_value=0, allow_nan=False), st.just(float("inf"))),
    "clip": st.one_of(not_numbers, st.floats(max_value=-1e-9, allow_nan=False)),
    "dropout": not_probabilities,
    "label_smoothing": st.one_of(not_numbers, st.floats(min_value=1.0001, allow_infinity=False)),
    "weight_decay": st.one_of(not_numbers, st.floats(max_value=-1e-9, allow_nan=False)),
    "momentum": st.one_of(not_numbers, st.floats(max_value=-1e-9, allow_nan=False)),
    "eps": st.one_of(not_numbers, st.floats(max_value=-1e-9, allow_nan=False)),
    "steps": st.one_of(st.integers(max_value=-1), st.floats(), st.text(max_size=2), st.none()),
    "seed": st.one_of(st.integers(max_value=-1), st.floats(), st.text(max_size=2), st.none()),
    "d_model": not_positive_ints, "batch_size": not_positive_ints, "warmup": not_positive_ints,
    "task": st.text(max_size=5), "optimizer": st.text(max_size=5),
    "dtype": st.sampled_from(["float16", "int32", np.float32]),
    "activation": st.text(max_size=4), "schedule": st.text(max_size=4), "pos_encoding": st.text(max_size=4),
    "betas": st.one_of(not_numbers, st.tuples(st.floats(1, 5), st.floats(0, 0.5)),
                       st.lists(st.floats(0, .5), max_size=1)),
}


@given(data=st.data(), field=st.sampled_from(sorted(CONFIG_BAD)))
def test_train_config_refuses_every_bad_field(data, field):
    value = data.draw(CONFIG_BAD[field])
    needle = field.split("_")[0] if field != "label_smoothing" else field
    expect(ValueError, lambda: TrainConfig(**{field: value}), needle)


# ------------------------------------------------------------------------------------------------
# the command line
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv,needle", [
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["train", "--bogus"], "unrecognized arguments: --bogus"),
    (["train", "--steps", "many"], "argument --steps: invalid int value: 'many'"),
    (["train", "--lr", "fast"], "argument --lr: invalid float value: 'fast'"),
    (["train", "--task", "add"], "argument --task: invalid choice: 'add'"),
    (["evaluate", "x.npz", "--split", "test"], "argument --split: invalid choice: 'test'"),
    (["demo", "--d-model", "0"], "argument --d-model: must be a positive integer, got 0"),
    (["demo", "--dropout", "1.5"], "argument --dropout: must be a number in [0, 1], got 1.5"),
    (["demo", "--seed", "-3"], "argument --seed: must be a non-negative integer, got -3"),
    (["gradcheck", "--eps", "0"], "argument --eps: must be a positive number, got 0"),
    (["drill", "check", "x.py", "--cases", "zero"], "argument --cases: must be a positive integer, got 'zero'"),
])
def test_cli_refuses_unknown_options_and_values(argv, needle, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert needle in capsys.readouterr().err


@pytest.mark.parametrize("argv,needle", [
    (["train", "--lr", "0"], "lr must be > 0, got 0.0"),
    (["train", "--lr", "nan"], "lr must be > 0, got nan"),
    (["train", "--dropout", "1.5"], "dropout probability must be a number in [0, 1], got 1.5"),
    (["train", "--batch-size", "0"], "batch_size must be a positive int, got 0"),
    (["train", "--seed", "-1"], "seed must be an int >= 0, got -1"),
    (["train", "--betas", "0.9", "1.0"], "betas[1] must be in [0, 1), got 1.0"),
    (["train", "--eval-every", "-1"], "--eval-every must be >= 0, got -1"),
    (["train", "--clip", "-1"], "clip (0 = no clipping) must be >= 0, got -1.0"),
    (["train", "--label-smoothing", "2"], "label_smoothing must be in [0, 1], got 2.0"),
    (["train", "--activation", "tanh"], f"activation must be one of {GPT_FFNS}, got 'tanh'"),
    (["train", "--save", "no/such/dir/run.npz"], "the directory"),
    (["train", "--resume", "missing.npz"], "checkpoint missing.npz does not exist"),
    (["evaluate", "missing.npz"], "checkpoint missing.npz does not exist"),
    (["evaluate", "."], "is not a numpy-transformer checkpoint"),
    (["demo", "--d-model", "30", "--nhead", "4"], "--d-model must be divisible by --nhead, got 30 and 4"),
    (["demo", "--seq-len", "6000", "--no-torch"], "--seq-len must be at most 5000"),
])
def test_cli_explains_bad_values(argv, needle, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv + (["--steps", "0"] if argv[0] == "train" and "--resume" not in argv else [])) == 2
    assert needle in capsys.readouterr().err


def test_cli_predict_and_evaluate_arguments(tmp_path, capsys):
    path = tmp_path / "run.npz"
    assert main(["train", "--task", "copy", "--vocab-size", "8", "--seq-len", "4", "--num-train", "50", "--num-val",
                 "10", "--d-model", "8", "--nhead", "2", "--layers", "1", "--dim-feedforward", "8", "--batch-size", "4",
                 "--steps", "1", "--quiet", "--save", str(path)]) == 0
    capsys.readouterr()
    for argv, needle in [
        (["predict", str(path), "--tokens", "a b c d"], "--tokens must be integers separated by spaces, got 'a b c d'"),
        (["predict", str(path), "--tokens", "2 3 4 9"], "token ids must lie in [0, 8), got 9"),
        (["predict", str(path), "--tokens", "2 3 -4 5"], "token ids must lie in [0, 8), got -4"),
        (["predict", str(path), "--tokens", "2 3"], "the model was trained on length 4; got 2 tokens"),
        (["predict", str(path), "--random", "-2"], "--random must be a positive number of examples, got -2"),
        (["evaluate", str(path), "--num", "0"], "--num must be positive, got 0"),
        (["train", "--resume", str(path), "--d-model", "16"],
         "another configuration: d_model: checkpoint 8, requested 16"),
    ]:
        assert main(argv) == 2, argv
        assert needle in capsys.readouterr().err, argv
