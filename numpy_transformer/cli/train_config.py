"""``train --config FILE``: the options of a run in a TOML or JSON file, and the resolved config every
run writes next to its checkpoint (``run.npz`` -> ``run.config.json``), which ``--config`` reads back.

The keys are the options' argparse names, with underscores: ``d_model`` for ``--d-model``,
``num_layers`` for ``--layers``, ``eval_every`` for ``--eval-every``; every option of the "task",
"model" and "optimisation" groups and ``eval_every``, ``log_every``, ``trace_every``. A flag given on
the command line overrides the file. A key that is no such option, or a value of the wrong type (a
string for ``d_model``), is one error naming the key; JSON's ``null`` means "the default". The paths
and switches of one invocation (``save``, ``resume``, ``log``, ``force``, ``quiet`` ...) are not keys.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import os
from typing import Any, Dict

from ..training.trainer import TrainConfig

__all__ = ["CONFIG_KEYS", "load_config", "apply_config", "config_path", "check_config_path", "resolved_config",
           "write_config"]

#: the run settings a config holds beside TrainConfig's fields
RUN_KEYS = ("eval_every", "log_every", "trace_every")
#: every key a config file may hold
CONFIG_KEYS = tuple(f.name for f in dataclasses.fields(TrainConfig)) + RUN_KEYS


def _read(path: str) -> Dict[str, Any]:
    """The file's table: TOML (``.toml``) or JSON (``.json``); ValueError naming the file otherwise."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in (".toml", ".json"):
        raise ValueError(f"--config {path}: expected a .toml or .json file, got {ext or 'no extension'!r}")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise ValueError(f"--config {path}: cannot read it: {exc.strerror or exc}") from None
    if ext == ".json":
        try:
            table = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"--config {path} is not valid JSON: {exc}") from None
    else:
        try:
            import tomllib  # Python >= 3.11
        except ModuleNotFoundError:                        # pragma: no cover - Python 3.10
            try:
                import tomli as tomllib
            except ModuleNotFoundError:
                raise ValueError(f"--config {path}: reading TOML needs Python >= 3.11 (tomllib) or the tomli "
                                 "package (pip install tomli); or give the options as a .json file") from None
        try:
            table = tomllib.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ValueError(f"--config {path} is not valid TOML: {exc}") from None
    if not isinstance(table, dict):
        raise ValueError(f"--config {path}: expected a table of options (key = value), got a JSON "
                         f"{type(table).__name__}")
    return table


def _number(value, integer):
    if isinstance(value, bool):
        return False
    return isinstance(value, int) if integer else isinstance(value, (int, float))


def _check_value(path, key, value, action):
    """Raise ValueError unless ``value`` suits ``action`` (the option ``key`` names); return it as argparse would."""
    def wrong(expected):
        return ValueError(f"--config {path}: key {key!r} must be {expected}, got {value!r} "
                          f"({type(value).__name__})")
    if isinstance(action, argparse._StoreConstAction):
        if not isinstance(value, bool):
            raise wrong("true or false")
        return value
    if action.nargs == 2:
        if not (isinstance(value, list) and len(value) == 2 and all(_number(v, False) for v in value)):
            raise wrong("a list of two numbers")
        return [float(v) for v in value]
    if action.type in (int, float):
        if not _number(value, action.type is int):
            raise wrong("an integer" if action.type is int else "a number")
        return float(value) if action.type is float else value
    if not isinstance(value, str):
        raise wrong("a string")
    if action.choices is not None and value not in action.choices:
        raise ValueError(f"--config {path}: key {key!r} must be one of {', '.join(map(str, action.choices))}, "
                         f"got {value!r}")
    return value


def load_config(path: str, parser: argparse.ArgumentParser) -> Dict[str, Any]:
    """The options of the config file ``path``, checked against ``parser``'s (``train``'s) options:
    ``{dest: value}``, null values left out. Raises ValueError naming the key that is wrong."""
    table = _read(path)
    actions = {a.dest: a for a in parser._actions}
    out = {}
    for key, value in table.items():
        if key not in CONFIG_KEYS or key not in actions:
            close = difflib.get_close_matches(str(key).replace("-", "_"), CONFIG_KEYS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"--config {path}: unknown key {key!r}{hint}; the keys are the options' names with "
                             f"underscores: {', '.join(CONFIG_KEYS)}")
        if value is not None:
            out[key] = _check_value(path, key, value, actions[key])
    return out


def apply_config(args: argparse.Namespace, parser: argparse.ArgumentParser) -> argparse.Namespace:
    """Fill the options ``args`` leaves unset (None) from ``args.config``; a flag given wins."""
    if getattr(args, "config", None):
        for key, value in load_config(args.config, parser).items():
            if getattr(args, key) is None:
                setattr(args, key, value)
    return args


def config_path(checkpoint_path) -> str:
    """``run.npz`` -> ``run.config.json`` (next to the checkpoint)."""
    root, ext = os.path.splitext(os.fspath(checkpoint_path))
    return (root if ext == ".npz" else os.fspath(checkpoint_path)) + ".config.json"


def check_config_path(checkpoint_path, overwrite: bool) -> str:
    """The config path of ``checkpoint_path``; ValueError when it is a symbolic link (never written
    through one), or exists and ``overwrite`` is false (another run's: the rule of the log)."""
    path = config_path(checkpoint_path)
    if os.path.islink(path):
        raise ValueError(f"the run's config {path} is a symbolic link (to {os.readlink(path)}); it is never "
                         "written through a link: remove it or give another --save path")
    if not overwrite and os.path.lexists(path):
        raise ValueError(f"the run's config {path} already exists (another run's?); pass --force to replace it, "
                         "or give another --save path")
    return path


def resolved_config(config: TrainConfig, settings: Dict[str, Any]) -> Dict[str, Any]:
    """Every option of a run after defaults and overrides, as ``--config`` reads it back. A ``--text``
    run leaves out what its text decides (``task``, ``num_train``, ``num_val``)."""
    out = dataclasses.asdict(config)
    out["betas"] = list(out["betas"])
    if out.get("text") is not None:
        for key in ("task", "num_train", "num_val"):
            out.pop(key, None)
    out.update({k: settings[k] for k in RUN_KEYS})
    return out


def write_config(checkpoint_path, document: Dict[str, Any], fresh: bool = False) -> str:
    """Write ``document`` to the config path of ``checkpoint_path`` (atomically: a temporary file
    renamed); ``fresh``: only if nothing is there (a checkpoint claimed for an interrupted run)."""
    path = config_path(checkpoint_path)
    if fresh and os.path.lexists(path):
        return path
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(document, f, indent=2)
            f.write("\n")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path
