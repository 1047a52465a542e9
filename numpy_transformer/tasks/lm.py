"""A seeded language-model task for the decoder-only :class:`~numpy_transformer.GPT`: digit addition.

``addition`` with ``digits=3``: the model reads ``"123+456="`` and writes the sum, which needs carries.
Tokens (vocabulary of 14)::

    0 PAD   1 EOS   2 "+"   3 "="   4..13 the digits "0".."9"

Every operand is written with exactly ``digits`` digits (leading zeros: ``"007+120="``), and the
answer with ``digits + 1`` digits **least-significant first** (the standard trick: 123 + 456 = 579 is
written ``"9750"``), then ``EOS``. Reversed, each answer digit depends only on the operand digits at
its own place and the carry from the digit just generated, so a small causal model learns it
quickly; written most-significant first, the first digit would need the whole carry chain before
any of it is on the page. :func:`decode_answer` undoes the reversal. A sequence of ``3 * digits + 4``
tokens::

    prompt (2 * digits + 2)          answer (digits + 2)
    1 2 3 + 4 5 6 =                  9 7 5 0 EOS

The language model is trained on the sequence shifted by one: input ``seq[:-1]``, target ``seq[1:]``
with every target inside the prompt set to ``IGNORE`` (-100, ``CrossEntropyLoss``'s default
``ignore_index``), so the loss and the token accuracy count the ``digits + 2`` answer tokens only (the
operands are random: predicting them teaches nothing). :func:`make_lm_task` draws a training and a
held-out set of distinct ``(a, b)`` pairs from one seed, disjoint (no held-out pair is a training pair).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..utils.checks import check_positive_int
from .data import Splits

__all__ = ["LM_TASKS", "PAD", "EOS", "PLUS", "EQUALS", "DIGIT0", "IGNORE", "VOCAB_SIZE", "LMData",
           "make_lm_task", "prompt_and_answer_lengths", "encode_prompt", "encode_answer", "decode_answer",
           "parse_expression"]

PAD, EOS, PLUS, EQUALS, DIGIT0 = 0, 1, 2, 3, 4
VOCAB_SIZE = DIGIT0 + 10
IGNORE = -100                      # targets inside the prompt (CrossEntropyLoss's default ignore_index)
LM_TASKS = ("addition",)
MAX_DIGITS = 9                     # (a, b) pairs are drawn as one int64 index < 10 ** (2 * digits)
_SYMBOLS = {PAD: "_", EOS: "$", PLUS: "+", EQUALS: "="}


def _digits(n, width):
    """The ``width`` decimal digits of ``n`` (an int array (N,)), most significant first: (N, width)."""
    powers = 10 ** np.arange(width - 1, -1, -1, dtype=np.int64)
    return (np.asarray(n, dtype=np.int64)[:, None] // powers) % 10


def encode_prompt(a, b, digits):
    """Token ids (N, 2 * digits + 2) of the prompts ``"a+b="`` for int arrays ``a``, ``b`` (N,)."""
    a, b = np.atleast_1d(a), np.atleast_1d(b)
    n = len(a)
    return np.concatenate([DIGIT0 + _digits(a, digits), np.full((n, 1), PLUS), DIGIT0 + _digits(b, digits),
                           np.full((n, 1), EQUALS)], axis=1).astype(np.int64)


def encode_answer(total, digits):
    """Token ids (N, digits + 2): the ``digits + 1`` digits of ``total`` least-significant first, then EOS."""
    total = np.atleast_1d(total)
    rev = (DIGIT0 + _digits(total, digits + 1))[:, ::-1]
    return np.concatenate([rev, np.full((len(total), 1), EOS)], axis=1).astype(np.int64)


def decode_answer(row):
    """The number a generated answer row spells (reversed digits up to EOS), or None when it is not
    digits followed by EOS."""
    digits = []
    for t in np.asarray(row).tolist():
        if t == EOS:
            break
        if not DIGIT0 <= t < DIGIT0 + 10:
            return None
        digits.append(t - DIGIT0)
    else:
        return None
    if not digits:
        return None
    return int("".join(map(str, digits[::-1])))


def to_text(ids):
    """Token ids as text: digits, ``+``, ``=``; ``$`` for EOS and ``_`` for PAD."""
    return "".join(str(t - DIGIT0) if t >= DIGIT0 else _SYMBOLS.get(t, "?") for t in np.asarray(ids).tolist())


def parse_expression(text, digits):
    """``"123+456"`` (or ``"123+456="``) -> ``(a, b)``; ValueError naming ``--tokens`` otherwise."""
    body = text.strip().rstrip("=").replace(" ", "")
    parts = body.split("+")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise ValueError(f"--tokens: an addition is written A+B with decimal digits, e.g. "
                         f"{'1' * digits}+{'2' * digits}; got {text!r}")
    if any(len(p) > digits for p in parts):
        raise ValueError(f"--tokens: the model adds numbers of at most {digits} digits (it was trained on "
                         f"--digits {digits}); got {text!r}")
    return int(parts[0]), int(parts[1])


@dataclass
class LMData(Splits):
    """The addition task's sets. ``*_src`` (N, L - 1): the input ids ``seq[:-1]``; ``*_tgt`` (N, L - 1):
    the next tokens ``seq[1:]``, ``IGNORE`` inside the prompt. ``*_ab`` (N, 2): the operands."""

    task: str
    digits: int
    vocab_size: int
    prompt_len: int
    answer_len: int
    train_src: np.ndarray
    train_tgt: np.ndarray
    val_src: np.ndarray
    val_tgt: np.ndarray
    train_ab: np.ndarray
    val_ab: np.ndarray

    @property
    def seq_len(self):
        """L: the whole sequence (prompt + answer + EOS)."""
        return self.prompt_len + self.answer_len



def prompt_and_answer_lengths(width):
    """``(prompt_len, answer_len)`` of the rows of an addition batch ``width = L - 1`` columns wide (the
    inputs ``seq[:-1]``): ``L = 3 * digits + 4``, the prompt ``2 * digits + 2``, the answer ``digits + 2``."""
    digits, rest = divmod(width - 3, 3)
    if digits < 1 or rest:
        raise ValueError(f"an addition row (3 * digits + 3 input ids) cannot be {width} ids wide")
    return 2 * digits + 2, digits + 2


def _rows(a, b, digits):
    seq = np.concatenate([encode_prompt(a, b, digits), encode_answer(a + b, digits)], axis=1)   # (N, L)
    src, tgt = seq[:, :-1].copy(), seq[:, 1:].copy()
    tgt[:, :2 * digits + 1] = IGNORE          # targets seq[1 .. prompt_len - 1]: the prompt's own tokens
    return src, tgt


def make_lm_task(task="addition", digits=3, num_train=20000, num_val=1000, seed=0):
    """Draw ``num_train`` training and ``num_val`` held-out additions of two ``digits``-digit operands.

    The same arguments always give the same arrays; the ``num_train + num_val`` pairs ``(a, b)`` are
    distinct, so no held-out pair is a training pair. Raises ValueError naming the argument for a bad
    task, size or seed, and when there are fewer than ``num_train + num_val`` pairs.
    """
    if task not in LM_TASKS:
        raise ValueError(f"task must be one of {list(LM_TASKS)} for the gpt model, got {task!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    digits = check_positive_int(digits, "digits")
    if digits > MAX_DIGITS:
        raise ValueError(f"digits must be at most {MAX_DIGITS}, got {digits}")
    num_train = check_positive_int(num_train, "num_train")
    num_val = check_positive_int(num_val, "num_val")
    space = 10 ** (2 * digits)
    if num_train + num_val > space:
        raise ValueError(f"addition of {digits}-digit numbers has only {space} distinct pairs; num_train + num_val "
                         f"= {num_train + num_val}: use more digits or fewer examples")
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0xADD, digits]))
    pick = rng.choice(space, size=num_train + num_val, replace=False)          # distinct pair indices
    a, b = pick // 10 ** digits, pick % 10 ** digits
    train_src, train_tgt = _rows(a[:num_train], b[:num_train], digits)
    val_src, val_tgt = _rows(a[num_train:], b[num_train:], digits)
    ab = np.stack([a, b], axis=1).astype(np.int64)
    return LMData(task, digits, VOCAB_SIZE, 2 * digits + 2, digits + 2, train_src, train_tgt, val_src, val_tgt,
                  ab[:num_train], ab[num_train:])
