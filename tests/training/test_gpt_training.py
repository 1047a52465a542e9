"""The GPT language model on digit addition: the task (tasks_lm), the ``gpt`` kind through the Trainer,
checkpoints and the train / evaluate / predict commands; the >= 99% held-out exact-match run behind
the ``slow`` marker."""

import json
import re
import time

import _readme
import numpy as np
import pytest

from numpy_transformer import GPT
from numpy_transformer.cli import main
from numpy_transformer.tasks import lm
from numpy_transformer.training.checkpoint import CheckpointError, load_checkpoint
from numpy_transformer.training.trainer import TrainConfig, Trainer

TINY = dict(model="gpt", num_train=600, num_val=60, d_model=16, nhead=2, num_layers=1, dim_feedforward=32,
            batch_size=16, warmup=30, dropout=0.0)
TINY_ARGS = ["--model", "gpt", "--num-train", "600", "--num-val", "60", "--d-model", "16", "--nhead", "2",
             "--layers", "1", "--dim-feedforward", "32", "--batch-size", "16", "--warmup", "30"]


def _text(src_row, tgt_row):
    """The whole sequence a training row encodes: input ids then the last target."""
    return lm.to_text(np.append(src_row, tgt_row[-1]))


# -- the task ----------------------------------------------------------------------------------------------
def test_format_and_answers():
    d = lm.make_lm_task(digits=3, num_train=500, num_val=100, seed=1)
    assert d.vocab_size == 14 and d.prompt_len == 8 and d.answer_len == 5 and d.seq_len == 13
    assert d.train_src.shape == d.train_tgt.shape == (500, 12) and d.val_src.shape == (100, 12)
    assert d.train_src.dtype == d.train_tgt.dtype == np.int64
    for (a, b), s, t in zip(d.train_ab[:50].tolist(), d.train_src, d.train_tgt):
        want = a + b
        rev = str(want).zfill(4)[::-1]
        assert _text(s, t) == f"{a:03d}+{b:03d}={rev}$"
        assert (t[:7] == lm.IGNORE).all() and (t[7:] != lm.IGNORE).all()      # the answer's 5 targets only
        assert np.array_equal(t[:-1][7:], s[8:])                              # next-token shift by one
        assert lm.decode_answer(t[7:]) == want
    assert lm.to_text(lm.encode_prompt(123, 456, 3)[0]) == "123+456="
    assert lm.to_text(lm.encode_answer(579, 3)[0]) == "9750$"
    assert lm.to_text(lm.encode_answer(999 + 999, 3)[0]) == "8991$"           # the carry into a 4th digit
    assert lm.decode_answer([lm.DIGIT0 + 9, lm.DIGIT0 + 7, lm.DIGIT0 + 5, lm.EOS, lm.PAD]) == 579
    assert lm.decode_answer([lm.DIGIT0 + 9, lm.PLUS, lm.EOS]) is None         # not digits then EOS
    assert lm.decode_answer([lm.DIGIT0 + 9, lm.DIGIT0 + 7]) is None           # no EOS
    assert lm.decode_answer([lm.EOS]) is None


def test_deterministic_and_disjoint():
    a = lm.make_lm_task(digits=2, num_train=3000, num_val=500, seed=7)
    b = lm.make_lm_task(digits=2, num_train=3000, num_val=500, seed=7)
    c = lm.make_lm_task(digits=2, num_train=3000, num_val=500, seed=8)
    for name in ("train_src", "train_tgt", "val_src", "val_tgt", "train_ab", "val_ab"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.train_ab, c.train_ab)
    pairs = [tuple(p) for p in np.concatenate([a.train_ab, a.val_ab]).tolist()]
    assert len(set(pairs)) == 3500                                           # distinct, so held out exactly
    assert not {tuple(p) for p in a.val_ab.tolist()} & {tuple(p) for p in a.train_ab.tolist()}
    assert (a.train_ab >= 0).all() and (a.train_ab < 100).all()
    full = lm.make_lm_task(digits=1, num_train=90, num_val=10, seed=0)       # every 1-digit pair, once
    assert len({tuple(p) for p in np.concatenate([full.train_ab, full.val_ab]).tolist()}) == 100


@pytest.mark.parametrize("kwargs,message", [
    (dict(task="subtraction"), "task must be one of ['addition'] for the gpt model, got 'subtraction'"),
    (dict(digits=0), "digits must be a positive int, got 0"),
    (dict(digits=10), "digits must be at most 9, got 10"),
    (dict(digits=1, num_train=95, num_val=10), "only 100 distinct pairs; num_train + num_val = 105"),
    (dict(num_val=0), "num_val must be a positive int, got 0"),
    (dict(seed=-1), "seed must be a non-negative int, got -1"),
])
def test_task_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        lm.make_lm_task(**{**dict(num_train=100, num_val=10), **kwargs})


def test_parse_expression():
    assert lm.parse_expression("123+456", 3) == (123, 456)
    assert lm.parse_expression(" 7+45= ", 3) == (7, 45)
    with pytest.raises(ValueError, match=re.escape("--tokens: an addition is written A+B")):
        lm.parse_expression("12-3", 3)
    with pytest.raises(ValueError, match=re.escape("--tokens: the model adds numbers of at most 3 digits")):
        lm.parse_expression("1234+5", 3)


# -- the kind through the Trainer -----------------------------------------------------------------------
def test_loss_is_on_the_answer_only():
    t = Trainer(TrainConfig(**TINY, steps=1))
    assert isinstance(t.model, GPT) and t.criterion.ignore_index == lm.IGNORE
    assert t.model.max_len == t.data.seq_len                 # the prompt plus the generated answer and EOS
    src, tgt = t.batcher.next()
    logits, target = t.kind.logits(t.model, src, tgt)
    v = logits.shape[-1]
    loss = float(t.criterion(logits.reshape(-1, v), target.reshape(-1)))
    z = logits[:, 7:].reshape(-1, v).astype(np.float64)                      # the answer's positions only
    y = target[:, 7:].reshape(-1)
    manual = np.mean(np.log(np.exp(z).sum(-1)) - z[np.arange(len(z)), y])
    assert loss == pytest.approx(manual, rel=1e-5)
    acc = t.kind.token_accuracy(logits, target)
    assert acc == pytest.approx(np.mean(logits[:, 7:].argmax(-1) == target[:, 7:]))


def test_short_run_learns_and_predict_generates():
    t = Trainer(TrainConfig(**TINY, steps=300, lr=3e-3))
    before = t.evaluate()
    losses = [t.train_step().loss for _ in range(300)]
    after = t.evaluate()
    assert before.generated and after.bleu is None
    assert np.mean(losses[-20:]) < 0.75 * np.mean(losses[:10])
    assert after.token_accuracy > before.token_accuracy + 0.2
    gen = t.predict(t.data.val_src[:6])
    assert gen.shape == (6, t.data.answer_len) and gen.dtype == np.int64
    # the generated answer is model.generate's greedy continuation (KV cache), and equals the uncached one
    prompts = t.data.val_src[:6, :t.data.prompt_len]
    for use_cache in (True, False):
        out = t.model.generate(prompts, t.data.answer_len, eos_token_id=lm.EOS, pad_token_id=lm.PAD,
                               use_cache=use_cache)
        assert np.array_equal(gen[:, :out.shape[1] - t.data.prompt_len], out[:, t.data.prompt_len:])
    # exact match counts rows whose whole generated answer (digits and EOS) is the target's
    ev = t.kind.evaluate(t.model, t.data.val_src[:20], t.data.val_tgt[:20])
    full = t.predict(t.data.val_src[:20])
    assert ev.sequence_accuracy == np.mean((full == t.data.val_tgt[:20, -5:]).all(axis=1))


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
    assert ck.model_kind == "gpt" and ck.config["model"] == "gpt" and ck.config["digits"] == 3
    model = ck.build_model()
    assert isinstance(model, GPT) and model.lm_head.weight is model.wte.weight       # tying survives
    with pytest.raises(CheckpointError, match="saved from another configuration: digits"):
        Trainer.resume(tmp_path / "half.npz", {"digits": 2})
    enc = Trainer(TrainConfig(task="reverse", vocab_size=10, seq_len=5, num_train=100, num_val=10, d_model=16,
                              nhead=2, num_layers=1, dim_feedforward=32, batch_size=8, steps=1))
    with pytest.raises(CheckpointError, match=r"holds a model of kind 'gpt', not 'encoder'"):
        ck.check_model(enc.model)


# -- the CLI --------------------------------------------------------------------------------------------
def test_cli_train_evaluate_predict(tmp_path, capsys):
    path = tmp_path / "gpt.npz"
    assert main(["train", *TINY_ARGS, "--steps", "30", "--eval-every", "15", "--save", str(path)]) == 0
    out = capsys.readouterr().out
    assert max(map(len, out.splitlines())) <= 100, out
    out = re.sub(r"\n +", " ", out)                              # lines wrapped at 100 columns, joined
    assert "3-digit + 3-digit, answer reversed" in out and "1 causal decoder block," in out
    assert re.search(r"held-out +loss [0-9.]+ +token acc [0-9.]+% \(teacher-forced\) +exact match [0-9.]+% "
                     r"\(greedy\)", out), out
    log = [json.loads(line) for line in open(tmp_path / "gpt.log.jsonl")]
    assert log[0]["config"]["model"] == "gpt"
    assert main(["train", "--resume", str(path), "--steps", "35", "--quiet"]) == 0
    assert "at step 35" in capsys.readouterr().out
    assert main(["evaluate", str(path), "--num", "20"]) == 0
    out = capsys.readouterr().out
    assert max(map(len, out.splitlines())) <= 100, out
    assert re.search(r"task addition, step 35, val split: .*exact match .*\(20 examples\)",
                     re.sub(r"\n +", " ", out))
    assert main(["predict", str(path), "--random", "2"]) == 0
    out = capsys.readouterr().out
    assert max(map(len, out.splitlines())) <= 100, out
    assert out.count("  prompt ") == 2 and out.count("  generated ") == 2 and out.count("  expected ") == 2
    assert main(["predict", str(path), "--tokens", "123+456"]) == 0
    out = capsys.readouterr().out
    assert "prompt     123+456=" in out and "expected   9750$  (579)" in out


@pytest.mark.parametrize("argv,message", [
    (["train", "--model", "gpt", "--task", "reverse"], "task must be one of ['addition'] for --model gpt, "
                                                       "got 'reverse'"),
    (["train", "--model", "gpt", "--digits", "0"], "digits must be a positive int, got 0"),
    (["train", "--model", "gpt", "--digits", "1", "--num-train", "100"], "only 100 distinct pairs"),
])
def test_cli_bad_input(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_cli_predict_bad_tokens(tmp_path, capsys):
    path = tmp_path / "gpt.npz"
    assert main(["train", *TINY_ARGS, "--steps", "1", "--quiet", "--save", str(path)]) == 0
    capsys.readouterr()
    assert main(["predict", str(path), "--tokens", "1234+5"]) == 2
    assert "--tokens: the model adds numbers of at most 3 digits" in capsys.readouterr().err
    assert main(["predict", str(path), "--tokens", "3 4 5"]) == 2
    assert "--tokens: an addition is written A+B with decimal digits, e.g. 111+222" in capsys.readouterr().err


# -- the README's row, rerun: its `train` command (read from the README) gives the figures quoted there ------
GPT_TABLE = "task | model | steps | wall clock | held-out exact match | teacher-forced token acc"


def _readme_trainer():
    quoted = _readme.row(GPT_TABLE, "addition")
    config = _readme.config_of(_readme.train_command("--model", "gpt", "--digits", "3"))
    trainer = Trainer(config)
    assert config.steps == int(quoted["steps"]) and (config.seed, config.dtype) == (0, "float32")
    assert (config.num_train, config.num_val, config.digits) == (20000, 1000, 3)    # "3 + 3 digits (20000 / 1000 ..."
    assert config.pos_encoding == "learned" and "learned positions" in quoted["model"]
    assert f"{trainer.model.num_parameters():,} parameters" in quoted["model"]
    return trainer, quoted


def test_readme_row_is_its_command():
    """The row's steps, data and parameter count are those of the command printed above it (fast)."""
    _readme_trainer()


@pytest.mark.slow
def test_addition_reaches_99_percent_exact_match():
    t0 = time.perf_counter()
    trainer, quoted = _readme_trainer()
    claims = _readme.milestones(quoted["held-out exact match"], trainer.config.steps, every=200)
    evs = _readme.evaluations(trainer, claims)
    for step, ev in evs.items():
        print(f"addition: {ev} at step {step}, {time.perf_counter() - t0:.0f}s")
    ev = evs[trainer.config.steps]
    assert ev.examples == 1000 and ev.sequence_accuracy >= 0.99, ev
    for step, claim in claims.items():
        assert claim.holds(100 * evs[step].sequence_accuracy), (step, evs[step], quoted["held-out exact match"])
    assert _readme.quoted(quoted["teacher-forced token acc"]).holds(100 * ev.token_accuracy), (ev, quoted)
