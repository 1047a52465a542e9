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
import dataclasses
import signal
import threading
import time
from dataclasses import dataclass

import numpy as np

from ._checks import check_number, check_positive_int, check_probability
from ._trace import trace as _trace_block
from .checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from .data import Batcher
from .kinds import get_kind
from .loss import CrossEntropyLoss
from .gpt import GPT_FFNS, NORMS, POSITIONS
from .model import ACTIVATIONS, POS_ENCODINGS
from .optim import OPTIMIZERS, ConstantSchedule, WarmupInverseSqrtSchedule, clip_grad_norm_
from .optim.lr_scheduler import LambdaLR

__all__ = ["TrainConfig", "Trainer", "StepResult", "EvalResult", "SCHEDULES"]

SCHEDULES = ("warmup", "constant")
# every model kind's choices (each kind refuses what it does not support, kinds.ModelKind.check_options)
ACTIVATION_CHOICES = tuple(dict.fromkeys(ACTIVATIONS + GPT_FFNS))
POSITION_CHOICES = tuple(dict.fromkeys(POS_ENCODINGS + POSITIONS))


@dataclass
class TrainConfig:
    """Every setting of a run. The defaults reach >= 99% held-out token accuracy on ``shift`` and
    ``reverse`` at d_model 128 in a few minutes on a 2-core CPU (see docs/training.md)."""

    # task (None: the model kind's default task, "shift" for the encoder, "reverse" for seq2seq)
    task: str = None
    vocab_size: int = 32
    seq_len: int = 16
    num_train: int = 20000
    num_val: int = 1000
    # model
    d_model: int = 128
    nhead: int = 4
    num_layers: int = 2
    dim_feedforward: int = 512
    dropout: float = 0.1
    activation: str = "relu"
    norm_first: bool = False
    pos_encoding: str = "sinusoidal"
    norm: str = "layernorm"       # gpt only: "rmsnorm"
    num_kv_heads: int = None      # gpt only: grouped-query attention's key/value heads (None: nhead)
    dtype: str = "float32"
    # optimisation
    optimizer: str = "adam"
    lr: float = 1e-3              # constant schedule: the lr; warmup schedule: the peak lr (at step == warmup)
    schedule: str = "warmup"
    warmup: int = 200
    betas: tuple = (0.9, 0.98)
    eps: float = 1e-9
    weight_decay: float = 0.0
    momentum: float = 0.9
    clip: float = 1.0
    label_smoothing: float = 0.0
    batch_size: int = 32
    steps: int = 1000
    seed: int = 0
    # which model: "encoder" (TransformerModel), "seq2seq" (Seq2SeqModel) or "gpt" (GPT, on addition);
    # see numpy_transformer.kinds
    model: str = "encoder"
    digits: int = 3               # gpt's addition: digits per operand (numpy_transformer.tasks_lm)
    # activation checkpointing (model.checkpoint, numpy_transformer.nn.recompute): less memory, one more
    # forward per layer, the same run bit for bit
    checkpoint_activations: bool = False

    # what a resumed run must share with its checkpoint (everything but the step budget and what changes no result)
    RESUME_FREE = ("steps", "checkpoint_activations")

    def __post_init__(self):
        if isinstance(self.betas, (str, bytes)) or not hasattr(self.betas, "__len__") or len(self.betas) != 2:
            raise ValueError(f"betas must be two numbers in [0, 1), got {self.betas!r}")
        self.betas = tuple(check_number(b, f"betas[{i}]", 0, 1, high_open=True) for i, b in enumerate(self.betas))
        kind = get_kind(self.model)
        if self.task is None:
            self.task = kind.default_task
        kind.check_task(self.task)
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {sorted(OPTIMIZERS)}, got {self.optimizer!r}")
        if self.activation not in ACTIVATION_CHOICES:
            raise ValueError(f"activation must be one of {ACTIVATION_CHOICES}, got {self.activation!r}")
        if self.pos_encoding not in POSITION_CHOICES:
            raise ValueError(f"pos_encoding must be one of {POSITION_CHOICES}, got {self.pos_encoding!r}")
        if self.norm not in NORMS:
            raise ValueError(f"norm must be one of {NORMS}, got {self.norm!r}")
        if self.num_kv_heads is not None:
            check_positive_int(self.num_kv_heads, "num_kv_heads")
        kind.check_options(self)
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if self.dtype not in ("float32", "float64"):
            raise ValueError(f"dtype must be 'float32' or 'float64', got {self.dtype!r}")
        for name in ("vocab_size", "seq_len", "num_train", "num_val", "d_model", "nhead", "num_layers",
                     "dim_feedforward", "warmup", "batch_size", "digits"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        for name in ("steps", "seed"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
                raise ValueError(f"{name} must be an int >= 0, got {v!r}")
        if not isinstance(self.checkpoint_activations, (bool, np.bool_)):
            raise ValueError(f"checkpoint_activations must be True or False, got {self.checkpoint_activations!r}")
        check_number(self.lr, "lr", low=0, low_open=True)
        check_number(self.clip, "clip (0 = no clipping)", low=0)
        check_probability(self.dropout, "dropout")
        check_number(self.label_smoothing, "label_smoothing", 0, 1)
        for name in ("eps", "weight_decay", "momentum"):
            check_number(getattr(self, name), name, low=0)

    def to_dict(self):
        d = dataclasses.asdict(self)
        d["betas"] = list(self.betas)
        return d

    @classmethod
    def from_dict(cls, d):
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise CheckpointError(f"unknown configuration keys {unknown} (a checkpoint from another version?)")
        return cls(**d)

    def model_kwargs(self):
        """The encoder's ``TransformerModel`` arguments (the seq2seq model's: ``kinds.Seq2SeqKind``)."""
        return dict(vocab_size=self.vocab_size, d_model=self.d_model, nhead=self.nhead,
                    num_layers=self.num_layers, dim_feedforward=self.dim_feedforward, dropout=self.dropout,
                    max_len=self.seq_len, activation=self.activation, norm_first=self.norm_first,
                    pos_encoding=self.pos_encoding, dtype=np.dtype(self.dtype))

    def optimizer_kwargs(self):
        """Keyword arguments shared by ``nt.optim`` and ``torch.optim``. The base ``lr`` is 1.0: the
        scheduler (:meth:`make_scheduler`) multiplies it by the schedule's value, which is the lr."""
        if self.optimizer == "sgd":
            return dict(lr=1.0, momentum=self.momentum, weight_decay=self.weight_decay)
        return dict(lr=1.0, betas=tuple(self.betas), eps=self.eps, weight_decay=self.weight_decay)

    def make_scheduler(self, optimizer, last_epoch=-1):
        """``LambdaLR(optimizer, lambda epoch: schedule(epoch + 1))``: with the base lr 1.0 of
        :meth:`optimizer_kwargs`, step ``s`` (from 1) runs at exactly ``make_schedule()(s)``."""
        schedule = self.make_schedule()
        return LambdaLR(optimizer, lambda epoch: schedule(epoch + 1), last_epoch=last_epoch)

    def make_schedule(self):
        """The learning rate of each step as a function ``step -> lr`` (step counts from 1)."""
        if self.schedule == "constant":
            return ConstantSchedule(self.lr)
        # scale the paper's formula so that its peak (at step == warmup) is ``lr``
        factor = self.lr * (self.d_model * self.warmup) ** 0.5
        return WarmupInverseSqrtSchedule(self.d_model, self.warmup, factor)


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


@dataclass
class EvalResult:
    """``sequence_accuracy``: whole sequences right (seq2seq and gpt: greedy generation equal to the
    target, EOS included, i.e. exact match); ``bleu``: corpus BLEU of the generated sequences (seq2seq
    only); ``generated``: the exact match is of generated sequences (gpt, which reports no BLEU)."""

    loss: float
    token_accuracy: float
    sequence_accuracy: float
    examples: int
    bleu: float = None
    generated: bool = False

    def __str__(self):
        if self.bleu is None and self.generated:
            return (f"loss {self.loss:.4f}  token acc {100 * self.token_accuracy:.2f}% (teacher-forced)  "
                    f"exact match {100 * self.sequence_accuracy:.2f}% (greedy)  ({self.examples} examples)")
        if self.bleu is None:
            return (f"loss {self.loss:.4f}  token acc {100 * self.token_accuracy:.2f}%  "
                    f"sequence acc {100 * self.sequence_accuracy:.2f}%  ({self.examples} examples)")
        return (f"loss {self.loss:.4f}  token acc {100 * self.token_accuracy:.2f}% (teacher-forced)  "
                f"exact match {100 * self.sequence_accuracy:.2f}% (greedy)  BLEU {self.bleu:.2f}  "
                f"({self.examples} examples)")

    def brief(self):
        """The short form of a progress line: ``loss 0.0406  token 99.98%  seq 99.60%`` (seq2seq:
        ``loss 0.0406  exact 99.60%  BLEU 99.90``, the greedy exact match and corpus BLEU; gpt:
        ``loss 0.0406  token 99.98%  exact 99.60%``)."""
        if self.bleu is None and self.generated:
            return (f"loss {self.loss:.4f}  token {100 * self.token_accuracy:.2f}%  "
                    f"exact {100 * self.sequence_accuracy:.2f}%")
        if self.bleu is None:
            return (f"loss {self.loss:.4f}  token {100 * self.token_accuracy:.2f}%  "
                    f"seq {100 * self.sequence_accuracy:.2f}%")
        return f"loss {self.loss:.4f}  exact {100 * self.sequence_accuracy:.2f}%  BLEU {self.bleu:.2f}"


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
        self.kind = get_kind(c.model)
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
                self.model.backward(self.criterion.backward().reshape(logits.shape))
        except BaseException:
            self._rollback(undo)
            raise
        self._in_update = True                  # Ctrl-C waits (see train): weights change from here on
        try:
            grad_norm = float(clip_grad_norm_(self.model.parameters(), self.config.clip)) if self.config.clip else float("nan")
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
        """
        target = self.config.steps if steps is None else steps
        with self._interrupt_between_steps():
            while self.step < target:
                r = self.train_step(trace=bool(trace_every) and (self.step + 1) % trace_every == 0)
                if callback is not None:
                    callback(r)
                if self._interrupt_requested:
                    raise KeyboardInterrupt(f"interrupted after step {self.step}")
        return self

    # -- interruption ----------------------------------------------------------------------------------
    _interrupt_requested = False
    _in_update = False
    _broken = None

    @contextlib.contextmanager
    def _interrupt_between_steps(self):
        """While :meth:`train` runs (in the main thread, with Python's default SIGINT handler), Ctrl-C is
        noted and raised as KeyboardInterrupt after the current step, so the trainer it surfaces from is
        always in a consistent state that :meth:`save` + :meth:`resume` continue exactly. A second Ctrl-C
        raises at once, except inside the optimizer update; a step cut short before its update is undone
        (:meth:`train_step`)."""
        self._interrupt_requested = False
        if (threading.current_thread() is not threading.main_thread()
                or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
            yield
            return

        def on_sigint(signum, frame):
            if self._interrupt_requested and not self._in_update:
                raise KeyboardInterrupt(f"interrupted during step {self.step + 1}")
            self._interrupt_requested = True

        previous = signal.signal(signal.SIGINT, on_sigint)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)
            self._interrupt_requested = False

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
        was = self.model.training
        self.model.eval()
        try:
            return self.kind.predict(self.model, src, self.data)
        finally:
            self.model.train(was)

    def evaluate(self, split="val", max_examples=None, batch_size=250):
        return self.kind.evaluate(self.model, *self.data.split(split), criterion=self.criterion,
                                  max_examples=max_examples, batch_size=batch_size)

    # -- checkpoints --------------------------------------------------------------------------------
    def save(self, path):
        """Write a checkpoint that :meth:`resume` continues exactly."""
        if self._broken:
            raise RuntimeError(f"cannot save a resumable checkpoint: {self._broken}, so the weights are "
                               "half-updated; resume from the previous checkpoint instead")
        gens = {name: g.bit_generator.state for name, g in self.model.generators().items()}
        b = self.batcher.state_dict()
        return save_checkpoint(path, self.model, self.optimizer, config=self.config.to_dict(),
                               extra_arrays={"batcher_perm": b["perm"]},
                               extra_json={"step": self.step, "generators": gens,
                                           "scheduler": self.scheduler.state_dict(),
                                           "batcher": {"rng": b["rng"], "pos": b["pos"], "epoch": b["epoch"]}})

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


def evaluate(model, src, tgt, criterion=None, max_examples=None, batch_size=250):
    """Loss, token accuracy and whole-sequence accuracy of ``model`` on ``(src, tgt)`` in eval mode."""
    criterion = criterion or CrossEntropyLoss()
    crit = CrossEntropyLoss(ignore_index=criterion.ignore_index, reduction="sum",
                            label_smoothing=criterion.label_smoothing)
    n = len(src) if max_examples is None else min(len(src), max_examples)
    was = model.training
    model.eval()
    total_loss, correct, seq_correct, counted = 0.0, 0, 0, 0
    try:
        for i in range(0, n, batch_size):
            s, t = src[i:min(i + batch_size, n)], tgt[i:min(i + batch_size, n)]
            logits = model(s)
            total_loss += float(crit(logits.reshape(-1, logits.shape[-1]), t.reshape(-1)))
            keep = t != criterion.ignore_index
            hit = (logits.argmax(-1) == t) | ~keep
            correct += int((hit & keep).sum())
            counted += int(keep.sum())
            seq_correct += int(hit.all(axis=1).sum())
    finally:
        model.train(was)
    return EvalResult(total_loss / max(counted, 1), correct / max(counted, 1), seq_correct / max(n, 1), n)
