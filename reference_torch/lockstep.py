"""``train --check-torch``: a PyTorch twin trained in lockstep with a ``numpy_transformer`` Trainer.

:class:`Lockstep` is a Trainer callback::

    lockstep = trainer.add_callback(Lockstep(trainer))
    trainer.train()
    abs_err, rel_err = lockstep.check_weights()
    lockstep.stats.max_loss_rel

It builds a :class:`reference_torch.models.encoder.TorchTwin` from the trainer's current weights and optimizer
state (so attaching it after ``Trainer.resume`` continues a resumed run), and after each NumPy step
takes the same step in torch: the same batch, the NumPy forward's dropout masks replayed, the same
learning rate, clipping and loss (the trainer's ``ignore_index`` and label smoothing). Every model
kind of ``--model`` has its twin:

* ``encoder``: :class:`reference_torch.models.encoder.TorchTransformerModel` (its replay path);
* ``seq2seq``: :class:`reference_torch.models.seq2seq.TorchSeq2SeqModel` built from the decoder twins
  (``twin=True``), teacher-forced as :class:`numpy_transformer.training.kinds.Seq2SeqKind` (BOS + the target
  shifted right, the source padding masked), the embeddings' shared dropout replaying both uses'
  masks (``model.dropout.masks``);
* ``gpt``: :class:`reference_torch.models.gpt.GPT` with the hand-written blocks, next-token prediction on the
  whole sequence.

:attr:`Lockstep.stats` records how far the two runs ever drift.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

import numpy_transformer as nt
from numpy_transformer.tasks import seq2seq as s2s

from .models import gpt as gpt_twin
from .models.encoder import TorchTwin
from .models.seq2seq import twin_of

__all__ = ["Lockstep", "TwinStats"]


@dataclass
class TwinStats:
    """Agreement of a ``--check-torch`` run: the largest relative loss difference seen, and weights."""

    max_loss_rel: float = 0.0
    last_loss_rel: float = 0.0
    weight_abs: float = 0.0
    weight_rel: float = 0.0
    max_weight_rel: float = 0.0
    steps: int = 0
    history: list = field(default_factory=list)        # (step, NumPy loss, torch loss)


class Lockstep:
    """Trains a torch twin of ``trainer``'s model alongside it (attach with ``trainer.add_callback``)."""

    def __init__(self, trainer):
        c = trainer.config
        self.model = trainer.model
        if c.model not in TWINS:
            raise ValueError(f"--check-torch has no torch twin for --model {c.model}; it supports {sorted(TWINS)}")
        module, forward = TWINS[c.model](trainer.model)
        self.twin = TorchTwin(trainer.model, c.optimizer, c.optimizer_kwargs(),
                              ignore_index=trainer.criterion.ignore_index, label_smoothing=c.label_smoothing,
                              module=module, forward=forward)
        self.twin.load_optimizer_state(trainer.model, trainer.optimizer)
        self.stats = TwinStats()

    def on_step(self, trainer, batch, result):
        """The torch step of the batch the NumPy model just trained on, with its dropout masks."""
        src, tgt = batch
        masks = nt.dropout_masks(trainer.model)
        if trainer.config.model == "seq2seq":                 # one Dropout, two uses: (source, target)
            masks["dropout"] = list(trainer.model.dropout.masks)
        ref_loss = self.twin.step(src, tgt, masks, lr=result.lr, clip=trainer.config.clip)
        rel = abs(result.loss - ref_loss) / max(abs(ref_loss), 1e-300)
        s = self.stats
        s.steps += 1
        s.last_loss_rel = rel
        s.max_loss_rel = max(s.max_loss_rel, rel)
        s.history.append((result.step, result.loss, ref_loss))

    def check_weights(self):
        """``(max abs, max normwise relative)`` difference of the weights now (recorded in :attr:`stats`)."""
        abs_err, rel_err = self.twin.weight_errors(self.model)
        s = self.stats
        s.weight_abs, s.weight_rel = abs_err, rel_err
        s.max_weight_rel = max(s.max_weight_rel, rel_err)
        return abs_err, rel_err


def _encoder_twin(model):
    return None, None                                     # TorchTwin's default: the encoder model's twin


def _seq2seq_twin(model):
    def forward(module, src, tgt, masks):
        masks = dict(masks)
        embed = masks.pop("dropout", None)
        module.set_dropout_masks(masks)
        src = np.asarray(src)
        logits = module(torch.as_tensor(src), torch.as_tensor(s2s.decoder_input(tgt)),
                        src_key_padding_mask=torch.as_tensor(src == s2s.PAD), embed_masks=embed)
        return logits, tgt                                # Seq2SeqKind.logits, in torch
    return twin_of(model, twin=True), forward


def _gpt_twin(model):
    def forward(module, ids, tgt, masks):
        module.set_dropout_masks(masks)
        return module(ids), tgt                           # GPTKind.logits, in torch
    return gpt_twin.to_torch(model, twin=True), forward


TWINS = {"encoder": _encoder_twin, "seq2seq": _seq2seq_twin, "gpt": _gpt_twin}
