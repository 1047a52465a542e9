"""The configuration of a training run: :class:`TrainConfig` (every setting, checked), the optimizer's
arguments and the learning-rate schedule it builds. ``numpy_transformer.training.trainer`` re-exports it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ..models.gpt_config import NORMS
from ..optim import OPTIMIZERS, ConstantSchedule, WarmupInverseSqrtSchedule
from ..optim.lr_scheduler import LambdaLR
from ..tasks.text import TOKENIZERS
from ..utils.checks import check_number, check_positive_int, check_probability
from .checkpoint import CheckpointError
from .kinds import KINDS, TEXT_TASK, get_kind, kind_for

__all__ = ["TrainConfig", "SCHEDULES"]

SCHEDULES = ("warmup", "constant")
# every model kind's choices, derived from the kinds' (their models' vocabularies); each kind refuses
# what it does not support (kinds.ModelKind.check_options)
ACTIVATION_CHOICES = tuple(dict.fromkeys(a for k in KINDS.values() for a in k.activations))
POSITION_CHOICES = tuple(dict.fromkeys(p for k in KINDS.values() for p in k.positions))


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
    # see numpy_transformer.training.kinds
    model: str = "encoder"
    digits: int = 3               # gpt's addition: digits per operand (numpy_transformer.tasks.lm)
    # gpt on your own text (task "text", numpy_transformer.tasks.text): the file, its tokenizer ("char" or
    # "byte") and the fraction of its end held out; seq_len is the block size, num_train the training
    # windows (set from the text)
    text: str = None
    tokenizer: str = "char"
    val_fraction: float = 0.1
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
        if self.text is not None:
            if self.model != "gpt":
                raise ValueError(f"text (--text FILE) trains --model gpt, got --model {self.model}")
            if not isinstance(self.text, str) or not self.text:
                raise ValueError(f"text must be the path of a text file, got {self.text!r}")
            if self.task not in (None, TEXT_TASK):
                raise ValueError(f"--text trains on the file's text: task must be {TEXT_TASK!r} (or not given), "
                                 f"got {self.task!r}")
            self.task = TEXT_TASK
        elif self.task == TEXT_TASK:
            raise ValueError(f"task {TEXT_TASK!r} needs the file to train on: give --text FILE")
        if self.tokenizer not in TOKENIZERS:
            raise ValueError(f"tokenizer must be one of {list(TOKENIZERS)}, got {self.tokenizer!r}")
        check_number(self.val_fraction, "val_fraction", 0, 1, low_open=True, high_open=True)
        if self.task is None:
            self.task = kind.default_task
        kind = kind_for(self)                       # gpt on --text: the text kind
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
