"""Hugging Face folders: :func:`load_pretrained` (``GPT.from_pretrained``) and :func:`save_pretrained`
(``GPT.save_pretrained``) for GPT-2 and Llama, with no torch and no pickle.

A folder is ``config.json`` (:mod:`.hf_config` maps it to a ``GPTConfig``) plus ``model.safetensors``
or its shards (:mod:`.safetensors_io`), whose tensor names and layouts :mod:`.hf_weights` maps to the
model's ``state_dict``; its ``tokenizer.json`` (the optional ``tokenizers`` package) is
:func:`load_tokenizer`'s (:mod:`.hf_tokenizer`). Every step refuses what it cannot map exactly, with one
:class:`PretrainedFolderError` naming the file, key or tensor.
"""

from __future__ import annotations

import json
import os

from ...utils.checks import as_float_dtype
from .hf_config import MODEL_TYPES, PretrainedFolderError, config_from_hf, config_to_hf, hf_model_type
from .hf_tokenizer import HFTokenizer, load_tokenizer
from .hf_weights import from_hf, to_hf
from .safetensors_io import read_tensors, write_tensors

__all__ = ["load_pretrained", "save_pretrained", "read_config", "PretrainedFolderError", "MODEL_TYPES",
           "config_from_hf", "config_to_hf", "hf_model_type", "to_hf", "load_tokenizer", "HFTokenizer"]


def _folder(path) -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a folder's path (str or os.PathLike), got {type(path).__name__}")
    path = os.fspath(path)
    if not os.path.isdir(path):
        what = "a file, not a folder" if os.path.exists(path) else "not found"
        raise FileNotFoundError(f"path: {path!r} is {what} (expected a Hugging Face model folder: config.json "
                                "and model.safetensors)")
    return path


def read_config(path) -> dict:
    """The folder's ``config.json``, parsed; PretrainedFolderError when it is absent or not JSON."""
    folder = _folder(path)
    name = os.path.join(folder, "config.json")
    if not os.path.isfile(name):
        raise PretrainedFolderError(f"{folder} has no config.json (a Hugging Face model folder holds config.json "
                                    "and model.safetensors)")
    try:
        with open(name, encoding="utf-8") as f:
            return json.load(f)
    except (ValueError, UnicodeDecodeError) as exc:
        raise PretrainedFolderError(f"{name} is not valid JSON: {exc}") from None


def load_pretrained(cls, path, dtype="float32"):
    """A ``cls`` (:class:`~numpy_transformer.GPT`) with the weights of the Hugging Face folder ``path``.

    Parameters
    ----------
    cls : type
        The model class, built from the mapped ``GPTConfig`` (``dropout=0.0``).
    path : str or os.PathLike
        A local folder: ``config.json`` with ``model_type`` ``"gpt2"`` or ``"llama"``, and
        ``model.safetensors`` (or ``model.safetensors.index.json`` and its shards).
    dtype : {"float32", "float64"}
        The model's dtype; the file's tensors (float16, bfloat16, float32, float64) are cast to it.

    Raises
    ------
    FileNotFoundError
        ``path`` is not a folder.
    PretrainedFolderError (a ValueError)
        No config.json, another model_type, pickles only, a key that does not map, missing or unexpected
        tensors, a shape mismatch.
    ImportError
        The ``safetensors`` package is missing (``pip install numpy-transformer[hf]``).
    """
    dt = as_float_dtype(dtype).name
    hf = read_config(path)
    cfg = config_from_hf(hf, dt)
    tensors = read_tensors(_folder(path))
    model = cls(cfg, seed=0)
    params = dict(model.named_parameters())
    arrays = from_hf(cfg, tensors, {name: p.shape for name, p in params.items()})
    for name, p in params.items():
        p.data[...] = arrays[name].astype(p.dtype, copy=False)
    model.eval()
    return model


def save_pretrained(model, path, overwrite: bool = False) -> None:
    """Write ``model`` (a :class:`~numpy_transformer.GPT`) as a Hugging Face folder: ``config.json`` and
    ``model.safetensors``, which ``transformers.AutoModelForCausalLM.from_pretrained`` loads to the same
    logits, and :func:`load_pretrained` to the same arrays bit for bit.

    The folder is created if needed; an existing empty one is written into. A folder that holds
    anything is refused (FileExistsError naming it and what it holds, nothing written), so a model
    loaded from a folder is never saved over its source by mistake; ``overwrite=True`` writes into it
    (its ``config.json`` and weights, sharded or not, are replaced; other files stay). A model neither
    GPT-2 nor Llama can express raises PretrainedFolderError naming its fields
    (:func:`~.hf_config.hf_model_type`), before anything is written.
    """
    cfg = model.config
    hf = config_to_hf(cfg)                       # raises first: nothing written for a model HF cannot hold
    tensors = to_hf(cfg, {name: p.data for name, p in model.named_parameters()})
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a folder's path (str or os.PathLike), got {type(path).__name__}")
    path = os.fspath(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise FileExistsError(f"path: {path!r} is a file, not a folder")
    held = sorted(os.listdir(path)) if os.path.isdir(path) else []
    if held and not overwrite:
        shown = ", ".join(held[:5]) + (f", ... ({len(held)} entries)" if len(held) > 5 else "")
        raise FileExistsError(f"path: {path!r} is not empty (it holds {shown}); save to a new folder, or pass "
                              "overwrite=True to replace its config.json and weights")
    os.makedirs(path, exist_ok=True)
    write_tensors(path, tensors)
    with open(os.path.join(path, "config.json"), "w", encoding="utf-8") as f:
        json.dump(hf, f, indent=2, sort_keys=True)
        f.write("\n")

