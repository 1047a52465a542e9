"""Training the seq2seq model: the Trainer, checkpoints and the train / evaluate / predict commands with
``--model seq2seq``; the >= 99% held-out exact-match runs behind the ``slow`` marker."""

import json
import re
import time

import _readme
import numpy as np
import pytest
from _paths import REPO_ROOT

from numpy_transformer.cli import main
from numpy_transformer.models.seq2seq import Seq2SeqModel
from numpy_transformer.tasks import seq2seq as s2s
from numpy_transformer.training.checkpoint import CheckpointError, load_checkpoint
from numpy_transformer.training.kinds import KINDS
from numpy_transformer.training.trainer import TrainConfig, Trainer

TINY = dict(model="seq2seq", task="reverse", vocab_size=10, seq_len=5, num_train=600, num_val=60, d_model=16,
            nhead=2, num_layers=1, dim_feedforward=32, batch_size=16, warmup=30, dropout=0.0)
TINY_ARGS = ["--model", "seq2seq", "--task", "reverse", "--vocab-size", "10", "--seq-len", "5", "--num-train", "600",
             "--num-val", "60", "--d-model", "16", "--nhead", "2", "--layers", "1", "--dim-feedforward", "32",
             "--batch-size", "16", "--warmup", "30"]


def test_config_defaults_per_kind():
    assert TrainConfig().task == "shift" and TrainConfig().model == "encoder"
    assert TrainConfig(model="seq2seq").task == "reverse"
    with pytest.raises(ValueError, match=r"model must be one of \['encoder', 'seq2seq', 'gpt'\], got 'gpt2'"):
        TrainConfig(model="gpt2")
    with pytest.raises(ValueError, match=r"task must be one of \['dedup_sort', 'reverse', 'translate'\] for "
                                         r"--model seq2seq, got 'shift'"):
        TrainConfig(model="seq2seq", task="shift")
    with pytest.raises(ValueError, match="for --model encoder, got 'translate'"):
        TrainConfig(task="translate")
    assert set(KINDS) == {"encoder", "seq2seq", "gpt"}


def test_short_run_learns():
    t = Trainer(TrainConfig(**TINY, steps=150, lr=3e-3))
    assert isinstance(t.model, Seq2SeqModel)
    before = t.evaluate()
    losses = [t.train_step().loss for _ in range(150)]
    after = t.evaluate()
    assert after.bleu is not None and before.bleu is not None
    assert np.mean(losses[-20:]) < 0.6 * np.mean(losses[:10])
    assert after.token_accuracy > before.token_accuracy + 0.2
    assert after.bleu > before.bleu + 10
    pred = t.predict(t.data.val_src[:4])
    assert pred.shape == (4, t.data.tgt_len) and pred.dtype == np.int64


def test_padding_is_not_a_target():
    t = Trainer(TrainConfig(**TINY, steps=1))
    src, tgt = t.batcher.next()
    logits, target = t.kind.logits(t.model, src, tgt)
    assert t.criterion.ignore_index == s2s.PAD and (target == s2s.PAD).any()
    v = logits.shape[-1]
    loss = float(t.criterion(logits.reshape(-1, v), target.reshape(-1)))
    keep = target.reshape(-1) != s2s.PAD
    z = logits.reshape(-1, v)[keep].astype(np.float64)
    manual = np.mean(np.log(np.exp(z).sum(-1)) - z[np.arange(len(z)), target.reshape(-1)[keep]])
    assert loss == pytest.approx(manual, rel=1e-5)


def test_resume_continues_exactly(tmp_path):
    full = Trainer(TrainConfig(**dict(TINY, dropout=0.1), steps=20))
    full.train()
    half = Trainer(TrainConfig(**dict(TINY, dropout=0.1), steps=10))
    half.train()
    half.save(tmp_path / "half.npz")
    resumed = Trainer.resume(tmp_path / "half.npz", {"steps": 20})
    resumed.train()
    a, b = full.model.state_dict(), resumed.model.state_dict()
    assert all(np.array_equal(a[k], b[k]) for k in a)
    ck = load_checkpoint(tmp_path / "half.npz")
    assert ck.model_kind == "seq2seq" and ck.config["model"] == "seq2seq"
    assert isinstance(ck.build_model(), Seq2SeqModel)
    enc = Trainer(TrainConfig(task="reverse", vocab_size=10, seq_len=5, num_train=100, num_val=10, d_model=16,
                              nhead=2, num_layers=1, dim_feedforward=32, batch_size=8, steps=1))
    with pytest.raises(CheckpointError, match=r"holds a model of kind 'seq2seq', not 'encoder' \(TransformerModel\)"):
        ck.check_model(enc.model)
    enc.save(tmp_path / "enc.npz")
    assert load_checkpoint(tmp_path / "enc.npz").model_kind == "encoder"


def test_cli_train_evaluate_predict(tmp_path, capsys):
    path = tmp_path / "s2s.npz"
    assert main(["train", *TINY_ARGS, "--steps", "30", "--eval-every", "15", "--save", str(path)]) == 0
    out = capsys.readouterr().out
    assert max(map(len, out.splitlines())) <= 100, out
    out = re.sub(r"\n +", " ", out)                              # lines wrapped at 100 columns, joined
    assert "1 encoder + 1 decoder layers" in out and "(model seq2seq)" in out
    assert re.search(r"held-out +loss [0-9.]+ +token acc [0-9.]+% \(teacher-forced\) +exact match [0-9.]+% "
                     r"\(greedy\) +BLEU [0-9.]+", out), out
    log = [json.loads(line) for line in open(tmp_path / "s2s.log.jsonl")]
    assert log[0]["config"]["model"] == "seq2seq"
    assert sum(r.get("bleu") is not None for r in log) == 2          # the validation at step 15 and the final one
    assert main(["train", "--resume", str(path), "--steps", "35", "--quiet"]) == 0
    assert "at step 35" in capsys.readouterr().out
    assert main(["evaluate", str(path), "--num", "20"]) == 0
    out = capsys.readouterr().out
    assert max(map(len, out.splitlines())) <= 100, out
    assert re.search(r"task reverse, step 35, val split: .*exact match .*BLEU .*\(20 examples\)",
                     re.sub(r"\n +", " ", out))                  # lines wrapped at 100 columns, joined
    assert main(["predict", str(path), "--random", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count("  source ") == 2 and out.count("  generated ") == 2
    assert main(["predict", str(path), "--tokens", "3 4 5"]) == 0
    out = capsys.readouterr().out
    assert "source     3 4 5" in out and "generated" in out
    assert ("correct" in out) or ("expected   5 4 3" in out)


@pytest.mark.parametrize("argv,message", [
    (["train", "--model", "seq2seq", "--task", "shift"], "task must be one of ['dedup_sort', 'reverse', 'translate'] "
                                                         "for --model seq2seq, got 'shift'"),
    (["train", "--model", "seq2seq", "--task", "translate", "--seq-len", "5"], "seq_len must be >= 6 for translate"),
])
def test_cli_bad_input(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_cli_predict_bad_tokens(tmp_path, capsys):
    path = tmp_path / "s2s.npz"
    assert main(["train", *TINY_ARGS, "--steps", "1", "--quiet", "--save", str(path)]) == 0
    capsys.readouterr()
    assert main(["predict", str(path), "--tokens", "3 4 5 6 7 8"]) == 2
    assert "--tokens: the model reads sources of 1 to 5 tokens; got 6" in capsys.readouterr().err
    assert main(["predict", str(path), "--tokens", "1 4"]) == 2
    assert "--tokens: source ids must lie in [3, 10)" in capsys.readouterr().err
    assert main(["plot", "attention", str(path), "--tokens", "1 4", "--out", str(tmp_path / "a.png")]) == 2
    assert "--tokens: source ids must lie in [3, 10)" in capsys.readouterr().err   # predict's validator


# -- the README's table, rerun: each row's `train` command (read from the README) gives the figures quoted ---
S2S_TABLE = "task | model | steps | wall clock | held-out exact match | held-out BLEU"
S2S_TASKS = ["reverse", "dedup_sort", "translate"]


def _readme_trainer(task, seed=None):
    """The row of ``task`` and a Trainer of its command (``seed``: the same with ``--seed seed``)."""
    quoted = _readme.row(S2S_TABLE, task)
    command = _readme.train_command("--model", "seq2seq", "--task", task)
    config = _readme.config_of(command) if seed is None else _readme.config_of(command, seed=seed)
    trainer = Trainer(config)
    assert config.steps == int(quoted["steps"]) and (config.seed, config.dtype) == (seed or 0, "float32")
    assert (config.num_train, config.num_val) == (20000, 1000)                      # the table's preamble
    assert f"{trainer.model.num_parameters():,} parameters" in quoted["model"]
    return trainer, quoted


@pytest.mark.parametrize("task", S2S_TASKS)
def test_readme_table_is_its_commands(task):
    """Each row's steps and parameter count are those of the command printed above it (fast: no training)."""
    _readme_trainer(task)


@pytest.mark.slow
@pytest.mark.parametrize("task", S2S_TASKS)
def test_reaches_99_percent_exact_match(task):
    t0 = time.perf_counter()
    trainer, quoted = _readme_trainer(task)
    claims = _readme.milestones(quoted["held-out exact match"], trainer.config.steps, every=200)
    evs = _readme.evaluations(trainer, claims)
    for step, ev in evs.items():
        print(f"{task}: {ev} at step {step}, {time.perf_counter() - t0:.0f}s")
    ev = evs[trainer.config.steps]
    assert ev.examples == 1000 and ev.sequence_accuracy >= 0.99, ev
    for step, claim in claims.items():
        assert claim.holds(100 * evs[step].sequence_accuracy), (step, evs[step], quoted["held-out exact match"])
    assert _readme.quoted(quoted["held-out BLEU"]).holds(ev.bleu), (ev, quoted["held-out BLEU"])
    spread = _readme.over_seeds(quoted["held-out exact match"])
    assert spread is None or spread[1].holds(100 * ev.sequence_accuracy), (ev, quoted["held-out exact match"])


def _quoted_other_seeds():
    """(task, seed) for every seed but the command's own that a row's "over seeds" figure covers."""
    out = []
    for task in S2S_TASKS:
        spread = _readme.over_seeds(_readme.row(S2S_TABLE, task)["held-out exact match"])
        out += [(task, seed) for seed in (spread[0] if spread else []) if seed != 0]
    return out


def test_the_reverse_row_quotes_its_spread_over_seeds():
    """Issue 22: reverse's figure sat on a knife-edge (99.90% quoted, 97.60% on another machine); its row
    now quotes what holds over seeds 0-2 at least, and the slow test below checks every one (fast)."""
    spread = _readme.over_seeds(_readme.row(S2S_TABLE, "reverse")["held-out exact match"])
    assert spread is not None and spread[0][:3] == [0, 1, 2] and spread[1].lo >= 99.0, spread


@pytest.mark.slow
@pytest.mark.parametrize("task,seed", _quoted_other_seeds())
def test_the_quoted_spread_holds_for_every_seed(task, seed):
    """A row's "**lo–hi%** over seeds a–b": the command with ``--seed`` each of them lands in [lo, hi]
    (exact match and BLEU)."""
    trainer, quoted = _readme_trainer(task, seed=seed)
    spread = _readme.over_seeds(quoted["held-out exact match"])
    trainer.train()
    ev = trainer.evaluate()
    print(f"{task} seed {seed}: {ev}")
    assert ev.examples == 1000 and ev.sequence_accuracy >= 0.99, ev
    assert spread[1].holds(100 * ev.sequence_accuracy), (ev, quoted["held-out exact match"])
    assert _readme.quoted(quoted["held-out BLEU"]).holds(ev.bleu), (ev, quoted["held-out BLEU"])    # every seed's


def test_docs_training_seq2seq_snippet_runs():
    doc = (REPO_ROOT / "docs" / "training.md").read_text()
    code = next(b for b in re.findall(r"```python\n(.*?)```", doc, re.S) if "Seq2SeqModel" in b)
    for old, new in (("range(1000)", "range(3)"), ("num_train=20000, num_val=1000", "num_train=500, num_val=40")):
        assert old in code
        code = code.replace(old, new)
    ns = {}
    exec(compile(code, "docs/training.md", "exec"), ns)
    assert 0 <= ns["exact"] <= 1 and 0 <= ns["bleu"] <= 100 and np.isfinite(float(ns["loss"]))


@pytest.mark.slow
def test_docs_training_seq2seq_snippet_as_it_stands():
    """docs/training.md's seq2seq loop, run as written, reaches the exact match and BLEU the doc states."""
    doc = (REPO_ROOT / "docs" / "training.md").read_text()
    code = next(b for b in re.findall(r"```python\n(.*?)```", doc, re.S) if "Seq2SeqModel" in b)
    ns = {}
    exec(compile(code, "docs/training.md", "exec"), ns)
    m = re.search(r"Run as it stands, this reaches exact match ([0-9.]+) and BLEU ([0-9.]+)", doc)
    assert m, "the doc states no figure for its seq2seq loop"
    assert ns["exact"] == float(m.group(1)) and round(ns["bleu"], 2) == float(m.group(2)), (ns["exact"], ns["bleu"])
