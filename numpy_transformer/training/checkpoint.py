"""Checkpoints: one ``.npz`` with a model's ``state_dict``, optimizer state, configuration and extras.

Layout (every entry a plain array; nothing pickled, loaded with ``allow_pickle=False``)::

    __format__             "numpy-transformer-checkpoint"
    __version__            1
    model_kind             "encoder" (TransformerModel), "seq2seq" (Seq2SeqModel) or "gpt" (GPT); absent = "encoder"
    model_config           JSON of the model's constructor arguments
    config                 JSON of the whole run's configuration (task, optimizer, ...), may be "{}"
    model/<key>            one array per state_dict key
    optim/param_groups     JSON of the optimizer's param_groups (torch's layout, params as indices)
    optim/state/<i>/<name> per-parameter optimizer state (arrays; "step" a 0-d float)
    extra/<name>           anything else the caller saves (arrays); extra_json: JSON of the rest

Saving is atomic and durable (:mod:`numpy_transformer.training.checkpoint_files`): the file is written next to
the target under a temporary name ``.tmp-<name>-<pid>-<random>``, fsynced, given the umask's permissions,
renamed over the target with ``os.replace``, and the directory is fsynced, so an interrupted save never
leaves a truncated checkpoint; a full disk raises :class:`CheckpointWriteError` (an ``OSError``: "no
space left on the device") with the previous checkpoint unchanged; the temporary files a killed save
left are removed by the next save or load of that checkpoint.

Loading never unpickles and validates before it reads or builds anything big
(:mod:`numpy_transformer.training.checkpoint_validate`): every member's ``.npy`` header (shape and dtype against
the bytes stored), the format, version, configuration, the model configuration against the stored
weights and this machine's memory, and a training checkpoint's step, batcher and generator states;
:meth:`Checkpoint.check_model` compares every key, shape and dtype *before* anything is written into a
model or optimizer. A refusal raises ``CheckpointError`` naming the field, what it holds and what was
expected.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
import zlib
from dataclasses import dataclass, field

import numpy as np

from .checkpoint_files import CheckpointError, CheckpointWriteError, atomic_write, remove_stale_temps, temp_prefix
from .checkpoint_validate import (
    check_finite_state,
    check_model_config,
    check_model_memory,
    check_training_state,
    read_headers,
)

__all__ = ["save_checkpoint", "load_checkpoint", "Checkpoint", "CheckpointError", "CheckpointWriteError",
           "FORMAT", "VERSION"]

FORMAT = "numpy-transformer-checkpoint"
VERSION = 1


def _json_array(obj):
    return np.array(json.dumps(obj, sort_keys=True))


def save_checkpoint(path, model, optimizer=None, config=None, extra_arrays=None, extra_json=None):
    """Write ``model`` (its ``config`` and ``state_dict``), ``optimizer`` and extras to ``path`` atomically.

    Returns the path written (exactly ``path``: no ``.npz`` suffix is appended). Raises TypeError when
    ``model`` has no ``config`` (only a ``TransformerModel`` can be rebuilt from a checkpoint), and
    FileNotFoundError / IsADirectoryError / PermissionError, before writing anything, for a path that
    cannot be a file or whose directory cannot be written. A write that fails (a full disk) raises
    :class:`CheckpointWriteError` (an ``OSError``: "cannot save checkpoint PATH: no space left on the
    device ...") and leaves the previous file at ``path`` unchanged. The file's permissions are
    ``0o666`` less the umask; stale temporary files of earlier, killed saves of ``path`` are removed.
    """
    config_of = getattr(model, "__dict__", {}).get("config")
    if hasattr(config_of, "to_dict"):                   # GPT's GPTConfig dataclass
        config_of = config_of.to_dict()
    if not isinstance(config_of, dict):
        raise TypeError(f"save_checkpoint needs a TransformerModel (or Seq2SeqModel, GPT: it stores model.config to "
                        f"rebuild it), got "
                        f"{type(model).__name__}; for any other module save module.state_dict() with np.savez")
    path = check_save_path(path)
    arrays = {"__format__": np.array(FORMAT), "__version__": np.array(VERSION),
              "model_kind": np.array(_model_kind(model)),
              "model_config": _json_array(config_of), "config": _json_array(config or {}),
              "extra_json": _json_array(extra_json or {})}
    for k, v in model.state_dict().items():
        arrays[f"model/{k}"] = np.asarray(v)
    if optimizer is not None:
        sd = optimizer.state_dict()
        arrays["optim/param_groups"] = _json_array(sd["param_groups"])
        arrays["optim/type"] = np.array(type(optimizer).__name__)
        for i, s in sd["state"].items():
            for name, v in s.items():
                arrays[f"optim/state/{i}/{name}"] = np.asarray(v)
    for k, v in (extra_arrays or {}).items():
        arrays[f"extra/{k}"] = np.asarray(v)
    bad = [k for k, v in arrays.items() if v.dtype.hasobject]
    if bad:
        raise TypeError(f"checkpoint entries must be plain arrays (they are loaded without pickle), but "
                        f"{bad} hold Python objects")
    atomic_write(path, lambda f: np.savez(f, **arrays))
    return path


def _model_kind(model):
    return getattr(type(model), "model_kind", "encoder")


def check_save_path(path):
    """``path`` as a string, after checking that a file can be written there (its directory exists, it
    is not itself a directory, and a file can be created in the directory: tried, since permission bits
    do not tell, e.g. for root or on a read-only mount); raises FileNotFoundError / IsADirectoryError /
    PermissionError naming the problem."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise IsADirectoryError(f"checkpoint path {path} is a directory; give a file name such as "
                                f"{os.path.join(path, 'run.npz')}")
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise NotADirectoryError(f"cannot save a checkpoint to {path}: {directory} is a file, not a directory")
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"cannot save a checkpoint to {path}: the directory {directory} does not exist")
    try:
        fd, probe = tempfile.mkstemp(prefix=temp_prefix(path), dir=directory)
    except OSError as exc:
        raise PermissionError(f"cannot save a checkpoint to {path}: no file can be created in the directory "
                              f"{directory} ({exc.strerror or exc})") from None
    os.close(fd)
    os.unlink(probe)
    return path


@dataclass
class Checkpoint:
    """What :func:`load_checkpoint` read (nothing applied yet)."""

    path: str
    model_config: dict
    config: dict
    model_state: dict
    optim_type: str = None
    optim_state: dict = None
    extra_arrays: dict = field(default_factory=dict)
    extra_json: dict = field(default_factory=dict)
    model_kind: str = "encoder"

    # -- validation and application -------------------------------------------------------------
    def check_model(self, model):
        """Raise CheckpointError unless ``model`` has this checkpoint's kind, configuration, keys, shapes, dtypes."""
        if _model_kind(model) != self.model_kind:
            raise CheckpointError(f"{self.path} holds a model of kind {self.model_kind!r}, not "
                                  f"{_model_kind(model)!r} ({type(model).__name__})")
        cfg = model.config.to_dict() if hasattr(model.config, "to_dict") else model.config
        diffs = [f"{k}: checkpoint {self.model_config.get(k)!r}, model {cfg.get(k)!r}"
                 for k in sorted(set(self.model_config) | set(cfg))
                 if self.model_config.get(k) != cfg.get(k)]
        if diffs:
            raise CheckpointError(f"{self.path} was saved from another model configuration: " + "; ".join(diffs))
        own = model.state_dict()
        missing = [k for k in own if k not in self.model_state]
        unexpected = [k for k in self.model_state if k not in own]
        if missing or unexpected:
            raise CheckpointError(f"{self.path}: state_dict keys differ: missing {missing}, unexpected {unexpected}")
        for k, v in own.items():
            got = self.model_state[k]
            if got.shape != v.shape or got.dtype != v.dtype:
                raise CheckpointError(f"{self.path}: {k} is {got.dtype}{list(got.shape)}, the model has "
                                      f"{v.dtype}{list(v.shape)}")

    def load_model(self, model):
        """Validate, then copy the weights into ``model``."""
        self.check_model(model)
        model.load_state_dict(self.model_state)
        return model

    def build_model(self, seed=None):
        """A fresh model of this checkpoint's kind with its configuration and weights. Which class and
        how it is built from ``model_config`` is the model kinds' policy, not the format's:
        :func:`numpy_transformer.training.kinds.model_from_checkpoint` (a ``model_config`` whose sizes
        disagree with the stored weights raises CheckpointError before anything is built)."""
        from .kinds import model_from_checkpoint
        return model_from_checkpoint(self, seed=seed)

    def load_optimizer(self, optimizer):
        """Validate, then restore ``optimizer``'s state (same optimizer class and parameter shapes)."""
        if self.optim_state is None:
            raise CheckpointError(f"{self.path} holds no optimizer state")
        if self.optim_type != type(optimizer).__name__:
            raise CheckpointError(f"{self.path} holds {self.optim_type} state, not {type(optimizer).__name__}")
        params = optimizer.params()
        for i, s in self.optim_state["state"].items():
            for name, v in s.items():
                p = params[i] if 0 <= i < len(params) else None
                if p is not None and isinstance(v, np.ndarray) and v.ndim > 0 and \
                        (v.dtype != p.data.dtype or v.shape != p.data.shape):
                    raise CheckpointError(f"{self.path}: optimizer state {name!r} of parameter {i} is "
                                          f"{v.dtype}{list(v.shape)}, the parameter is "
                                          f"{p.data.dtype}{list(p.data.shape)}")
        try:
            optimizer.load_state_dict(self.optim_state)
        except (ValueError, KeyError, TypeError) as exc:
            raise CheckpointError(f"{self.path}: optimizer state does not fit: {exc}") from exc
        return optimizer


def load_checkpoint(path):
    """Read and validate a checkpoint; returns a :class:`Checkpoint` (nothing applied, nothing built).

    Every array's header is checked before its data is read, and nothing is unpickled. A training
    checkpoint (one with a training ``config``, as ``train`` writes) is checked whole: its model
    configuration against the stored weights, its training configuration against the model
    configuration, and its step, batcher and generator states and run settings, so that a ``Trainer``
    can be built from it. A NaN/inf weight or optimizer state, or a negative Adam ``exp_avg_sq``, is
    refused (naming the tensor): no training step leaves one. Stale temporary files of killed saves
    of ``path`` are removed. Raises FileNotFoundError for a missing file and CheckpointError (naming
    the field, what it holds and what was expected) for anything else that cannot be used.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    if os.path.isfile(path) and os.path.getsize(path) == 0 or path == os.devnull:
        raise CheckpointError(f"{path} is not a numpy-transformer checkpoint: it is empty (0 bytes)")
    if os.path.isfile(path):
        remove_stale_temps(path)
    try:
        npz = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise CheckpointError(f"{path} is not a numpy-transformer checkpoint: it cannot be read as an .npz "
                              f"archive ({type(exc).__name__})") from exc
    if not isinstance(npz, np.lib.npyio.NpzFile):
        raise CheckpointError(f"{path} is not a numpy-transformer checkpoint: "
                              "it holds a single array, not an .npz archive")
    try:
        with npz:
            return _read(path, npz, read_headers(path))
    except CheckpointError:
        raise
    except (ValueError, OSError, KeyError, EOFError, zipfile.BadZipFile, zlib.error, json.JSONDecodeError) as exc:
        if "allow_pickle" in str(exc) or "Object arrays" in str(exc):
            raise CheckpointError(f"{path} holds pickled Python objects; checkpoints hold plain arrays only and "
                                  "are never unpickled (loading a pickle can run arbitrary code)") from exc
        raise CheckpointError(f"{path} is damaged: {type(exc).__name__}: {exc}") from exc


def _read(path, npz, headers):
    files = set(npz.files)
    if "__format__" not in files or str(npz["__format__"]) != FORMAT:
        raise CheckpointError(f"{path} is not a numpy-transformer checkpoint (no {FORMAT!r} marker)")
    try:
        version = int(npz["__version__"])
    except (KeyError, ValueError, TypeError) as exc:
        raise CheckpointError(f"{path} has no readable format version ({exc})") from exc
    if version != VERSION:
        raise CheckpointError(f"{path} has checkpoint format version {version}; this code reads version {VERSION}")
    try:
        model_config = json.loads(str(npz["model_config"]))
        config = json.loads(str(npz["config"]))
        extra_json = json.loads(str(npz["extra_json"]))
    except (KeyError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path}: damaged configuration entries: {exc}") from exc
    if not all(isinstance(c, dict) for c in (model_config, config, extra_json)):
        raise CheckpointError(f"{path}: damaged configuration entries (not JSON objects)")
    model_kind = str(npz["model_kind"]) if "model_kind" in files else "encoder"    # older files: the encoder
    shapes = {k[len("model/"):]: headers[k][0] for k in headers if k.startswith("model/")}
    if config:                            # a training checkpoint: Trainer.resume builds from it
        check_model_config(path, model_kind, model_config, shapes)
        perm_shape = headers["extra/batcher_perm"][0] if "extra/batcher_perm" in headers else None
        check_training_state(path, model_kind, model_config, config, extra_json, perm_shape,
                             lambda: npz["extra/batcher_perm"])
    else:
        check_model_memory(path, model_kind, model_config)
    model_state = {k[len("model/"):]: npz[k] for k in npz.files if k.startswith("model/")}
    optim_state, optim_type = None, None
    if "optim/param_groups" in files:
        optim_type = str(npz["optim/type"])
        state = {}
        for k in npz.files:
            if k.startswith("optim/state/"):
                i, name = k[len("optim/state/"):].split("/", 1)
                state.setdefault(int(i), {})[name] = npz[k]
        optim_state = {"state": state, "param_groups": json.loads(str(npz["optim/param_groups"]))}
    check_finite_state(path, model_state, optim_state)
    extra_arrays = {k[len("extra/"):]: npz[k] for k in npz.files if k.startswith("extra/")}
    return Checkpoint(path, model_config, config, model_state, optim_type, optim_state, extra_arrays, extra_json,
                      model_kind)
