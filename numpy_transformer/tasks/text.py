"""Your own text as a language-modelling task for :class:`~numpy_transformer.GPT` (``train --text FILE``).

Two tokenizers turn the file into token ids:

* ``char`` -- one token per character (Unicode code point) that occurs in the file, numbered in sorted
  order (Karpathy's "char-rnn" / nanoGPT's ``shakespeare_char``); the vocabulary is the string of those
  characters, stored in the checkpoint so that ``sample`` decodes without the file. The file must be
  UTF-8 text.
* ``byte`` -- one token per byte (256 tokens), any file; decoded as UTF-8 with invalid bytes replaced.

The held-out part is the **end** of the text (``val_fraction`` of its tokens), as nanoGPT's
``data[int(0.9 * n):]``: no held-out window overlaps a training one. Training examples are the windows of
``block_size + 1`` consecutive tokens at *every* offset of the training part (input ``w[:-1]``, target
``w[1:]``, each position predicting the next token); the trainer's shuffled batches over them are
nanoGPT's ``get_batch`` (random offsets) drawn without replacement, an epoch at a time. The windows are
views of one array (``sliding_window_view``): no copy per offset. Held-out windows do not overlap, so
the held-out loss counts each held-out token (but the last partial window) once.

The unigram entropy of the training tokens, ``H = -sum p log p`` (nats), is the loss of a model that
knows only how often each token occurs; ``exp(H)`` is its perplexity. A model below it has learnt
something of the context.
"""

from __future__ import annotations

import hashlib
import math
import os
from dataclasses import dataclass

import numpy as np

from ..utils.checks import check_positive_int
from .data import Splits

__all__ = ["TOKENIZERS", "CharTokenizer", "ByteTokenizer", "tokenizer_from_dict", "read_text", "TextData",
           "make_text_task", "unigram_entropy"]


class CharTokenizer:
    """One token per character of ``chars`` (a string of distinct characters, id = position).

    Parameters
    ----------
    chars : str
        The vocabulary, e.g. ``"".join(sorted(set(text)))``.
    """

    kind = "char"

    def __init__(self, chars: str):
        if not isinstance(chars, str) or not chars:
            raise ValueError(f"chars must be a non-empty string of distinct characters, got {chars!r}")
        if len(set(chars)) != len(chars):
            raise ValueError(f"chars must be distinct characters, got {len(chars)} with repeats")
        self.chars = chars
        self.index = {ch: i for i, ch in enumerate(chars)}

    @classmethod
    def from_text(cls, text: str) -> CharTokenizer:
        """The tokenizer of every character in ``text``, in sorted order."""
        return cls("".join(sorted(set(text))))

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> np.ndarray:
        """Token ids (N,) int64 of ``text``; ValueError naming the first character not in the vocabulary."""
        try:
            return np.fromiter((self.index[ch] for ch in text), dtype=np.int64, count=len(text))
        except KeyError as exc:
            raise ValueError(f"the character {exc.args[0]!r} is not in this tokenizer's vocabulary of "
                             f"{self.vocab_size} characters (those of the training text)") from None

    def decode(self, ids) -> str:
        """The text of token ids ``ids`` (each in ``[0, vocab_size)``)."""
        ids = np.asarray(ids).reshape(-1).tolist()
        bad = next((i for i in ids if not 0 <= i < self.vocab_size), None)
        if bad is not None:
            raise ValueError(f"token id {bad} is outside this tokenizer's vocabulary [0, {self.vocab_size})")
        return "".join(self.chars[i] for i in ids)

    def to_dict(self) -> dict:
        return {"kind": "char", "chars": self.chars}


class ByteTokenizer:
    """One token per byte of the UTF-8 encoding (256 tokens); decoding replaces invalid UTF-8."""

    kind = "byte"
    vocab_size = 256

    def encode(self, text) -> np.ndarray:
        """Token ids (N,) int64 of ``text`` (a str, encoded as UTF-8, or bytes)."""
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        return np.frombuffer(data, dtype=np.uint8).astype(np.int64)

    def decode(self, ids) -> str:
        ids = np.asarray(ids).reshape(-1)
        if ids.size and (ids.min() < 0 or ids.max() > 255):
            raise ValueError(f"byte token ids lie in [0, 256), got {int(ids.min())}..{int(ids.max())}")
        return ids.astype(np.uint8).tobytes().decode("utf-8", errors="replace")

    def to_dict(self) -> dict:
        return {"kind": "byte"}


TOKENIZERS = ("char", "byte")


def tokenizer_from_dict(d: dict):
    """The tokenizer a checkpoint stored (``tokenizer.to_dict()``); ValueError for anything else."""
    kind = d.get("kind") if isinstance(d, dict) else None
    if kind == "byte":
        return ByteTokenizer()
    if kind == "char" and isinstance(d.get("chars"), str):
        return CharTokenizer(d["chars"])
    raise ValueError(f"a stored tokenizer is {{'kind': 'char', 'chars': ...}} or {{'kind': 'byte'}}, got {d!r}")


def read_text(path, tokenizer: str = "char"):
    """``(tokenizer, ids, sha256)`` of the file ``path`` under the tokenizer named ``tokenizer``.

    Raises ValueError naming the file for a missing, unreadable or empty file, and, with ``char``, for
    one that is not UTF-8 text (use ``--tokenizer byte`` for such a file).
    """
    if tokenizer not in TOKENIZERS:
        raise ValueError(f"tokenizer must be one of {list(TOKENIZERS)}, got {tokenizer!r}")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise ValueError(f"--text {path}: cannot read it: {exc.strerror or exc}") from None
    if not data:
        raise ValueError(f"--text {path}: the file is empty; expected some text to train on")
    digest = hashlib.sha256(data).hexdigest()
    if tokenizer == "byte":
        tok = ByteTokenizer()
        return tok, tok.encode(data), digest
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"--text {path} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                         "the char tokenizer needs UTF-8: use --tokenizer byte for any other file") from None
    tok = CharTokenizer.from_text(text)
    return tok, tok.encode(text), digest


def unigram_entropy(ids, vocab_size: int) -> float:
    """``-sum p log p`` (nats) of the token frequencies ``p`` in ``ids``."""
    counts = np.bincount(np.asarray(ids).reshape(-1), minlength=vocab_size)
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())


@dataclass
class TextData(Splits):
    """A text's sets. ``*_src``, ``*_tgt`` (N, block_size): windows of the training part at every offset
    (views of ``ids``), and the non-overlapping windows of the held-out end; ``tgt`` is ``src`` one
    token on. ``entropy``: the unigram entropy of the training tokens (nats)."""

    task: str
    path: str
    tokenizer: object
    sha256: str
    vocab_size: int
    block_size: int
    num_tokens: int
    num_train_tokens: int
    entropy: float
    train_src: np.ndarray
    train_tgt: np.ndarray
    val_src: np.ndarray
    val_tgt: np.ndarray

    @property
    def seq_len(self):
        return self.block_size

    def stored(self) -> dict:
        """What a checkpoint keeps of the text: the tokenizer (its vocabulary) and the file's digest."""
        return {"tokenizer": self.tokenizer.to_dict(), "sha256": self.sha256,
                "file": os.path.basename(os.fspath(self.path))}


def make_text_task(path, tokenizer: str = "char", block_size: int = 64, val_fraction: float = 0.1) -> TextData:
    """The training windows and held-out end of the text in ``path`` (see the module docstring).

    Raises ValueError naming the file for an empty or unreadable file, a non-UTF-8 file with ``char``,
    and a text too short for one window of ``block_size + 1`` tokens in each part.
    """
    block_size = check_positive_int(block_size, "block_size")
    if not (isinstance(val_fraction, (int, float)) and 0 < val_fraction < 1):
        raise ValueError(f"val_fraction must be a number in (0, 1), got {val_fraction!r}")
    tok, ids, digest = read_text(path, tokenizer)
    n = len(ids)
    n_val = int(math.ceil(n * val_fraction))
    n_train = n - n_val
    need = block_size + 1
    if n_train < need or n_val < need:
        least = max(need / (1 - val_fraction), need / val_fraction)
        raise ValueError(f"--text {path}: {n} {tokenizer} tokens are too few for --seq-len {block_size} with "
                         f"--val-fraction {val_fraction:g}: the training part has {n_train} and the held-out "
                         f"end {n_val}, each needs a window of {need} (seq-len + 1); expected at least "
                         f"{int(math.ceil(least))} tokens (or a smaller --seq-len)")
    windows = np.lib.stride_tricks.sliding_window_view(ids[:n_train], need)          # (n_train - block, block + 1)
    held = ids[n_train:]
    rows = (len(held) - 1) // block_size                                             # non-overlapping windows
    val_src = held[:rows * block_size].reshape(rows, block_size)
    val_tgt = held[1:rows * block_size + 1].reshape(rows, block_size)
    return TextData("text", os.fspath(path), tok, digest, tok.vocab_size, block_size, n, n_train,
                    unigram_entropy(ids[:n_train], tok.vocab_size), windows[:, :-1], windows[:, 1:],
                    val_src, val_tgt)
