"""``train --check-torch``: a PyTorch twin trained in lockstep with a ``numpy_transformer`` Trainer.

:class:`Lockstep` is a Trainer callback::

    lockstep = trainer.add_callback(Lockstep(trainer))
    trainer.train()
    abs_err, rel_err = lockstep.check_weights()
    lockstep.stats.max_loss_rel

It builds a :class:`reference_torch.model.TorchTwin` from the trainer's current weights and optimizer
state (so attaching it after ``Trainer.resume`` continues a resumed run), and after each NumPy step
takes the same step in torch: the same batch, the NumPy forward's dropout masks replayed, the same
learning rate and clipping. :attr:`Lockstep.stats` records how far the two runs ever drift.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy_transformer as nt

from .model import TorchTwin

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
        self.twin = TorchTwin(trainer.model, c.optimizer, c.optimizer_kwargs(), label_smoothing=c.label_smoothing)
        self.twin.load_optimizer_state(trainer.model, trainer.optimizer)
        self.stats = TwinStats()

    def on_step(self, trainer, batch, result):
        """The torch step of the batch the NumPy model just trained on, with its dropout masks."""
        src, tgt = batch
        ref_loss = self.twin.step(src, tgt, nt.dropout_masks(trainer.model), lr=result.lr, clip=trainer.config.clip)
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
