"""Reading and writing a Hugging Face folder's weights with the ``safetensors`` package's NumPy API
(``safetensors.numpy``; an optional extra: ``pip install numpy-transformer[hf]``).

A folder holds one ``model.safetensors``, or shards listed by ``model.safetensors.index.json``
(``{"weight_map": {tensor name: shard file}}``). PyTorch pickles (``pytorch_model.bin``, ``*.pt``) are
refused: loading a pickle can run code. ``bfloat16`` tensors (NumPy has no such dtype) are widened to
float32 exactly: a bfloat16 is the top half of a float32's bits.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Dict, List

import numpy as np

from .hf_config import PretrainedFolderError

__all__ = ["safetensors_numpy", "weight_files", "read_tensors", "write_tensors", "SINGLE", "INDEX"]

SINGLE = "model.safetensors"
INDEX = "model.safetensors.index.json"
_PICKLES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")


def safetensors_numpy():
    """The ``safetensors.numpy`` module, or ImportError saying how to install it."""
    try:
        import safetensors.numpy
    except ImportError:
        raise ImportError("Hugging Face folders are read and written with the safetensors package, which is not "
                          "installed: pip install numpy-transformer[hf] (or: pip install safetensors)") from None
    return safetensors.numpy


def weight_files(folder: str) -> List[str]:
    """The paths of the folder's safetensors files (one, or the index's shards, in order).

    Raises
    ------
    PretrainedFolderError
        No ``model.safetensors`` nor index (a folder of pickles only is named as such), an index that
        is not ``{"weight_map": {...}}``, or a shard it lists that is missing.
    """
    index = os.path.join(folder, INDEX)
    if os.path.isfile(index):
        try:
            with open(index, encoding="utf-8") as f:
                weight_map = json.load(f)["weight_map"]
            shards = list(dict.fromkeys(weight_map.values()))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise PretrainedFolderError(f"{index} is not a safetensors index ({{\"weight_map\": {{name: file}}}}): "
                                        f"{exc}") from None
        paths = [os.path.join(folder, s) for s in shards]
        for p in paths:
            if not os.path.isfile(p):
                raise PretrainedFolderError(f"{index} lists the shard {os.path.basename(p)}, which is not in "
                                            f"{folder}")
        return paths
    single = os.path.join(folder, SINGLE)
    if os.path.isfile(single):
        return [single]
    pickles = sorted(n for n in os.listdir(folder) if n.endswith(_PICKLES))
    if pickles:
        raise PretrainedFolderError(f"{folder} holds PyTorch pickle weights only ({', '.join(pickles)}), which are "
                                    "refused (unpickling can run code); convert them to safetensors, e.g. with "
                                    "transformers: AutoModelForCausalLM.from_pretrained(folder)"
                                    ".save_pretrained(folder)")
    raise PretrainedFolderError(f"{folder} holds no {SINGLE} (nor {INDEX})")


def _header(path: str) -> tuple:
    """``(header, data_start)``: a safetensors file's JSON header (after its 8-byte little-endian length)
    and where the data begins."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        if n > size - 8:                      # a damaged file: its header cannot be longer than the file
            raise ValueError(f"its header claims {n:,} bytes but the file has {size:,}")
        header = json.loads(f.read(n))
        if not isinstance(header, dict):
            raise ValueError(f"its header is not a JSON object (got {type(header).__name__})")
        return header, 8 + n


def _read_bfloat16(path: str, names: List[str]) -> Dict[str, np.ndarray]:
    """The bfloat16 tensors ``names`` of ``path`` as float32 (each bfloat16's 16 bits become the high
    half of a float32: the same number)."""
    header, start = _header(path)
    out = {}
    with open(path, "rb") as f:
        for name in names:
            begin, end = header[name]["data_offsets"]
            f.seek(start + begin)
            raw = np.frombuffer(f.read(end - begin), dtype="<u2")
            out[name] = (raw.astype(np.uint32) << 16).view(np.float32).reshape(header[name]["shape"])
    return out


def read_tensors(folder: str) -> Dict[str, np.ndarray]:
    """Every tensor of the folder's safetensors file(s), by name (bfloat16 widened to float32)."""
    st = safetensors_numpy()
    from safetensors import SafetensorError, safe_open
    tensors: Dict[str, np.ndarray] = {}
    for path in weight_files(folder):
        try:
            header, _ = _header(path)
            bf16 = [k for k, v in header.items() if k != "__metadata__" and v.get("dtype") == "BF16"]
            if bf16:
                part = _read_bfloat16(path, bf16)
                with safe_open(path, framework="np") as f:
                    part.update({k: f.get_tensor(k) for k in f.keys() if k not in part})
            else:
                part = st.load_file(path)
        except (OSError, ValueError, KeyError, TypeError, AttributeError, struct.error, SafetensorError) as exc:
            raise PretrainedFolderError(f"{path} is not a readable safetensors file: {exc}") from None
        for k in part:
            if k in tensors:
                raise PretrainedFolderError(f"tensor {k} appears in more than one shard of {folder}")
        tensors.update(part)
    return tensors


def write_tensors(folder: str, tensors: Dict[str, np.ndarray]) -> str:
    """Write ``tensors`` as ``folder/model.safetensors`` (metadata ``{"format": "pt"}``, which
    ``transformers`` requires), replacing a sharded copy's index and shards; the file's path."""
    st = safetensors_numpy()
    index = os.path.join(folder, INDEX)
    if os.path.isfile(index):                 # a stale sharded copy would shadow the new file
        for path in weight_files(folder):
            os.remove(path)
        os.remove(index)
    path = os.path.join(folder, SINGLE)
    st.save_file(tensors, path, metadata={"format": "pt"})
    return path
