"""Optimizers, learning-rate schedulers and gradient clipping with ``torch.optim``'s exact update rules.

Every rule is written out in the order torch (2.x, single-tensor CPU path) evaluates it, so a float64
run matches torch's to rounding; ``state_dict()`` has torch's layout, and torch's loads here.

* ``optimizer.py`` — :class:`Optimizer`: ``param_groups``, ``add_param_group``, ``zero_grad``, ``step``,
  ``state_dict``/``load_state_dict``.
* ``sgd.py`` — :class:`SGD` (momentum, dampening, Nesterov, weight decay, maximize).
* ``adam.py`` — :class:`Adam`, :class:`AdamW` (amsgrad, maximize, coupled or decoupled weight decay).
* ``clip.py`` — :func:`clip_grad_norm_` (any ``norm_type``), as ``torch.nn.utils.clip_grad_norm_``.
* ``lr_scheduler.py`` — ``nt.optim.lr_scheduler.LambdaLR``, ``StepLR``, ``MultiStepLR``, ``ConstantLR``,
  ``LinearLR``, ``ExponentialLR``, ``CosineAnnealingLR``, ``SequentialLR``, as ``torch.optim.lr_scheduler``.
* ``schedules.py`` — the paper's warm-up formula :func:`noam_lr` and its callable forms.
"""

from . import lr_scheduler
from .adam import Adam, AdamW
from .clip import clip_grad_norm_
from .optimizer import Optimizer
from .schedules import ConstantSchedule, WarmupInverseSqrtSchedule, noam_lr
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "clip_grad_norm_", "lr_scheduler", "noam_lr",
           "WarmupInverseSqrtSchedule", "ConstantSchedule", "OPTIMIZERS", "make_optimizer"]

OPTIMIZERS = {"sgd": SGD, "adam": Adam, "adamw": AdamW}


def make_optimizer(name, params, **kwargs):
    """``OPTIMIZERS[name](params, **kwargs)`` with a clear error for an unknown name."""
    if name not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {sorted(OPTIMIZERS)}, got {name!r}")
    return OPTIMIZERS[name](params, **kwargs)
