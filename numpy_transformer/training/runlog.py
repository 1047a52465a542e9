"""The training log: one JSON object per line (``.jsonl``), written by ``train`` and read by
``plot training``.

Each line has a ``kind`` and a ``step`` (the number of optimisation steps done when it was written)::

    {"kind": "start",  "step": 0,   "time": "...", "config": {...}, "log_every": 1}
    {"kind": "train",  "step": 17,  "loss": 2.71, "accuracy": 0.18, "lr": 8.5e-05, "grad_norm": 1.9,
                       "tokens": 512, "steps": 1}
    {"kind": "val",    "step": 200, "loss": 0.93, "token_accuracy": 0.71, "sequence_accuracy": 0.02,
                       "examples": 1000, "final": false}
    {"kind": "trace",  "step": 300, "summary": "...", "problems": [...],
                       "grad_norms": {"encoder.layers.0": 0.41, ...},
                       "param_grad_norms": {"encoder.layers.0": 1.7, ...}, "records": [...]}
    {"kind": "resume", "step": 400, "time": "..."}
    {"kind": "end",    "step": 1000, "wall_seconds": 71.3}

A run that stops early ends with one of (``train``'s messages say the same)::

    {"kind": "interrupted", "step": 512, "time": "...", "signal": "SIGTERM"}
    {"kind": "diverged",    "step": 57,  "loss": null, "time": "..."}
    {"kind": "error",       "step": 400, "message": "cannot save the checkpoint ...", "time": "..."}

A ``trace`` line's ``grad_norms`` are each layer's input gradient norm (the residual stream entering
it) and ``param_grad_norms`` the norm of all its parameter gradients together, from the input side up
(``plot gradients``).

``train`` lines average the last ``steps`` optimisation steps (``--log-every``; 1 = every step).
Non-finite numbers are written as ``null`` (standard JSON).

Resuming from a checkpoint saved at step k first drops every line with ``step > k`` (written after
that checkpoint by a run that then died), so the log reads as if the run had never stopped: the
``train`` lines of a resumed run are exactly those of the uninterrupted run.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time

__all__ = ["RunLog", "read_log", "default_log_path", "LogPathError", "check_log_path"]


class LogPathError(OSError):
    """A log path that must not be written: a symbolic link (never followed), or another run's log."""


def check_log_path(path: str | os.PathLike, overwrite: bool = True) -> str:
    """Raise :class:`LogPathError` when ``path`` is a symbolic link (a log is never written through
    one: it could point anywhere), or when it exists and ``overwrite`` is false."""
    path = os.fspath(path)
    if os.path.islink(path):
        raise LogPathError(f"the log {path} is a symbolic link (to {os.readlink(path)}); a log is never "
                           "written through a link: remove it or give another --log path")
    if not overwrite and os.path.lexists(path):
        raise LogPathError(f"the log {path} already exists (another run's?); pass --force to replace it, "
                           "or give another --log path")
    return path


def default_log_path(checkpoint_path):
    """``run.npz`` -> ``run.log.jsonl`` (next to the checkpoint)."""
    root, ext = os.path.splitext(os.fspath(checkpoint_path))
    return (root if ext == ".npz" else os.fspath(checkpoint_path)) + ".log.jsonl"


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:       # numpy scalars
        return _clean(value.item())
    return value


def read_log(path):
    """Every entry of a log, in order (a last line cut short by a crash is skipped)."""
    entries = []
    with open(path, encoding="utf-8", errors="replace") as f:         # not a log: no entries
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(entry, dict) and "kind" in entry:
                entries.append(entry)
    return entries


class RunLog:
    """Append-only JSON-lines writer (each line flushed as written).

    Parameters
    ----------
    path : str
    resume_step : int, optional
        Continue an existing log at this step: lines with ``step > resume_step`` are dropped first.
        None starts a new log (an existing file is replaced, unless ``overwrite`` is false).
    overwrite : bool, default True
        False: refuse (:class:`LogPathError`) to start a new log over an existing file.

    A symbolic link at ``path`` is refused (:class:`LogPathError`), never followed: the file is opened
    with ``O_NOFOLLOW``.
    """

    def __init__(self, path: str | os.PathLike, resume_step: int | None = None, overwrite: bool = True):
        self.path = check_log_path(path, overwrite=overwrite or resume_step is not None)
        directory = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(directory, exist_ok=True)
        if resume_step is not None and os.path.exists(self.path):
            kept = [e for e in read_log(self.path) if int(e.get("step", 0)) <= resume_step]
            fd, tmp = tempfile.mkstemp(prefix=".tmp-" + os.path.basename(self.path) + "-", dir=directory)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                for e in kept:
                    f.write(json.dumps(e) + "\n")
            os.replace(tmp, self.path)
            self._f = self._open(os.O_APPEND)
        elif resume_step is not None:
            self._f = self._open(os.O_APPEND)
        else:
            self._f = self._open(os.O_TRUNC if overwrite else os.O_EXCL)

    def _open(self, mode):
        flags = os.O_WRONLY | os.O_CREAT | mode | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(self.path, flags, 0o666)
        except FileExistsError:
            check_log_path(self.path, overwrite=False)             # raises, naming the file
            raise
        except OSError as exc:
            if os.path.islink(self.path):                         # planted between the check and the open
                check_log_path(self.path)
            raise exc
        return os.fdopen(fd, "a" if mode == os.O_APPEND else "w", encoding="utf-8")

    @staticmethod
    def now():
        return time.strftime("%Y-%m-%dT%H:%M:%S")

    def write(self, kind, step, **fields):
        entry = {"kind": kind, "step": int(step)}
        entry.update(_clean(fields))
        self._f.write(json.dumps(entry, allow_nan=False) + "\n")
        self._f.flush()
        return entry

    def close(self):
        if not self._f.closed:
            self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
