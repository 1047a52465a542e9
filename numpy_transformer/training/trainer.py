"""The training loop: a :class:`TrainConfig`, and a :class:`Trainer` that owns the model, optimizer,
schedule, data and batcher, takes steps, evaluates, and saves/resumes checkpoints exactly.

One step (the scheduler is ``LambdaLR(optimizer, lambda epoch: schedule(epoch + 1))`` on an optimizer
built with ``lr=1.0``, so step ``s`` (from 1) runs at exactly ``schedule(s)``)::

    logits = model(src)                        # (B, S, V), dropout active
    loss = crit(logits.reshape(-1, V), tgt.reshape(-1))   # torch's layout: class axis at dim 1
    model.backward(crit.backward().reshape(logits.shape))
    clip_grad_norm_(params, clip)              # when clip > 0
    optimizer.step()
    scheduler.step()                           # the next step's lr

Everything random (initialisation, dropout masks, data, batch order) derives from ``seed``; a
checkpoint stores the optimizer state, the batcher's state and every dropout generator's state, so
``resume`` + the remaining steps gives bit-for-bit the weights of the uninterrupted run.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass

import numpy as np

from ..nn.modes import eval_mode
from ..optim import OPTIMIZERS, clip_grad_norm_
from ..study.trace import trace as _trace_block
from ..tasks.data import Batcher
from .checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from .config import SCHEDULES, TrainConfig
from .evaluation import EvalResult
from .interrupts import deferred_interrupts
from .kinds import kind_for

__all__ = ["TrainConfig", "Trainer", "StepResult", "EvalResult", "SCHEDULES", "TrainingDiverged"]


class TrainingDiverged(FloatingPointError):
    """A training step's loss was not finite (nan or inf: the run diverged, e.g. a learning rate far too
    high), or, with clipping, its gradient norm. ``step`` is the failed step, ``loss`` its loss; the
    trainer is left after step ``step - 1``, whose weights produced it, so nothing of it should be saved
    over a good checkpoint (:meth:`Trainer.save` refuses non-finite weights)."""

    def __init__(self, step: int, loss: float | None, what: str | None = None):
        super().__init__(f"training diverged: {what or f'the loss of step {step} is {loss}'}")
        self.step, self.loss = step, loss


@dataclass
class StepResult:
    step: int
    loss: float
    accuracy: float
    tokens: int
    lr: float
    grad_norm: float
    seconds: float
    trace: object = None          # the step's nt.trace Trace when the step was traced


class Trainer:
    """Builds everything from a :class:`TrainConfig` and trains it.

    Parameters
    ----------
    config : TrainConfig

    Callbacks
    ---------
    :meth:`add_callback` attaches an object whose ``on_step(trainer, batch, result)`` runs after every
    step's update (``batch`` is the ``(src, tgt)`` the model trained on, ``result`` the
    :class:`StepResult`; ``nt.dropout_masks(trainer.model)`` still holds that step's masks). Callbacks
    are not saved in checkpoints: attach them again after :meth:`resume`. ``train --check-torch``
    attaches ``reference_torch.lockstep.Lockstep`` (a PyTorch twin trained in lockstep) this way.
    """

    def __init__(self, config):
        self.config = config
        c = config
        self.kind = kind_for(c)
        self.data = self.kind.make_data(c)
        seeds = np.random.SeedSequence(c.seed).spawn(2)
        self.model = self.kind.build_model(c, self.data, seed=np.random.default_rng(seeds[0]))
        self.model.checkpoint = bool(c.checkpoint_activations)
        self.optimizer = OPTIMIZERS[c.optimizer](self.model.parameters(), **c.optimizer_kwargs())
        self.schedule = c.make_schedule()
        self.scheduler = c.make_scheduler(self.optimizer)
        self.criterion = self.kind.criterion(c)
        self.batcher = Batcher(self.data.train_src, self.data.train_tgt, c.batch_size,
                               seed=np.random.default_rng(seeds[1]))
        self.step = 0
        self.callbacks = []
        self.run_settings = {}          # what the `train` command stored with the checkpoint (resume)

    def add_callback(self, callback):
        """Call ``callback.on_step(trainer, (src, tgt), result)`` after every step; returns ``callback``."""
        self.callbacks.append(callback)
        return callback

    # -- training -----------------------------------------------------------------------------------
    def train_step(self, trace=False):
        """One optimisation step on the next training batch; returns a :class:`StepResult`.

        ``trace=True`` runs the forward and backward under ``nt.trace`` (the result's ``trace``; the
        parameter gradients are recorded before clipping). Tracing changes no number of the run.
        """
        t0 = time.perf_counter()
        undo = self._undo_point()
        try:                  # anything raised before the update (Ctrl-C included) undoes the step's draws
            src, tgt = self.batcher.next()
            self.step += 1
            lr = self.optimizer.param_groups[0]["lr"]         # the scheduler's, i.e. schedule(step)
            self.model.train()
            self.optimizer.zero_grad()
            with (_trace_block(self.model) if trace else contextlib.nullcontext()) as traced:
                logits, target = self.kind.logits(self.model, src, tgt)           # (B, S, V), (B, S)
                v = logits.shape[-1]                      # torch's layout: one (N, V) row per position
                loss = float(self.criterion(logits.reshape(-1, v), target.reshape(-1)))
                if not math.isfinite(loss):                # diverged: no update from a nan/inf loss
                    raise TrainingDiverged(self.step, loss)
                self.model.backward(self.criterion.backward().reshape(logits.shape))
            grad_norm = (float(clip_grad_norm_(self.model.parameters(), self.config.clip)) if self.config.clip
                         else float("nan"))
            if self.config.clip and not math.isfinite(grad_norm):     # clipping would spread it to every weight
                raise TrainingDiverged(self.step, loss, f"the gradient norm of step {self.step} is {grad_norm}")
        except BaseException:
            self._rollback(undo)
            raise
        self._in_update = True                  # Ctrl-C waits (see train): weights change from here on
        try:
            self.optimizer.step()
            self.scheduler.step()
        except BaseException:
            self._broken = f"step {self.step} was interrupted inside the optimizer update"
            raise
        finally:
            self._in_update = False
        acc = self.kind.token_accuracy(logits, target)
        result = StepResult(self.step, loss, acc, int(tgt.size), lr, grad_norm, time.perf_counter() - t0, traced)
        for callback in self.callbacks:
            callback.on_step(self, (src, tgt), result)
        return result

    def train(self, steps=None, callback=None, trace_every=0):
        """Train until ``steps`` total steps (default ``config.steps``); ``callback(StepResult)`` after each.

        ``trace_every=N`` traces every step whose number is a multiple of N (see :meth:`train_step`).
        A step whose loss is not finite raises :class:`TrainingDiverged` with the trainer left after
        the step before (nothing of the failed step applied).
        """
        target = self.config.steps if steps is None else steps
        # Ctrl-C, SIGTERM, SIGHUP (when they raise KeyboardInterrupt, as in `train`) wait for the step
        # to end, so the trainer they surface from is consistent: save + resume continue it exactly. A
        # second one raises at once, except inside the optimizer update; a step cut short before its
        # update is undone (train_step). See numpy_transformer.training.interrupts.
        with deferred_interrupts(busy=lambda: self._in_update) as interrupt:
            while self.step < target:
                r = self.train_step(trace=bool(trace_every) and (self.step + 1) % trace_every == 0)
                if callback is not None:
                    callback(r)
                interrupt.check(self.step)
        return self

    # -- interruption ----------------------------------------------------------------------------------
    _in_update = False
    _broken = None

    def _undo_point(self):
        """What a step changes before its update: step count, batcher and dropout generator states."""
        b = self.batcher
        return (self.step, b.rng.bit_generator.state, b.perm, b.pos, b.epoch,
                {name: g.bit_generator.state for name, g in self.model.generators().items()})

    def _rollback(self, undo):
        step, rng_state, perm, pos, epoch, gens = undo
        self.step = step
        b = self.batcher
        b.rng.bit_generator.state, b.perm, b.pos, b.epoch = rng_state, perm, pos, epoch
        for name, g in self.model.generators().items():
            g.bit_generator.state = gens[name]
        self.optimizer.zero_grad()

    def predict(self, src):
        """Greedy prediction in eval mode (no dropout): the encoder's argmax per position (B, S); the
        seq2seq model's generated target rows (B, tgt_len), PAD after the EOS."""
        with eval_mode(self.model):
            return self.kind.predict(self.model, src, self.data)

    def evaluate(self, split="val", max_examples=None, batch_size=250):
        return self.kind.evaluate(self.model, *self.data.split(split), criterion=self.criterion,
                                  max_examples=max_examples, batch_size=batch_size)

    # -- checkpoints --------------------------------------------------------------------------------
    def save(self, path, run: dict | None = None):
        """Write a checkpoint that :meth:`resume` continues exactly; ``run`` (a JSON-able dict: the
        ``train`` command's own settings, such as ``eval_every``) is stored for the resumed run
        (:attr:`run_settings`). Raises RuntimeError after a step broken inside its update, and
        :class:`TrainingDiverged` when a weight is not finite (never saved over a good checkpoint)."""
        if self._broken:
            raise RuntimeError(f"cannot save a resumable checkpoint: {self._broken}, so the weights are "
                               "half-updated; resume from the previous checkpoint instead")
        bad = next((name for name, p in self.model.named_parameters() if not np.isfinite(p.data).all()), None)
        if bad is not None:
            raise TrainingDiverged(self.step, None, f"the weight {bad} is not finite after step {self.step}")
        gens = {name: g.bit_generator.state for name, g in self.model.generators().items()}
        b = self.batcher.state_dict()
        text = {"text": self.data.stored()} if hasattr(self.data, "stored") else {}     # the vocabulary
        return save_checkpoint(path, self.model, self.optimizer, config=self.config.to_dict(),
                               extra_arrays={"batcher_perm": b["perm"]},
                               extra_json={"step": self.step, "generators": gens, "run": dict(run or {}),
                                           "scheduler": self.scheduler.state_dict(),
                                           "batcher": {"rng": b["rng"], "pos": b["pos"], "epoch": b["epoch"]},
                                           **text})

    @classmethod
    def resume(cls, path, overrides=None):
        """A trainer restored from ``path``. ``overrides`` (a dict) may change ``steps``; any other value
        that differs from the checkpoint's configuration raises CheckpointError (another config)."""
        ckpt = load_checkpoint(path)
        config = checkpoint_config(ckpt)
        overrides = dict(overrides or {})
        diffs = []
        for k, v in overrides.items():
            old = getattr(config, k)
            if k in TrainConfig.RESUME_FREE:
                continue
            if (list(v) if isinstance(v, tuple) else v) != (list(old) if isinstance(old, tuple) else old):
                diffs.append(f"{k}: checkpoint {old!r}, requested {v!r}")
        if diffs:
            raise CheckpointError(f"{path} was saved from another configuration: " + "; ".join(diffs)
                                  + " (drop these options to resume, or start a new run)")
        for k in TrainConfig.RESUME_FREE:
            if k in overrides:
                setattr(config, k, overrides[k])
        trainer = cls(config)
        if hasattr(trainer.data, "stored"):
            stored, now = ckpt.extra_json.get("text") or {}, trainer.data.stored()
            if stored.get("sha256") != now["sha256"] or stored.get("tokenizer") != now["tokenizer"]:
                raise CheckpointError(f"{path} was trained on another text than {config.text} holds now (its "
                                      "SHA-256 or vocabulary differs); resume with the same file, or start a new run")
        ckpt.check_model(trainer.model)
        gens = trainer.model.generators()
        saved = ckpt.extra_json.get("generators", {})
        if set(saved) != set(gens) or "step" not in ckpt.extra_json:
            raise CheckpointError(f"{path}: training state does not match this model (dropout generators "
                                  f"{sorted(saved)} vs {sorted(gens)})")
        ckpt.load_model(trainer.model)
        ckpt.load_optimizer(trainer.optimizer)
        step = int(ckpt.extra_json["step"])
        saved_scheduler = ckpt.extra_json.get("scheduler")
        if saved_scheduler is None:     # a checkpoint from before the scheduler: the lr follows from the step
            trainer.scheduler = config.make_scheduler(trainer.optimizer, last_epoch=step - 1)
        else:
            try:
                trainer.scheduler.load_state_dict(saved_scheduler)
            except (ValueError, TypeError) as exc:
                raise CheckpointError(f"{path}: learning-rate scheduler state does not fit: {exc}") from exc
            if trainer.scheduler.last_epoch != step:
                raise CheckpointError(f"{path}: the scheduler is at epoch {trainer.scheduler.last_epoch}, the "
                                      f"training at step {step}; the checkpoint is damaged")
        for name, g in gens.items():
            g.bit_generator.state = saved[name]
        bstate = dict(ckpt.extra_json["batcher"], perm=ckpt.extra_arrays["batcher_perm"])
        trainer.batcher.load_state_dict(bstate)
        trainer.step = step
        trainer.run_settings = dict(ckpt.extra_json.get("run") or {})
        return trainer


def checkpoint_config(ckpt):
    """The :class:`TrainConfig` stored in a checkpoint (CheckpointError if there is none)."""
    if not ckpt.config:
        raise CheckpointError(f"{ckpt.path} holds no training configuration (not saved by `train`)")
    try:
        config = TrainConfig.from_dict(ckpt.config)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, CheckpointError):
            raise
        raise CheckpointError(f"{ckpt.path}: invalid training configuration: {exc}") from exc
    if config.model != ckpt.model_kind:
        raise CheckpointError(f"{ckpt.path}: its configuration says model {config.model!r} but it holds a "
                              f"{ckpt.model_kind!r} model; the checkpoint is damaged")
    return config
