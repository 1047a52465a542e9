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
``train`` lines of a resumed run are exactly those of the uninterrupted run. The trimmed log replaces
the old one atomically and durably, as a checkpoint does (``checkpoint_files.atomic_write``: the
permissions of any new file, ``0o666`` less the umask; fsynced; a temporary file left by a killed
process removed by the next trim).

A checkpoint stores where its run's log is (``run.log`` of ``extra_json``) as :data:`NEXT_TO_CHECKPOINT`
(``run.npz`` -> ``run.log.jsonl``), as the file name of a ``.jsonl`` in the checkpoint's own directory,
as :data:`LOG_ELSEWHERE` (a ``--log`` outside that directory, which is not recorded: ``--resume`` then
needs ``--log PATH`` again), or as None (``--no-log``); :func:`stored_log` makes that value and
:func:`resolve_stored_log` reads it back, refusing any other (a path elsewhere in a tampered file).

A line that cannot be written (a full disk) raises :class:`LogWriteError`, naming the log and the cause.
"""

from __future__ import annotations

import json
import math
import os
import time

from .checkpoint_files import NO_SPACE, atomic_write

__all__ = ["RunLog", "read_log", "default_log_path", "LogPathError", "LogWriteError", "check_log_path",
           "NEXT_TO_CHECKPOINT", "LOG_ELSEWHERE", "stored_log", "resolve_stored_log"]

NEXT_TO_CHECKPOINT = "next-to-checkpoint"    # the stored "log" of a log at default_log_path(checkpoint)
LOG_ELSEWHERE = "elsewhere"                  # the stored "log" of a --log outside the checkpoint's directory


class LogWriteError(OSError):
    """A log line (or the trimmed log of a resumed run) could not be written: ``str()`` is one line
    naming the log and the cause ("no space left on the device" for a full disk)."""

    def __str__(self):
        return str(self.strerror)


def _log_write_error(path, exc: OSError) -> LogWriteError:
    if isinstance(exc.__cause__, OSError):       # atomic_write's CheckpointWriteError: its own cause
        exc = exc.__cause__
    cause = NO_SPACE.get(exc.errno) or exc.strerror or str(exc)
    return LogWriteError(exc.errno, f"cannot write the log {path}: {cause}")


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


def stored_log(log_path, checkpoint_path):
    """What a checkpoint at ``checkpoint_path`` stores as its run's log: None (no log),
    :data:`NEXT_TO_CHECKPOINT`, the file name of a ``.jsonl`` log in the checkpoint's directory, or
    :data:`LOG_ELSEWHERE`."""
    if log_path is None:
        return None
    log, ckpt = os.path.abspath(os.fspath(log_path)), os.path.abspath(os.fspath(checkpoint_path))
    if log == os.path.abspath(default_log_path(ckpt)):
        return NEXT_TO_CHECKPOINT
    if os.path.dirname(log) == os.path.dirname(ckpt) and log.endswith(".jsonl"):
        return os.path.basename(log)
    return LOG_ELSEWHERE


def resolve_stored_log(checkpoint_path, stored):
    """The log path a checkpoint's stored ``run.log`` names (None: no log; :data:`LOG_ELSEWHERE` as it
    is). Raises ValueError for anything :func:`stored_log` never writes: a path outside the checkpoint's
    directory, or a file that is not ``.jsonl``. (An absolute path inside that directory, as older
    checkpoints stored it, is read as its file name.)"""
    if stored is None or stored == LOG_ELSEWHERE:
        return stored
    if stored == NEXT_TO_CHECKPOINT:
        return default_log_path(checkpoint_path)
    directory = os.path.dirname(os.path.abspath(os.fspath(checkpoint_path)))
    name = os.path.basename(stored) if isinstance(stored, str) else ""
    inside = isinstance(stored, str) and (stored == name or os.path.dirname(stored) == directory)
    if not inside or not name.endswith(".jsonl") or name.startswith("."):
        raise ValueError(f"run.log must be None, {NEXT_TO_CHECKPOINT!r}, {LOG_ELSEWHERE!r} or the name of a "
                         f".jsonl file in the checkpoint's directory {directory}, got {stored!r}")
    return os.path.join(directory, name)


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
    with ``O_NOFOLLOW``. A log that cannot be written (the trim, or any line: a full disk) raises
    :class:`LogWriteError`.
    """

    def __init__(self, path: str | os.PathLike, resume_step: int | None = None, overwrite: bool = True):
        self.path = check_log_path(path, overwrite=overwrite or resume_step is not None)
        directory = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(directory, exist_ok=True)
        if resume_step is not None and os.path.exists(self.path):
            kept = [e for e in read_log(self.path) if int(e.get("step", 0)) <= resume_step]
            text = "".join(json.dumps(e) + "\n" for e in kept).encode("utf-8")
            try:                          # umask permissions, fsync, stale temp files of a killed trim removed
                atomic_write(self.path, lambda f: f.write(text))
            except OSError as exc:
                raise _log_write_error(self.path, exc) from exc
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
            raise _log_write_error(self.path, exc) from exc
        return os.fdopen(fd, "a" if mode == os.O_APPEND else "w", encoding="utf-8")

    @staticmethod
    def now():
        return time.strftime("%Y-%m-%dT%H:%M:%S")

    def write(self, kind, step, **fields):
        entry = {"kind": kind, "step": int(step)}
        entry.update(_clean(fields))
        try:
            self._f.write(json.dumps(entry, allow_nan=False) + "\n")
            self._f.flush()
        except OSError as exc:                        # a full disk: say which file, and why
            raise _log_write_error(self.path, exc) from exc
        return entry

    def close(self):
        if not self._f.closed:
            try:
                self._f.close()
            except OSError:                          # its unwritten buffer: the error was raised already
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
