"""Seeded synthetic sequence-to-sequence tasks for an encoder (one output token per input position).

Token ids: ``0`` is padding (``PAD``), ``1`` end-of-sequence (``EOS``); content tokens are drawn
uniformly from ``[2, vocab_size)``. Every task maps a source ``src`` (L,) to a target ``tgt`` (L,):

* ``shift``   -- the seed design's task: ``tgt = src`` rolled left by one, last target ``EOS``
  (position i predicts the token at i + 1);
* ``copy``    -- ``tgt = src``;
* ``reverse`` -- ``tgt = src[::-1]``;
* ``sort``    -- ``tgt = sorted(src)``.

:func:`make_task` draws a training and a validation set from one seed; validation rows never occur in
the training set (held out exactly, not just with high probability). :class:`Batcher` walks the
training set in shuffled epochs; its state (generator, permutation, position) is saved in checkpoints
so a resumed run sees exactly the batches the uninterrupted run would have seen.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from ..utils.checks import as_generator, check_positive_int

__all__ = ["TASKS", "PAD", "EOS", "FIRST_TOKEN", "make_targets", "make_task", "TaskData", "Batcher"]

PAD, EOS, FIRST_TOKEN = 0, 1, 2


def _shift(src):
    tgt = np.roll(src, -1, axis=-1)
    tgt[..., -1] = EOS
    return tgt


TASKS = {
    "shift": _shift,
    "copy": lambda src: src.copy(),
    "reverse": lambda src: src[..., ::-1].copy(),
    "sort": lambda src: np.sort(src, axis=-1),
}


def check_task(task):
    if task not in TASKS:
        raise ValueError(f"task must be one of {sorted(TASKS)}, got {task!r}")
    return task


def make_targets(task, src):
    """The target ids for source ids ``src`` (..., L) under ``task``."""
    check_task(task)
    src = np.asarray(src)
    if src.dtype.kind not in "iu":
        raise TypeError(f"src must be an integer array of token ids, got dtype {src.dtype}")
    if src.ndim == 0:
        raise ValueError(f"src must have shape (..., L), got a scalar {src!r}")
    return TASKS[task](src)


class Splits:
    """``split("train" | "val")`` -> ``(src, tgt)`` of a task's sets (every task's data class has it)."""

    def split(self, name):
        if name == "train":
            return self.train_src, self.train_tgt
        if name in ("val", "validation"):
            return self.val_src, self.val_tgt
        raise ValueError(f"split must be 'train' or 'val', got {name!r}")


@dataclass
class TaskData(Splits):
    """A task's training and validation sets: ``*_src`` and ``*_tgt`` are int64 arrays (N, L)."""

    task: str
    vocab_size: int
    seq_len: int
    train_src: np.ndarray
    train_tgt: np.ndarray
    val_src: np.ndarray
    val_tgt: np.ndarray



def make_task(task, vocab_size=32, seq_len=16, num_train=20000, num_val=1000, seed=0):
    """Draw ``num_train`` training and ``num_val`` held-out validation pairs of ``task``.

    The same arguments always give the same arrays. Raises ValueError when the vocabulary has no
    content token or when there are too few distinct sequences for the requested sizes.
    """
    check_task(task)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    vocab_size = check_positive_int(vocab_size, "vocab_size")
    seq_len = check_positive_int(seq_len, "seq_len")
    num_train = check_positive_int(num_train, "num_train")
    num_val = check_positive_int(num_val, "num_val")
    if vocab_size <= FIRST_TOKEN:
        raise ValueError(f"vocab_size must be > {FIRST_TOKEN} (ids 0 and 1 are PAD and EOS), got {vocab_size}")
    needed = num_train + num_val
    # There are C ** L distinct sequences (C content tokens); a float overflows from L ~ 209 at C = 30, so
    # count exactly in ints, and no further than needed: with C >= 2, C ** k > needed once k reaches
    # needed.bit_length(), so a longer sequence only makes the space larger.
    space = (vocab_size - FIRST_TOKEN) ** min(seq_len, needed.bit_length())
    if needed > space:
        raise ValueError(f"only {space} distinct sequences of length {seq_len} over {vocab_size - FIRST_TOKEN} "
                         f"content tokens exist; num_train + num_val = {needed} is too many")
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5EC]))
    train = rng.integers(FIRST_TOKEN, vocab_size, size=(num_train, seq_len), dtype=np.int64)
    seen = {row.tobytes() for row in train}
    val = np.empty((num_val, seq_len), dtype=np.int64)
    filled = 0
    for _ in range(1000):
        cand = rng.integers(FIRST_TOKEN, vocab_size, size=(2 * (num_val - filled), seq_len), dtype=np.int64)
        for row in cand:
            key = row.tobytes()
            if key not in seen:
                seen.add(key)
                val[filled] = row
                filled += 1
                if filled == num_val:
                    break
        if filled == num_val:
            break
    else:
        raise ValueError(f"could not draw {num_val} validation sequences unseen in training; "
                         "use a larger vocab_size or seq_len, or fewer examples")
    return TaskData(task, vocab_size, seq_len, train, make_targets(task, train), val, make_targets(task, val))


class Batcher:
    """Shuffled mini-batches of one split, epoch after epoch; the state survives a checkpoint.

    Each epoch is a fresh permutation from the batcher's generator; batches are consecutive slices of it
    (the last, shorter slice of an epoch is dropped so every batch has ``batch_size`` rows).
    """

    def __init__(self, src, tgt, batch_size, seed=None):
        self.src, self.tgt = np.asarray(src), np.asarray(tgt)
        for name, a in (("src", self.src), ("tgt", self.tgt)):
            if a.ndim != 2:
                raise ValueError(f"{name} must have shape (N, L), got shape {a.shape}")
            if a.dtype.kind not in "iu":
                raise TypeError(f"{name} must be an integer array of token ids, got dtype {a.dtype}")
        if len(self.src) != len(self.tgt):       # the same N; the lengths may differ (seq2seq targets)
            raise ValueError(f"src and tgt must have the same number of rows N, got shapes {self.src.shape} "
                             f"and {self.tgt.shape}")
        self.batch_size = check_positive_int(batch_size, "batch_size")
        if self.batch_size > len(self.src):
            raise ValueError(f"batch_size {batch_size} exceeds the {len(self.src)} training examples")
        self.rng = as_generator(seed)
        self.perm = None
        self.pos = 0
        self.epoch = 0

    def next(self):
        """The next ``(src, tgt)`` batch, each (batch_size, L)."""
        if self.perm is None or self.pos + self.batch_size > len(self.perm):
            self.perm = self.rng.permutation(len(self.src))
            self.pos = 0
            self.epoch += 1
        idx = self.perm[self.pos:self.pos + self.batch_size]
        self.pos += self.batch_size
        return self.src[idx], self.tgt[idx]

    __next__ = next

    def __iter__(self):
        return self

    def state_dict(self):
        return {"rng": json.dumps(self.rng.bit_generator.state),
                "perm": np.zeros(0, np.int64) if self.perm is None else self.perm.copy(),
                "pos": self.pos, "epoch": self.epoch}

    def load_state_dict(self, state):
        missing = [k for k in ("rng", "perm", "pos", "epoch") if k not in state]
        if missing:
            raise KeyError(f"batcher state is missing {missing} (expected what state_dict() returns)")
        perm = np.asarray(state["perm"])
        if perm.size and (perm.shape != (len(self.src),) or perm.dtype.kind not in "iu"):
            raise ValueError(f"batcher state has a permutation of shape {perm.shape}, expected ({len(self.src)},)")
        self.rng.bit_generator.state = json.loads(str(state["rng"]))
        self.perm = perm.astype(np.int64) if perm.size else None
        self.pos = int(state["pos"])
        self.epoch = int(state["epoch"])
