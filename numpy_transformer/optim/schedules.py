"""The paper's warm-up schedule as plain functions ``step -> lr`` (step counts from 1).

``LambdaLR`` turns one into a scheduler: the training loop (``nt.training.trainer.Trainer``, the ``train``
command) builds its optimizer with ``lr=1.0`` and ``LambdaLR(opt, lambda epoch: schedule(epoch + 1))``,
so each step's learning rate is exactly ``schedule(step)`` (the Annotated Transformer's recipe).
"""

from __future__ import annotations

import numpy as np

from ..utils.checks import check_number, check_positive_int

__all__ = ["noam_lr", "WarmupInverseSqrtSchedule", "ConstantSchedule"]


def noam_lr(step, d_model, warmup, factor=1.0):
    """The paper's schedule ``factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)`` (step >= 1):
    a linear warm-up for ``warmup`` steps, then decay as ``1/sqrt(step)``; the peak, at ``step = warmup``,
    is ``factor / sqrt(d_model * warmup)``."""
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 1:
        raise ValueError(f"step counts from 1, got {step!r}")
    check_positive_int(d_model, "d_model")
    if isinstance(warmup, bool) or not isinstance(warmup, (int, np.integer)) or warmup < 1:
        raise ValueError(f"warmup must be an int >= 1, got {warmup!r}")
    check_number(factor, "factor")
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


class WarmupInverseSqrtSchedule:
    """The paper's warm-up schedule as a callable ``step -> lr`` (see :func:`noam_lr`)."""

    def __init__(self, d_model, warmup=4000, factor=1.0):
        noam_lr(1, d_model, warmup, factor)                  # validates the three arguments
        self.d_model, self.warmup, self.factor = d_model, warmup, factor

    def __call__(self, step):
        return noam_lr(step, self.d_model, self.warmup, self.factor)

    @property
    def peak(self):
        return self(self.warmup)

    def __repr__(self):
        return f"WarmupInverseSqrtSchedule(d_model={self.d_model}, warmup={self.warmup}, factor={self.factor})"


class ConstantSchedule:
    """``step -> lr`` always the same."""

    def __init__(self, lr):
        self.lr = check_number(lr, "lr", low=0)

    def __call__(self, step):
        return self.lr

    peak = property(lambda self: self.lr)

    def __repr__(self):
        return f"ConstantSchedule(lr={self.lr})"
