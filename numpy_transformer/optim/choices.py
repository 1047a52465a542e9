"""The optimizers by name (``train --optimizer``, ``TrainConfig.optimizer``): the vocabulary, defined
once, and :func:`make_optimizer`."""

from __future__ import annotations

from .adam import Adam, AdamW
from .sgd import SGD

__all__ = ["OPTIMIZERS", "make_optimizer"]

#: the optimizers ``train`` offers, by their torch.optim names in lower case
OPTIMIZERS = {"sgd": SGD, "adam": Adam, "adamw": AdamW}


def make_optimizer(name, params, **kwargs):
    """``OPTIMIZERS[name](params, **kwargs)`` with a clear error for an unknown name."""
    if name not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {sorted(OPTIMIZERS)}, got {name!r}")
    return OPTIMIZERS[name](params, **kwargs)
