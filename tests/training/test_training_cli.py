"""Trainer, checkpoints and the train / predict / evaluate commands."""

import json
import os
import re

import _readme
import numpy as np
import pytest

import numpy_transformer as nt
from numpy_transformer.cli import main
from numpy_transformer.models.encoder import POS_ENCODINGS as ENCODER_POSITIONS
from numpy_transformer.models.gpt_config import GPT_FFNS
from numpy_transformer.nn.activations import ACTIVATION_NAMES
from numpy_transformer.training import checkpoint as ckpt_mod
from numpy_transformer.training.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from numpy_transformer.training.trainer import TrainConfig, Trainer

TINY = dict(task="reverse", vocab_size=10, seq_len=6, num_train=400, num_val=60, d_model=16, nhead=2, num_layers=1,
            dim_feedforward=32, batch_size=8, warmup=20)
TINY_ARGS = ["--task", "reverse", "--vocab-size", "10", "--seq-len", "6", "--num-train", "400", "--num-val", "60",
             "--d-model", "16", "--nhead", "2", "--layers", "1", "--dim-feedforward", "32", "--batch-size", "8",
             "--warmup", "20"]


def _weights(trainer):
    return {k: v.copy() for k, v in trainer.model.state_dict().items()}


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_resume_continues_exactly(tmp_path, optimizer):
    full = Trainer(TrainConfig(**TINY, optimizer=optimizer, steps=30))
    full.train()
    half = Trainer(TrainConfig(**TINY, optimizer=optimizer, steps=30))
    half.train(steps=13)
    path = tmp_path / "half.npz"
    half.save(path)
    resumed = Trainer.resume(path, {"steps": 30})
    assert resumed.step == 13
    resumed.train()
    a, b = _weights(full), _weights(resumed)
    assert all(np.array_equal(a[k], b[k]) for k in a), "resume is not bit-for-bit"
    sa, sb = full.optimizer.state_dict()["state"], resumed.optimizer.state_dict()["state"]
    assert all(np.array_equal(sa[i][k], sb[i][k]) for i in sa for k in sa[i])


def test_resume_refuses_another_config(tmp_path):
    t = Trainer(TrainConfig(**TINY, steps=2))
    t.train()
    path = tmp_path / "c.npz"
    t.save(path)
    with pytest.raises(CheckpointError, match=r"another configuration: d_model: checkpoint 16, requested 32"):
        Trainer.resume(path, {"d_model": 32})
    with pytest.raises(CheckpointError, match=r"optimizer: checkpoint 'adam', requested 'sgd'"):
        Trainer.resume(path, {"optimizer": "sgd"})
    Trainer.resume(path, {"d_model": 16, "steps": 5})                       # same values are fine


def test_checkpoint_validation(tmp_path):
    model = nt.TransformerModel(12, d_model=8, nhead=2, dim_feedforward=16, max_len=7, seed=0)
    opt = nt.optim.Adam(model.parameters())
    path = tmp_path / "m.npz"
    assert save_checkpoint(path, model, opt, config={"note": 1}) == str(path)
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".tmp")]
    ck = load_checkpoint(path)
    assert ck.config == {"note": 1} and ck.model_config == model.config
    fresh = ck.build_model()
    assert all(np.array_equal(fresh.state_dict()[k], v) for k, v in model.state_dict().items())
    with pytest.raises(CheckpointError, match=r"another model configuration: d_model: checkpoint 8, model 16"):
        ck.load_model(nt.TransformerModel(12, d_model=16, nhead=2, dim_feedforward=16, max_len=7))
    other_dtype = nt.TransformerModel(12, d_model=8, nhead=2, dim_feedforward=16, max_len=7, dtype=np.float64)
    with pytest.raises(CheckpointError, match=r"dtype: checkpoint 'float32', model 'float64'"):
        ck.load_model(other_dtype)
    with pytest.raises(CheckpointError, match="holds Adam state, not SGD"):
        ck.load_optimizer(nt.optim.SGD(model.parameters(), lr=0.1))
    # a damaged state_dict is refused before the model is touched
    arrays = dict(np.load(path))
    arrays["model/head.bias"] = np.zeros(13, np.float32)
    np.savez(tmp_path / "bad.npz", **arrays)
    target = nt.TransformerModel(12, d_model=8, nhead=2, dim_feedforward=16, max_len=7, seed=5)
    before = {k: v.copy() for k, v in target.state_dict().items()}
    with pytest.raises(CheckpointError, match=r"head.bias is float32\[13\], the model has float32\[12\]"):
        load_checkpoint(tmp_path / "bad.npz").load_model(target)
    assert all(np.array_equal(before[k], v) for k, v in target.state_dict().items())
    arrays["__version__"] = np.array(99)
    np.savez(tmp_path / "v99.npz", **arrays)
    with pytest.raises(CheckpointError, match="format version 99"):
        load_checkpoint(tmp_path / "v99.npz")
    np.savez(tmp_path / "foreign.npz", a=np.ones(2))
    with pytest.raises(CheckpointError, match="not a numpy-transformer checkpoint"):
        load_checkpoint(tmp_path / "foreign.npz")


def test_save_is_atomic(tmp_path, monkeypatch):
    model = nt.TransformerModel(12, d_model=8, nhead=2, dim_feedforward=16, max_len=7, seed=0)
    path = tmp_path / "m.npz"
    save_checkpoint(path, model)
    original = path.read_bytes()

    def broken(f, **arrays):
        f.write(b"half a checkpoint")
        raise OSError("disk full")

    monkeypatch.setattr(ckpt_mod.np, "savez", broken)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(path, model)
    assert path.read_bytes() == original
    assert os.listdir(tmp_path) == ["m.npz"]


def test_small_model_learns():
    t = Trainer(TrainConfig(task="copy", vocab_size=10, seq_len=6, num_train=2000, num_val=200, d_model=32, nhead=2,
                            num_layers=1, dim_feedforward=64, batch_size=32, warmup=50, lr=3e-3, steps=150,
                            dropout=0.0))
    t.train()
    assert t.evaluate().token_accuracy > 0.95


def test_train_command_with_check_torch(tmp_path, capsys):
    path = tmp_path / "run.npz"
    rc = main(["train", *TINY_ARGS, "--steps", "24", "--eval-every", "12", "--dtype", "float64", "--check-torch",
               "--save", str(path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert max(map(len, out.splitlines())) <= 100, out
    out = re.sub(r"\n +", " ", out)                           # lines wrapped at 100 columns, joined
    assert "held-out" in out and "token acc" in out and re.search(r"step +12/24", out)
    m = re.search(r"largest loss difference ([0-9.e+-]+) \(relative\); final weights max abs diff [0-9.e+-]+, "
                  r"max relative ([0-9.e+-]+)", out)
    assert m, out
    assert float(m.group(1)) < 1e-9 and float(m.group(2)) < 1e-8
    ck = load_checkpoint(path)
    assert ck.config["task"] == "reverse" and ck.extra_json["step"] == 24
    assert set(ck.optim_state["state"][0]) == {"step", "exp_avg", "exp_avg_sq"}

    # resume to a larger total, then use the checkpoint
    assert main(["train", "--resume", str(path), "--steps", "30", "--quiet"]) == 0
    assert "at step 30" in capsys.readouterr().out
    assert main(["evaluate", str(path)]) == 0
    out = capsys.readouterr().out
    assert max(map(len, out.splitlines())) <= 100, out
    assert re.search(r"task reverse, step 30, val split: loss [0-9.]+ +token acc", re.sub(r"\n +", " ", out))
    assert main(["predict", str(path), "--tokens", "2 3 4 5 6 7", "--random", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count("source") == 1 and "predicted" in out
    assert main(["predict", str(path), "--random", "3"]) == 0
    out = capsys.readouterr().out
    assert out.count("source") == 3 and max(map(len, out.splitlines())) <= 100, out


@pytest.mark.parametrize("argv,message", [
    (["train", "--optimizer", "rmsprop"], "optimizer must be one of ['adam', 'adamw', 'sgd'], got 'rmsprop'"),
    (["train", "--activation", "tanh"], f"activation must be one of {GPT_FFNS}, got 'tanh'"),
    (["train", "--activation", "swiglu"], f"activation must be one of {ACTIVATION_NAMES} for --model encoder"),
    (["train", "--norm", "rmsnorm"], "norm='rmsnorm' is an option of --model gpt only"),
    (["train", "--pos-encoding", "rope"],
     f"pos_encoding must be one of {ENCODER_POSITIONS} for --model encoder"),
    (["train", "--dtype", "float16"], "dtype must be 'float32' or 'float64'"),
    (["train", "--schedule", "cosine"], "schedule must be one of"),
    (["train", "--d-model", "30", "--nhead", "4"], "d_model must be divisible by nhead"),
    (["evaluate", "missing.npz"], "checkpoint missing.npz does not exist"),
])
def test_command_errors(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv + ["--steps", "0"] if argv[0] == "train" else argv) == 2
    assert message in capsys.readouterr().err


def test_unknown_task_and_foreign_checkpoint(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["train", "--task", "add"])
    assert "invalid choice: 'add'" in capsys.readouterr().err
    path = tmp_path / "run.npz"
    assert main(["train", *TINY_ARGS, "--steps", "2", "--quiet", "--save", str(path)]) == 0
    capsys.readouterr()
    assert main(["train", "--resume", str(path), "--layers", "2", "--steps", "4"]) == 2
    assert "another configuration: num_layers: checkpoint 1, requested 2" in capsys.readouterr().err
    assert main(["predict", str(path), "--tokens", "2 3 4 5 6 10"]) == 2
    assert "token ids must lie in [0, 10), got 10" in capsys.readouterr().err
    assert main(["predict", str(path), "--tokens", "2 3"]) == 2
    assert "trained on length 6" in capsys.readouterr().err
    # a checkpoint without a training configuration (saved by save_checkpoint directly)
    bare = tmp_path / "bare.npz"
    save_checkpoint(bare, nt.TransformerModel(10, d_model=8, nhead=2, dim_feedforward=8, max_len=6))
    assert main(["evaluate", str(bare)]) == 2
    err = capsys.readouterr().err                  # no task to evaluate on: it says what evaluate needs
    assert "is an encoder checkpoint saved from Python" in err, err
    assert "evaluate needs a checkpoint written by train --save" in err, err


def test_config_round_trip():
    c = TrainConfig(**TINY)
    assert TrainConfig.from_dict(json.loads(json.dumps(c.to_dict()))) == c
    with pytest.raises(CheckpointError, match="unknown configuration keys"):
        TrainConfig.from_dict({**c.to_dict(), "colour": "red"})


ENCODER_TABLES = {"README.md": "task | command | held-out token accuracy",
                  "docs/training.md": "task | command | held-out token acc"}


def _readme_encoder_run(task, path="README.md"):
    """The table row of ``task`` and the config of its command: the first command of the README's
    Training section, with the options its command cell names (``same with `--task sort --steps 3000```)."""
    quoted = _readme.row(ENCODER_TABLES[path], task, path=_readme.ROOT / path)
    first = _readme.train_command("--task", "shift", "--d-model", "128")
    changes = re.findall(r"--([a-z-]+) ([^\s`]+)", quoted["command"])
    config = _readme.config_of(first, **{k.replace("-", "_"): v for k, v in changes if k != "save"})
    assert config.task == task and config.seed == 0
    return quoted, config


@pytest.mark.parametrize("path", list(ENCODER_TABLES))
@pytest.mark.parametrize("task", ["shift", "reverse", "sort"])
def test_training_tables_are_their_commands(task, path):
    """Both tables' rows run the README's first training command, changed as their cells say (fast)."""
    quoted, config = _readme_encoder_run(task, path)
    assert config == _readme_encoder_run(task)[1]
    assert config == TrainConfig(task=task, steps=3000 if task == "sort" else 1000)


@pytest.mark.slow
@pytest.mark.parametrize("task", ["shift", "reverse", "sort"])
def test_default_configuration_reaches_99_percent(task):
    """The README's claim: the default configuration (d_model 128) reaches >= 99% held-out token accuracy,
    and every figure its table (and docs/training.md's) quotes, at each step it names (evaluated every
    200 steps, as `train` does)."""
    quoted, config = _readme_encoder_run(task)
    claims = _readme.milestones(quoted["held-out token accuracy"], config.steps, every=200)
    doc, _ = _readme_encoder_run(task, "docs/training.md")
    evs = _readme.evaluations(Trainer(config), claims)
    ev = evs[config.steps]
    print(f"{task}: {evs}")
    assert ev.token_accuracy >= 0.99
    for step, claim in claims.items():
        assert claim.holds(100 * evs[step].token_accuracy), (step, evs[step], quoted)
    assert _readme.quoted(doc["held-out token acc"]).holds(100 * ev.token_accuracy), (ev, doc)
    if re.search(r"\d", doc["sequence acc"]):                         # sort's is not quoted: "—"
        assert _readme.quoted(doc["sequence acc"]).holds(100 * ev.sequence_accuracy), (ev, doc)


def test_train_a_long_sequence_from_the_command_line(capsys):
    """--seq-len 300 (past 30 ** 209, where a float count of the sequences overflowed) trains."""
    argv = ["train", "--task", "reverse", "--seq-len", "300", "--num-train", "16", "--num-val", "4", "--d-model", "8",
            "--nhead", "1", "--layers", "1", "--dim-feedforward", "8", "--batch-size", "2", "--steps", "1", "--quiet"]
    assert main(argv) == 0
    assert "finished reverse at step 1" in capsys.readouterr().out


@pytest.mark.parametrize("content", [b"", b"PK\x03\x04 cut short", None])
def test_empty_or_truncated_checkpoints_are_one_line_errors(tmp_path, capsys, content):
    if content is None:
        path = os.devnull                                   # `predict /dev/null` as a newcomer typed it
    else:
        path = tmp_path / "bad.npz"
        path.write_bytes(content)
    for argv in (["predict", str(path), "--random", "1"], ["evaluate", str(path)],
                 ["train", "--resume", str(path), "--steps", "2"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {path} is not a numpy-transformer checkpoint") and err.count("\n") == 1, err


def test_save_into_an_unwritable_directory_blames_the_checkpoint(tmp_path, capsys, monkeypatch):
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(ckpt_mod.tempfile, "mkstemp", refuse)     # root ignores chmod: refuse the probe itself
    assert main(["train", *TINY_ARGS, "--steps", "1", "--save", str(tmp_path / "run.npz")]) == 2
    err = capsys.readouterr().err
    assert err == (f"error: --save: cannot save a checkpoint to {tmp_path / 'run.npz'}: no file can be created in "
                   f"the directory {tmp_path} (Permission denied)\n")
    assert not os.listdir(tmp_path)                              # and no log was started


def _read_only_directory():
    """/sys (sysfs takes no new files, even from root), or None where a file can be created there."""
    import tempfile
    try:
        fd, probe = tempfile.mkstemp(dir="/sys")
    except OSError:
        return "/sys" if os.path.isdir("/sys") else None
    os.close(fd)
    os.unlink(probe)
    return None


@pytest.mark.skipif(_read_only_directory() is None, reason="needs a directory that cannot be written")
def test_save_into_a_read_only_directory(capsys):
    assert main(["train", *TINY_ARGS, "--steps", "1", "--save", "/sys/run.npz"]) == 2
    assert "error: --save: cannot save a checkpoint to /sys/run.npz: no file can be created" in capsys.readouterr().err


def test_predict_output_explains_itself(tmp_path, capsys):
    """The verdict is on the example's own line (never read as one more token), wrong positions are
    marked, and the id legend explains the shift task's trailing EOS."""
    path = tmp_path / "shift.npz"
    assert main(["train", *TINY_ARGS[:1], "shift", *TINY_ARGS[2:], "--steps", "1", "--quiet", "--save", str(path)]) == 0
    capsys.readouterr()
    assert main(["predict", str(path), "--tokens", "2 3 4 5 6 7"]) == 0
    out = capsys.readouterr().out
    assert max(map(len, out.splitlines())) <= 100, out
    head, body = out.split("\n\n", 1)                    # the legend (wrapped at 100 columns), then examples
    assert " ".join(head.split()) == ("task shift, 6 tokens per sequence; ids: 0 = PAD, 1 = EOS (end of sequence), "
                                      "2..9 content; shift's last target is EOS (nothing follows the last token)")
    lines = ["", ""] + body.splitlines()                   # the indices below as with a one-line legend
    assert lines[2].startswith("example 1: ")
    assert lines[3] == "  source      2 3 4 5 6 7"
    predicted = [int(t) for t in lines[4].split()[1:]]
    assert len(predicted) == 6                                      # only tokens on the predicted line
    if "wrong" in lines[2]:
        expected = [int(t) for t in lines[5].split()[1:]]
        assert expected == [3, 4, 5, 6, 7, 1]
        wrong = sum(p != e for p, e in zip(predicted, expected))
        assert lines[2] == f"example 1: {wrong} of 6 tokens wrong (marked ^)"
        assert lines[6].count("^") == wrong and len(lines[6]) <= len(lines[5])
    else:
        assert lines[2] == "example 1: correct" and predicted == [3, 4, 5, 6, 7, 1]


def test_predict_long_sequences_fit_100_columns(tmp_path, capsys):
    path = tmp_path / "long.npz"
    assert main(["train", "--task", "copy", "--seq-len", "300", "--num-train", "16", "--num-val", "4", "--d-model", "8",
                 "--nhead", "1", "--layers", "1", "--dim-feedforward", "8", "--batch-size", "2", "--steps", "1",
                 "--quiet", "--save", str(path)]) == 0
    capsys.readouterr()
    assert main(["predict", str(path), "--random", "1"]) == 0
    out = capsys.readouterr().out
    assert max(map(len, out.splitlines())) <= 100 and "positions 0-28" in out and "positions 290-299" in out


def test_resume_with_no_steps_left_is_refused_and_writes_nothing(tmp_path, capsys):
    """--steps is the total: at or below the checkpoint's step (or none given, for a run that finished),
    there is nothing to train; one error line, status 2, the checkpoint and its log untouched. A run
    stopped by a checkpoint saved mid-way still resumes with no --steps."""
    path, log = tmp_path / "run.npz", tmp_path / "run.log.jsonl"
    assert main(["train", *TINY_ARGS, "--steps", "4", "--save", str(path), "--quiet"]) == 0
    assert load_checkpoint(path).extra_json["run"]["finished"] is True
    before = path.read_bytes(), log.read_bytes()
    capsys.readouterr()
    for steps, said in ((["--steps", "4"], f"--steps 4: {path} is already at step 4"),
                        (["--steps", "2"], f"--steps 2: {path} is already at step 4"),
                        ([], f"--resume: the run in {path} finished at step 4, its --steps")):
        assert main(["train", "--resume", str(path), *steps, "--quiet"]) == 2
        assert capsys.readouterr() == ("", f"error: {said}, so there is nothing to train; pass --steps 5 or more "
                                           "to continue it (--steps is the total, not a count of further steps)\n")
        assert (path.read_bytes(), log.read_bytes()) == before
    assert main(["train", "--resume", str(path), "--steps", "5", "--quiet"]) == 0
    assert load_checkpoint(path).extra_json["step"] == 5
    trainer = Trainer(TrainConfig(**TINY, steps=6))             # a checkpoint of a run that has steps left
    trainer.train(steps=3)
    trainer.save(tmp_path / "part.npz")
    assert main(["train", "--resume", str(tmp_path / "part.npz"), "--quiet"]) == 0
    assert load_checkpoint(tmp_path / "part.npz").extra_json["step"] == 6
