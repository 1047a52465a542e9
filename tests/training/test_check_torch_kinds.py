"""``train --check-torch`` for ``--model seq2seq`` and ``--model gpt``: the torch twins
(reference_torch.models.seq2seq with the decoder twins, reference_torch.models.gpt) train in lockstep with the
NumPy model in float64, dropout active and replayed, and the report is the encoder's. Without the
replayed masks the same check reports a large difference (it can fail)."""

from __future__ import annotations

import re

import pytest
import torch

from numpy_transformer.cli import main
from numpy_transformer.training.trainer import TrainConfig, Trainer

torch.set_num_threads(1)

SMALL = ["--num-train", "300", "--num-val", "20", "--d-model", "16", "--nhead", "2", "--dim-feedforward", "32",
         "--batch-size", "8", "--warmup", "4", "--dtype", "float64", "--dropout", "0.1"]
KINDS = {
    "seq2seq": ["--model", "seq2seq", "--task", "reverse", "--vocab-size", "10", "--seq-len", "5"],
    "gpt": ["--model", "gpt", "--digits", "2"],
}
REPORT = (r"torch twin: (\d+) lockstep steps; largest loss difference ([0-9.e+-]+) \(relative\); final weights max "
          r"abs diff [0-9.e+-]+, max relative ([0-9.e+-]+)")


@pytest.mark.parametrize("extra", [[], ["--layers", "2", "--norm-first", "--pos-encoding", "learned",
                                        "--activation", "gelu", "--optimizer", "adamw", "--clip", "0.5"]],
                         ids=["default", "options"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_train_check_torch(kind, extra, tmp_path, capsys):
    if kind == "gpt" and "--norm-first" in extra:
        extra = [a for a in extra if a != "--norm-first"]               # GPT is pre-LN by construction
    path = tmp_path / "run.npz"
    rc = main(["train", *KINDS[kind], *SMALL, *extra, "--steps", "10", "--eval-every", "5", "--check-torch",
               "--save", str(path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert max(map(len, out.splitlines())) <= 100, out
    joined = re.sub(r"\n +", " ", out)
    assert "check-torch: a PyTorch twin trains in lockstep" in joined
    assert re.search(r"step +5/10 .*\| torch: max loss diff [0-9.e+-]+ rel, weights [0-9.e+-]+ rel", joined), out
    m = re.search(REPORT, joined)
    assert m, out
    steps, loss_rel, weight_rel = int(m.group(1)), float(m.group(2)), float(m.group(3))
    assert steps == 10 and loss_rel < 1e-9 and weight_rel < 1e-8, out
    # resumed: the twin starts from the checkpoint's weights and optimizer state
    assert main(["train", "--resume", str(path), "--steps", "14", "--quiet", "--check-torch"]) == 0
    m = re.search(REPORT, re.sub(r"\n +", " ", capsys.readouterr().out))
    assert m and int(m.group(1)) == 4 and float(m.group(2)) < 1e-9 and float(m.group(3)) < 1e-8


def _config(kind, **kw):
    base = dict(num_train=300, num_val=20, d_model=16, nhead=2, num_layers=1, dim_feedforward=32, batch_size=8,
                warmup=4, dtype="float64", dropout=0.1, steps=6)
    base.update(dict(model="seq2seq", task="reverse", vocab_size=10, seq_len=5) if kind == "seq2seq"
                else dict(model="gpt", digits=2))
    base.update(kw)
    return TrainConfig(**base)


@pytest.mark.parametrize("kind", list(KINDS))
def test_lockstep_needs_the_replayed_masks(kind, monkeypatch):
    """The same run with the mask replay switched off (the twins draw torch's own masks) drifts far
    beyond the tolerance: the lockstep's agreement is the masks', not an accident."""
    from reference_torch import lockstep as L
    from reference_torch.nn import module as R
    trainer = Trainer(_config(kind))
    good = trainer.add_callback(L.Lockstep(trainer))
    trainer.train()
    assert good.stats.steps == 6 and good.stats.max_loss_rel < 1e-9 and good.check_weights()[1] < 1e-8

    monkeypatch.setattr(R, "set_dropout_masks", lambda module, masks, strict=True: None)
    trainer = Trainer(_config(kind))
    bad = trainer.add_callback(L.Lockstep(trainer))
    trainer.train()
    assert bad.stats.max_loss_rel > 1e-4 and bad.check_weights()[1] > 1e-4


def test_seq2seq_twin_replays_both_uses_of_the_embedding_dropout():
    """Seq2SeqModel's one Dropout runs on the source and on the target: its ``masks`` keep both, and
    the twin replaying them gives the NumPy logits; replaying the target's mask twice does not."""
    import numpy as np

    import numpy_transformer as nt
    from numpy_transformer.tasks import seq2seq as s2s
    from reference_torch.models.seq2seq import twin_of
    m = nt.Seq2SeqModel(12, 12, d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=32,
                        dropout=0.3, max_len=8, dtype=np.float64, seed=0)
    rng = np.random.default_rng(0)
    src, tgt = rng.integers(3, 12, (3, 6)), rng.integers(3, 12, (3, 6))
    src[0, 4:] = s2s.PAD
    out = m(src, tgt, src_key_padding_mask=src == s2s.PAD)
    masks = nt.dropout_masks(m)
    embed = m.dropout.masks
    assert len(embed) == 2 and embed[0].shape == embed[1].shape and not np.array_equal(embed[0], embed[1])
    assert np.array_equal(masks["dropout"], embed[1])                    # last_mask: the target's use
    m(src, tgt)
    assert len(m.dropout.masks) == 2                                     # a new pass starts a new list
    twin = twin_of(m, twin=True).train()
    twin.set_dropout_masks({k: v for k, v in masks.items() if k != "dropout"})

    def run(pair):
        with torch.no_grad():
            return twin(torch.as_tensor(src), torch.as_tensor(tgt), torch.as_tensor(src == s2s.PAD),
                        embed_masks=pair).numpy()
    assert np.abs(run(embed) - out).max() < 1e-12
    assert np.abs(run([embed[1], embed[1]]) - out).max() > 1e-3


def test_train_text_check_torch(tmp_path, capsys):
    """``train --model gpt --text FILE --check-torch``: the GPT twin trains on the same text windows in
    lockstep (float64, dropout replayed), and agrees to rounding."""
    text = tmp_path / "t.txt"
    text.write_text("it was the best of times, it was the worst of times.\n" * 12, encoding="utf-8")
    rc = main(["train", "--model", "gpt", "--text", str(text), "--seq-len", "16", "--d-model", "16", "--nhead", "2",
               "--dim-feedforward", "32", "--batch-size", "8", "--dtype", "float64", "--dropout", "0.1",
               "--steps", "6", "--eval-every", "0", "--quiet", "--check-torch", "--no-log"])
    out = capsys.readouterr().out
    assert rc == 0, out
    m = re.search(REPORT, re.sub(r"\n +", " ", out))
    assert m and int(m.group(1)) == 6 and float(m.group(2)) < 1e-9 and float(m.group(3)) < 1e-8, out
