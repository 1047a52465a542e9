"""``train --config FILE`` (TOML or JSON, flags overriding it) and the resolved config every run writes
next to its checkpoint (``run.npz`` -> ``run.config.json``), which ``--config`` reads back."""

import json
import os

import numpy as np
import pytest
from _paths import REPO_ROOT

from numpy_transformer.cli import main
from numpy_transformer.cli.train_config import CONFIG_KEYS

TINY = ["--task", "reverse", "--seq-len", "6", "--d-model", "16", "--nhead", "2", "--layers", "1",
        "--dim-feedforward", "16", "--num-train", "64", "--num-val", "16", "--batch-size", "16", "--steps", "12",
        "--eval-every", "6"]
TOML = """model = "encoder"
task = "reverse"
seq_len = 6
d_model = 16
nhead = 2
num_layers = 1
dim_feedforward = 16
num_train = 64
num_val = 16
batch_size = 16
steps = 12
betas = [0.9, 0.95]
norm_first = true
eval_every = 6
"""


def _train(*argv):
    return main(["train", "--quiet", "--no-log", *argv])


def _same_weights(a, b):
    with np.load(a) as x, np.load(b) as y:
        assert x.files == y.files
        differ = [k for k in x.files if x[k].dtype != object and not np.array_equal(x[k], y[k])]
    assert differ == []


def _error(capsys, *argv):
    assert _train(*argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def test_every_run_writes_its_resolved_config_and_it_reproduces_the_run(tmp_path, capsys):
    a, b = str(tmp_path / "a.npz"), str(tmp_path / "b.npz")
    assert _train(*TINY, "--lr", "0.003", "--save", a) == 0
    with open(tmp_path / "a.config.json") as f:
        resolved = json.load(f)
    assert set(resolved) == set(CONFIG_KEYS)                       # every option, after the defaults
    assert resolved["d_model"] == 16 and resolved["lr"] == 0.003 and resolved["eval_every"] == 6
    assert resolved["dropout"] == 0.1 and resolved["betas"] == [0.9, 0.98]     # the defaults, resolved
    assert _train("--config", str(tmp_path / "a.config.json"), "--save", b) == 0
    _same_weights(a, b)
    with open(tmp_path / "b.config.json") as f:
        assert json.load(f) == resolved


def test_a_toml_config_with_flags_overriding_it(tmp_path, capsys):
    config = tmp_path / "run.toml"
    config.write_text(TOML)
    assert _train("--config", str(config), "--steps", "6", "--d-model", "8", "--save", str(tmp_path / "c.npz")) == 0
    with open(tmp_path / "c.config.json") as f:
        resolved = json.load(f)
    assert resolved["steps"] == 6 and resolved["d_model"] == 8                 # the flags win
    assert resolved["betas"] == [0.9, 0.95] and resolved["norm_first"] is True and resolved["num_layers"] == 1
    assert _train(*TINY, "--steps", "6", "--d-model", "8", "--betas", "0.9", "0.95", "--norm-first",
                  "--save", str(tmp_path / "d.npz")) == 0
    _same_weights(tmp_path / "c.npz", tmp_path / "d.npz")


def test_a_text_run_round_trips(tmp_path, capsys):
    text = os.path.join(str(REPO_ROOT), "data", "tiny_text.txt")
    a, b = str(tmp_path / "t.npz"), str(tmp_path / "u.npz")
    assert _train("--model", "gpt", "--text", text, "--seq-len", "16", "--d-model", "16", "--nhead", "2",
                  "--layers", "1", "--dim-feedforward", "16", "--batch-size", "4", "--steps", "4",
                  "--eval-every", "0", "--save", a) == 0
    with open(tmp_path / "t.config.json") as f:
        resolved = json.load(f)
    assert resolved["text"] == text and "num_train" not in resolved     # the text decides its windows
    assert _train("--config", str(tmp_path / "t.config.json"), "--save", b) == 0
    _same_weights(a, b)


@pytest.mark.parametrize("content, name, expect", [
    ('d-model = 16\n', "c.toml", "unknown key 'd-model' (did you mean 'd_model'?)"),
    ('{"layers": 2}', "c.json", "unknown key 'layers' (did you mean 'num_layers'?)"),
    ('{"save": "x.npz"}', "c.json", "unknown key 'save'"),
    ('d_model = "16"\n', "c.toml", "key 'd_model' must be an integer, got '16' (str)"),
    ('lr = true\n', "c.toml", "key 'lr' must be a number, got True (bool)"),
    ('norm_first = 1\n', "c.toml", "key 'norm_first' must be true or false, got 1 (int)"),
    ('betas = [0.9]\n', "c.toml", "key 'betas' must be a list of two numbers, got [0.9] (list)"),
    ('task = "nope"\n', "c.toml", "key 'task' must be one of"),
    ('[1, 2]', "c.json", "expected a table of options (key = value), got a JSON list"),
    ('d_model = \n', "c.toml", "is not valid TOML"),
    ('d_model: 16\n', "c.yaml", "expected a .toml or .json file, got '.yaml'"),
])
def test_bad_config_files_are_one_error_naming_the_key(tmp_path, capsys, content, name, expect):
    path = tmp_path / name
    path.write_text(content)
    line = _error(capsys, "--config", str(path), "--steps", "2", "--save", str(tmp_path / "x.npz"))
    assert f"--config {path}" in line and expect in line
    assert not os.path.exists(tmp_path / "x.npz") and not os.path.exists(tmp_path / "x.config.json")


def test_another_runs_config_is_never_overwritten(tmp_path, capsys):
    theirs = tmp_path / "e.config.json"
    theirs.write_text('{"steps": 99}')
    line = _error(capsys, *TINY, "--save", str(tmp_path / "e.npz"))
    assert f"the run's config {theirs} already exists (another run's?); pass --force" in line
    assert theirs.read_text() == '{"steps": 99}' and not os.path.exists(tmp_path / "e.npz")
    os.symlink(str(tmp_path / "elsewhere.json"), str(tmp_path / "f.config.json"))
    line = _error(capsys, *TINY, "--force", "--save", str(tmp_path / "f.npz"))
    assert "is a symbolic link" in line and not os.path.exists(tmp_path / "elsewhere.json")
    assert _train(*TINY, "--force", "--save", str(tmp_path / "e.npz")) == 0
    assert json.loads(theirs.read_text())["steps"] == 12
    assert _train("--resume", str(tmp_path / "e.npz"), "--steps", "18") == 0         # its own run: updated
    assert json.loads(theirs.read_text())["steps"] == 18
