"""What ``predict``, ``evaluate``, ``sample`` and ``plot attention`` open: :func:`open_model`.

A path is one of four things, told apart here once (:attr:`Opened.origin`):

* ``"train"`` -- a checkpoint ``train --save`` wrote for a synthetic task (its task decides the inputs);
* ``"text"`` -- one ``train --model gpt --text FILE`` wrote: a language model with its vocabulary;
* ``"python"`` -- one saved from Python (``save_checkpoint(path, model)``): a model, no task, no tokenizer;
* ``"folder"`` -- a Hugging Face folder (``GPT.from_pretrained``), with the tokenizer of its
  ``tokenizer.json`` when the ``tokenizers`` package is installed.

A language model (a text checkpoint, a folder, or a GPT saved from Python) reads text when it has a
tokenizer and token ids otherwise; :attr:`Opened.no_text` says why it has none.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

__all__ = ["Opened", "open_model", "parse_ids", "visible"]


def visible(token: str) -> str:
    """A token's text as a label: newline, tab and space made visible (``\\n``, ``\\t``, ``␣``)."""
    return token.replace("\n", "\\n").replace("\t", "\\t").replace(" ", "␣") or "''"


def parse_ids(text: str, vocab_size: int, flag: str) -> np.ndarray:
    """Token ids (N,) int64 from ``text`` (integers separated by spaces or commas, each in [0, V))."""
    try:
        ids = [int(t) for t in text.replace(",", " ").split()]
    except ValueError:
        raise ValueError(f"{flag} must be token ids separated by spaces, got {text!r}") from None
    bad = next((i for i in ids if not 0 <= i < vocab_size), None)
    if bad is not None:
        raise ValueError(f"{flag}: token ids must lie in [0, {vocab_size}), got {bad}")
    return np.array(ids, dtype=np.int64)


@dataclass
class Opened:
    """A loaded model and what it came with (see the module docstring)."""

    path: str
    origin: str
    model_kind: str
    model: object
    ckpt: object = None
    config: object = None
    tokenizer: object = None
    no_text: str = None

    @property
    def is_language_model(self) -> bool:
        """A model that continues token sequences: a text checkpoint, a folder, a GPT saved from Python."""
        return self.origin in ("text", "folder") or (self.origin == "python" and self.model_kind == "gpt")

    @property
    def description(self) -> str:
        return {"train": f"a train --model {self.model_kind} checkpoint of task "
                         f"{getattr(self.config, 'task', '?')}",
                "text": "a train --text checkpoint",
                "python": f"{'an' if self.model_kind[0] in 'aeiou' else 'a'} {self.model_kind} checkpoint saved "
                          "from Python (no task, no tokenizer)",
                "folder": "a Hugging Face folder"}[self.origin]

    def encode(self, text: str, flag: str) -> np.ndarray:
        """``text`` as token ids: through the tokenizer, or, without one, parsed as ids (the error says why)."""
        vocab = self.model.config.vocab_size
        if self.tokenizer is None:
            try:
                return parse_ids(text, vocab, flag)
            except ValueError as exc:
                raise ValueError(f"{exc} ({self.path}: {self.no_text})") from None
        try:
            return self.tokenizer.encode(text)
        except ValueError as exc:
            raise ValueError(f"{flag} {text!r}: {exc}") from None

    def decode(self, ids) -> str:
        """The text of ``ids`` (special tokens dropped), or the ids separated by spaces without a tokenizer."""
        if self.tokenizer is None:
            return " ".join(str(int(i)) for i in np.asarray(ids).reshape(-1))
        if self.origin == "folder":                                   # tokenizer.json: no <s>, </s> in the text
            return self.tokenizer.decode(ids, skip_special_tokens=True)
        return self.tokenizer.decode(ids)

    def labels(self, ids) -> list:
        """One label per token: its text, made visible (``␣cat``, ``<s>``), or its id without a tokenizer."""
        ids = np.asarray(ids).reshape(-1)
        if self.tokenizer is None:
            return [str(int(i)) for i in ids]
        return [visible(self.tokenizer.decode([i])) for i in ids]


def _open_folder(path):
    from ..models.gpt import GPT
    from ..models.pretrained import load_tokenizer
    from ..models.pretrained.hf_tokenizer import TOKENIZER_FILE
    model = GPT.from_pretrained(path)
    tokenizer, no_text = None, None
    if not os.path.isfile(os.path.join(path, TOKENIZER_FILE)):
        no_text = f"it has no {TOKENIZER_FILE}, so the prompt is token ids separated by spaces (and so is the output)"
    else:
        try:
            tokenizer = load_tokenizer(path)                    # a damaged file is an error, not ids
        except ImportError as exc:
            no_text = f"{exc}; until then the prompt is token ids separated by spaces (and so is the output)"
    if tokenizer is not None and tokenizer.vocab_size > model.config.vocab_size:
        raise ValueError(f"{path}: its {TOKENIZER_FILE} has {tokenizer.vocab_size} tokens but the model "
                         f"{model.config.vocab_size}; the tokenizer belongs to another model")
    return Opened(os.fspath(path), "folder", "gpt", model, tokenizer=tokenizer, no_text=no_text)


def open_model(path) -> Opened:
    """Open ``path`` (a checkpoint file or a Hugging Face folder) as :class:`Opened`.

    Raises FileNotFoundError, CheckpointError / PretrainedFolderError (ValueErrors) or ImportError
    (no ``safetensors`` for a folder), each naming the path."""
    if os.path.isdir(path):
        if not os.path.isfile(os.path.join(path, "config.json")):
            raise ValueError(f"{path} is not a numpy-transformer checkpoint (a .npz file) but a folder, and it has "
                             "no config.json, which a Hugging Face model folder holds (with model.safetensors)")
        return _open_folder(path)
    from ..tasks.text import tokenizer_from_dict
    from ..training.checkpoint import load_checkpoint
    from ..training.kinds import TEXT_TASK, model_from_checkpoint
    from ..training.trainer import checkpoint_config
    ckpt = load_checkpoint(path)
    if not ckpt.config:
        return Opened(path, "python", ckpt.model_kind, model_from_checkpoint(ckpt), ckpt,
                      no_text="it was saved from Python with no tokenizer, so the prompt is token ids "
                              "separated by spaces (and so is the output)")
    config = checkpoint_config(ckpt)
    model = model_from_checkpoint(ckpt)
    if config.task != TEXT_TASK:
        return Opened(path, "train", ckpt.model_kind, model, ckpt, config)
    stored = ckpt.extra_json.get("text") or {}
    try:
        tok = tokenizer_from_dict(stored.get("tokenizer"))
    except ValueError as exc:
        raise ValueError(f"{path}: its vocabulary is missing or damaged: {exc}") from None
    if tok.vocab_size != model.config.vocab_size:
        raise ValueError(f"{path}: its tokenizer has {tok.vocab_size} tokens but the model {model.config.vocab_size};"
                         " the checkpoint is damaged")
    return Opened(path, "text", "gpt", model, ckpt, config, tokenizer=tok)
