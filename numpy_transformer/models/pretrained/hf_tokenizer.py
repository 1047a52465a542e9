"""A Hugging Face folder's ``tokenizer.json``, read with the optional ``tokenizers`` package.

:func:`load_tokenizer` gives an :class:`HFTokenizer`: ``encode(text)`` -> token ids (N,) int64 and
``decode(ids)`` -> text, with the semantics of ``transformers``' fast tokenizer built from the same file
(``PreTrainedTokenizerFast(tokenizer_file=...)``): ``encode`` adds the special tokens the file's
post-processor adds (Llama's ``<s>``), ``decode`` keeps them unless ``skip_special_tokens=True``.
``GPT.generate`` itself stays ids in, ids out, as Hugging Face's: text is the tokenizer's business.

A folder without ``tokenizer.json`` raises :class:`~.hf_config.PretrainedFolderError`; without the
``tokenizers`` package, ImportError with the command that installs it. Either way the model still
loads, and works in token ids.
"""

from __future__ import annotations

import os

import numpy as np

from .hf_config import PretrainedFolderError

__all__ = ["HFTokenizer", "load_tokenizer", "TOKENIZER_FILE"]

TOKENIZER_FILE = "tokenizer.json"


class HFTokenizer:
    """The tokenizer of ``tokenizer.json`` (wrapping a ``tokenizers.Tokenizer``), ids as NumPy arrays.

    Parameters
    ----------
    tokenizer : tokenizers.Tokenizer
        The parsed file.
    path : str
        Where it was read from (named in errors).
    """

    kind = "tokenizer.json"

    def __init__(self, tokenizer, path: str):
        self.tokenizer = tokenizer
        self.path = path

    @property
    def vocab_size(self) -> int:
        """The number of ids the tokenizer can give (its added tokens included)."""
        return int(self.tokenizer.get_vocab_size(with_added_tokens=True))

    def encode(self, text: str, add_special_tokens: bool = True) -> np.ndarray:
        """Token ids (N,) int64 of ``text``, as ``transformers``' ``tokenizer(text).input_ids``."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        return np.asarray(self.tokenizer.encode(text, add_special_tokens=add_special_tokens).ids, dtype=np.int64)

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        """The text of token ids ``ids`` (each in ``[0, vocab_size)``), as ``transformers``' ``decode``."""
        ids = np.asarray(ids).reshape(-1).tolist()
        bad = next((i for i in ids if not 0 <= i < self.vocab_size), None)
        if bad is not None:
            raise ValueError(f"token id {bad} is outside the vocabulary [0, {self.vocab_size}) of {self.path}")
        return self.tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)


def load_tokenizer(path) -> HFTokenizer:
    """The tokenizer of the Hugging Face folder ``path`` (its ``tokenizer.json``).

    Parameters
    ----------
    path : str or os.PathLike
        A model folder, as ``GPT.from_pretrained`` takes, holding ``tokenizer.json``.

    Returns
    -------
    HFTokenizer
        ``encode(text)`` -> ids (N,) int64, ``decode(ids)`` -> text; feed ``encode(text)[None]`` to
        ``GPT.generate`` and decode its output rows.

    Raises
    ------
    FileNotFoundError
        ``path`` is not a folder.
    PretrainedFolderError (a ValueError)
        The folder has no ``tokenizer.json`` (only the older ``vocab.json``/``merges.txt``, say), or the
        file cannot be parsed.
    ImportError
        The ``tokenizers`` package is missing (``pip install numpy-transformer[hf]``).
    """
    from . import _folder
    folder = _folder(path)
    name = os.path.join(folder, TOKENIZER_FILE)
    if not os.path.isfile(name):
        others = sorted(f for f in ("vocab.json", "merges.txt", "tokenizer.model") if os.path.exists(
            os.path.join(folder, f)))
        found = f" (it has {', '.join(others)}, which this code does not read)" if others else ""
        raise PretrainedFolderError(f"{folder} has no {TOKENIZER_FILE}{found}; without it the model works in "
                                    "token ids")
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise ImportError(f"reading {name} needs the tokenizers package (pip install tokenizers, or pip install "
                          "numpy-transformer[hf]); without it the model works in token ids") from None
    try:
        tok = Tokenizer.from_file(name)
    except Exception as exc:                         # tokenizers raises its own Exception subclass
        raise PretrainedFolderError(f"{name} is not a tokenizer file tokenizers can read: "
                                    f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    return HFTokenizer(tok, name)
