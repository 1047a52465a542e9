"""Learning-rate schedulers, as ``torch.optim.lr_scheduler`` (2.x): the same classes, arguments, state.

A scheduler wraps an optimizer. Constructing it records each group's ``"initial_lr"`` (once; the
scheduler's ``base_lrs``) and sets the groups' ``"lr"`` for epoch 0; each :meth:`LRScheduler.step`
(called after ``optimizer.step()``) advances ``last_epoch`` by one and writes the new learning rates
into ``optimizer.param_groups[i]["lr"]``; :meth:`LRScheduler.get_last_lr` returns them. Most classes
update *recursively* from the current ``group["lr"]`` exactly as torch does (so a learning rate
changed by hand carries on), and use their closed form only for the deprecated ``step(epoch)``.

Typical warm-up then cosine decay::

    warmup = LinearLR(opt, start_factor=0.01, total_iters=100)
    decay = CosineAnnealingLR(opt, T_max=900)
    sched = SequentialLR(opt, [warmup, decay], milestones=[100])
    for batch in batches:
        ...; opt.step(); sched.step()
"""

from __future__ import annotations

import math
import types
import warnings
from bisect import bisect_right
from collections import Counter

import numpy as np

from ..utils.checks import check_number
from .optimizer import Optimizer

__all__ = ["LRScheduler", "LambdaLR", "StepLR", "MultiStepLR", "ConstantLR", "LinearLR", "ExponentialLR",
           "CosineAnnealingLR", "SequentialLR"]

EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being deprecated where possible. "
    "Please use `scheduler.step()` to step the scheduler. During the deprecation, if epoch is different from "
    "None, the closed form is used instead of the new chainable form, where available.")


def _check_int(value, name, low):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    return int(value)


def _check_optimizer(optimizer):
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{type(optimizer).__name__} is not an Optimizer (give the nt.optim optimizer "
                        "whose learning rates the scheduler sets)")


class LRScheduler:
    """Base class: ``step``, ``get_last_lr``, ``state_dict``/``load_state_dict``, ``last_epoch``, ``base_lrs``.

    Parameters
    ----------
    optimizer : nt.optim.Optimizer
    last_epoch : int, default -1
        ``-1`` starts afresh (and sets each group's ``"initial_lr"`` to its ``"lr"`` unless a scheduler
        already did). A value ``>= 0`` resumes after that epoch: the groups must hold ``"initial_lr"``
        (KeyError otherwise, as torch), e.g. from a loaded optimizer state.

    Subclasses define ``get_lr()`` (the recursive update from the groups' current ``lr``) and
    optionally ``_get_closed_form_lr()``.
    """

    _get_lr_called_within_step = False
    _is_initial = False

    def __init__(self, optimizer, last_epoch=-1):
        _check_optimizer(optimizer)
        last_epoch = _check_int(last_epoch, "last_epoch", -1)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] when resuming a "
                                   f"scheduler with last_epoch={last_epoch} >= 0: load the optimizer state that "
                                   "was saved with the scheduler first, or start with last_epoch=-1")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self):
        """Set the epoch-``last_epoch + 1`` learning rates (the constructor's step)."""
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self):  # pragma: no cover - abstract
        """The learning rates for ``last_epoch`` (call :meth:`get_last_lr` to read the current ones)."""
        raise NotImplementedError

    def _warn_get_lr_called_within_step(self):
        if not self._get_lr_called_within_step:
            warnings.warn("To get the last learning rate computed by the scheduler, please use `get_last_lr()`.",
                          UserWarning, stacklevel=3)

    def get_last_lr(self):
        """The learning rates the last step set, one per parameter group (a copy)."""
        return list(self._last_lr)

    def step(self, epoch=None):
        """Advance one epoch (or, deprecated as in torch, jump to ``epoch`` by the closed form) and set
        every group's ``"lr"``. Call it after ``optimizer.step()``; calling it first warns, as torch."""
        if self._step_count == 1 and not getattr(self.optimizer, "_opt_called", False):
            warnings.warn("Detected call of `lr_scheduler.step()` before `optimizer.step()`. You should call "
                          "them in the opposite order: `optimizer.step()` before `lr_scheduler.step()`, or the "
                          "first value of the learning rate schedule is skipped.", UserWarning, stacklevel=2)
        self._step_count += 1
        if epoch is not None:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
            epoch = _check_int(epoch, "epoch", 0)
        self._update_lr(epoch)

    def _update_lr(self, epoch=None):
        groups = self.optimizer.param_groups
        if len(groups) != len(self.base_lrs):
            raise ValueError(f"the optimizer has {len(groups)} parameter groups, but the scheduler was built for "
                             f"{len(self.base_lrs)}; build the scheduler after adding every group")
        self._get_lr_called_within_step = True
        try:
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch
                values = self._get_closed_form_lr() if hasattr(self, "_get_closed_form_lr") else self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        for group, lr in zip(groups, values):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in groups]

    def _current_lrs(self):
        return [group["lr"] for group in self.optimizer.param_groups]

    # -- state ------------------------------------------------------------------------------------
    def state_dict(self):
        """Every attribute but the optimizer, as torch (``last_epoch``, ``base_lrs``, ``_step_count``,
        ``_last_lr``, the class's arguments, ...); lists are copies."""
        return {k: (type(v)(v) if isinstance(v, (list, Counter)) else v)
                for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict):
        """Restore :meth:`state_dict`'s values (torch's too). Keys this scheduler does not have are
        refused (ValueError, nothing changed)."""
        if not isinstance(state_dict, dict):
            raise ValueError(f"scheduler state_dict must be a dict (as state_dict() returns), got "
                             f"{type(state_dict).__name__}")
        unknown = sorted(set(state_dict) - set(self.state_dict()))
        if unknown:
            raise ValueError(f"{type(self).__name__} state holds unknown entries {unknown} (state of another "
                             "scheduler class?)")
        if "last_epoch" in state_dict:
            _check_int(state_dict["last_epoch"], "last_epoch", -1)
        if "base_lrs" in state_dict and len(state_dict["base_lrs"]) != len(self.optimizer.param_groups):
            raise ValueError(f"scheduler state has {len(state_dict['base_lrs'])} base_lrs, the optimizer has "
                             f"{len(self.optimizer.param_groups)} parameter groups")
        self.__dict__.update({k: (list(v) if isinstance(v, tuple) else v) for k, v in state_dict.items()})

    def __repr__(self):
        return f"{type(self).__name__}(last_epoch={self.last_epoch}, lr={self.get_last_lr()})"


class LambdaLR(LRScheduler):
    """``lr = base_lr * lr_lambda(last_epoch)`` (one function, or one per parameter group).

    ``state_dict()`` stores ``None`` for plain functions and lambdas and the ``__dict__`` of callable
    objects, as torch; ``load_state_dict`` updates those objects.
    """

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        n = len(optimizer.param_groups)
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != n:
                raise ValueError(f"Expected {n} lr_lambdas, but got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * n
        for fn in self.lr_lambdas:
            if not callable(fn):
                raise TypeError(f"lr_lambda should be a function, but got {type(fn).__name__}")
        super().__init__(optimizer, last_epoch)

    def state_dict(self):
        state = {k: v for k, v in super().state_dict().items() if k != "lr_lambdas"}
        state["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else fn.__dict__.copy()
                               for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict):
        state = dict(state_dict)
        lambdas = state.pop("lr_lambdas", [None] * len(self.lr_lambdas))
        if len(lambdas) != len(self.lr_lambdas):
            raise ValueError(f"scheduler state has {len(lambdas)} lr_lambdas, this one {len(self.lr_lambdas)}")
        super().load_state_dict(state)
        for fn, saved in zip(self.lr_lambdas, lambdas):
            if saved is not None:
                fn.__dict__.update(saved)

    def get_lr(self):
        self._warn_get_lr_called_within_step()
        return [base_lr * lmbda(self.last_epoch) for lmbda, base_lr in zip(self.lr_lambdas, self.base_lrs)]


class StepLR(LRScheduler):
    """Multiply the lr by ``gamma`` every ``step_size`` epochs: ``base_lr * gamma ** (epoch // step_size)``."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size = _check_int(step_size, "step_size", 1)
        self.gamma = check_number(gamma, "gamma")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_get_lr_called_within_step()
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._current_lrs()
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * self.gamma ** (self.last_epoch // self.step_size) for base_lr in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiply the lr by ``gamma`` at each milestone epoch (a milestone listed twice multiplies twice)."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        if isinstance(milestones, (str, bytes)) or not hasattr(milestones, "__iter__"):
            raise ValueError(f"milestones must be a list of ints, got {milestones!r}")
        self.milestones = Counter(_check_int(m, "each milestone", 0) for m in milestones)
        self.gamma = check_number(gamma, "gamma")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_get_lr_called_within_step()
        if self.last_epoch not in self.milestones:
            return self._current_lrs()
        return [group["lr"] * self.gamma ** self.milestones[self.last_epoch] for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        milestones = sorted(self.milestones.elements())
        return [base_lr * self.gamma ** bisect_right(milestones, self.last_epoch) for base_lr in self.base_lrs]


class ConstantLR(LRScheduler):
    """``base_lr * factor`` until epoch ``total_iters``, then ``base_lr``."""

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        if isinstance(factor, bool) or not isinstance(factor, (int, float, np.integer, np.floating)) \
                or not 0 <= factor <= 1:
            raise ValueError(f"Constant multiplicative factor expected to be between 0 and 1, got {factor!r}")
        self.factor = factor
        self.total_iters = _check_int(total_iters, "total_iters", 0)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_get_lr_called_within_step()
        if self.last_epoch == 0:
            return [group["lr"] * self.factor for group in self.optimizer.param_groups]
        if self.last_epoch != self.total_iters:
            return self._current_lrs()
        return [group["lr"] * (1.0 / self.factor) for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * (self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor))
                for base_lr in self.base_lrs]


class LinearLR(LRScheduler):
    """Scale the lr linearly from ``start_factor * base_lr`` to ``end_factor * base_lr`` over
    ``total_iters`` epochs, then keep it (torch updates it recursively by the ratio of factors)."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5, last_epoch=-1):
        start_factor = check_number(start_factor, "start_factor")
        end_factor = check_number(end_factor, "end_factor")
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and less or equal "
                             f"to 1, got start_factor={start_factor!r}")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1, "
                             f"got end_factor={end_factor!r}")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = _check_int(total_iters, "total_iters", 1)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_get_lr_called_within_step()
        if self.last_epoch == 0:
            return [group["lr"] * self.start_factor for group in self.optimizer.param_groups]
        if self._is_initial or self.last_epoch > self.total_iters:
            return self._current_lrs()
        return [group["lr"] * (1.0 + (self.end_factor - self.start_factor)
                               / (self.total_iters * self.start_factor
                                  + (self.last_epoch - 1) * (self.end_factor - self.start_factor)))
                for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * (self.start_factor + (self.end_factor - self.start_factor)
                           * min(self.total_iters, self.last_epoch) / self.total_iters)
                for base_lr in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiply the lr by ``gamma`` every epoch: ``base_lr * gamma ** epoch``."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = check_number(gamma, "gamma")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_get_lr_called_within_step()
        if self._is_initial:
            return self._current_lrs()
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * self.gamma ** self.last_epoch for base_lr in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Cosine decay from ``base_lr`` to ``eta_min`` over ``T_max`` epochs (then back up, periodically).

    Closed form ``eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2``; like torch, each
    step updates recursively::

        lr_t = eta_min + (lr_{t-1} - eta_min) * (1 + cos(pi t / T_max)) / (1 + cos(pi (t - 1) / T_max))

    (at the bottom of each period, where that ratio is 0/0, it adds the closed form's step instead).
    """

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        self.T_max = _check_int(T_max, "T_max", 1)
        self.eta_min = check_number(eta_min, "eta_min")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_get_lr_called_within_step()
        groups = self.optimizer.param_groups
        if self._is_initial:
            return self._current_lrs()
        if self._step_count == 1 and self.last_epoch > 0:
            return [self.eta_min
                    + (base_lr - self.eta_min) * (1 + math.cos((self.last_epoch) * math.pi / self.T_max)) / 2
                    for base_lr in self.base_lrs]
        if (self.last_epoch - 1 - self.T_max) % (2 * self.T_max) == 0:
            return [group["lr"] + (base_lr - self.eta_min) * (1 - math.cos(math.pi / self.T_max)) / 2
                    for base_lr, group in zip(self.base_lrs, groups)]
        return [(1 + math.cos(math.pi * self.last_epoch / self.T_max))
                / (1 + math.cos(math.pi * (self.last_epoch - 1) / self.T_max))
                * (group["lr"] - self.eta_min) + self.eta_min for group in groups]

    def _get_closed_form_lr(self):
        return [self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base_lr in self.base_lrs]


class SequentialLR(LRScheduler):
    """Run ``schedulers[0]`` until ``milestones[0]``, then ``schedulers[1]`` (restarted at its epoch 0),
    and so on; ``len(milestones) == len(schedulers) - 1``, increasing.

    As torch: building it resets the groups' lr to ``initial_lr``, undoes the sub-schedulers'
    constructor steps and redoes the first one's; its ``state_dict()`` holds theirs under ``"_schedulers"``.
    """

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        _check_optimizer(optimizer)
        schedulers = list(schedulers)
        if len(schedulers) < 1:
            raise ValueError("SequentialLR expects at least one scheduler, but got no scheduler.")
        for i, s in enumerate(schedulers):
            if not isinstance(s, LRScheduler):
                raise TypeError(f"SequentialLR: schedulers[{i}] is a {type(s).__name__}, not an LRScheduler")
            if s.optimizer is not optimizer:
                raise ValueError(f"SequentialLR expects all schedulers to belong to the same optimizer, but "
                                 f"schedulers[{i}] ({type(s).__name__}) has another one")
        milestones = [_check_int(m, "each milestone", 1) for m in milestones]
        if len(milestones) != len(schedulers) - 1:
            raise ValueError("Sequential Schedulers expects number of schedulers provided to be one more than the "
                             f"number of milestone points, but got number of schedulers {len(schedulers)} and the "
                             f"number of milestones to be equal to {len(milestones)}")
        if any(a >= b for a, b in zip(milestones, milestones[1:])):
            raise ValueError(f"milestones must increase, got {milestones}")
        last_epoch = _check_int(last_epoch, "last_epoch", -1)
        self._schedulers = schedulers
        self._milestones = milestones
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        for s in schedulers:                      # undo each scheduler's constructor step
            self._undo(s)
        idx = bisect_right(self._milestones, 0)
        self._schedulers[idx]._initial_step()
        self._last_lr = schedulers[idx].get_last_lr()

    @staticmethod
    def _undo(s):
        if isinstance(s, SequentialLR):
            for inner in s._schedulers:
                SequentialLR._undo(inner)
        else:
            s.last_epoch -= 1

    def step(self):
        """Advance one epoch: the scheduler whose span this is steps (or restarts at a milestone)."""
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            scheduler._update_lr(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()

    def state_dict(self):
        state = {k: (list(v) if isinstance(v, list) else v) for k, v in self.__dict__.items()
                 if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict):
        state = dict(state_dict)
        subs = state.pop("_schedulers", None)
        if subs is not None and len(subs) != len(self._schedulers):
            raise ValueError(f"SequentialLR state holds {len(subs)} schedulers, this one {len(self._schedulers)}")
        unknown = sorted(set(state) - {"_milestones", "last_epoch", "_last_lr"})
        if unknown:
            raise ValueError(f"SequentialLR state holds unknown entries {unknown}")
        self.__dict__.update(state)
        for s, sub in zip(self._schedulers, subs or []):
            s.load_state_dict(sub)
