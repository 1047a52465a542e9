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
* ``choices.py`` — :data:`OPTIMIZERS` (the names ``train --optimizer`` takes) and :func:`make_optimizer`.

The package's names are its submodules' ``__all__`` (``utils.lazy.reexport``); ``lr_scheduler`` stays a
namespace of its own, as ``torch.optim.lr_scheduler``.
"""

from ..utils.lazy import reexport
from . import lr_scheduler

__all__ = [*reexport(__name__, globals(), skip=("lr_scheduler",)), "lr_scheduler"]
