"""The file side of checkpoints: atomic, durable writes and the clean-up of what an interrupted one left.

A checkpoint ``run.npz`` is written to a temporary file beside it, ``.tmp-run.npz-<pid>-<random>``
(``<pid>``: the writing process), which is flushed and fsynced, renamed over ``run.npz`` with
``os.replace`` (atomic), and then the directory is fsynced so that the rename itself survives a power
cut. The file gets the permissions any new file gets (``0o666`` less the umask), not ``mkstemp``'s 0600.

A writer killed with SIGKILL (or a power cut) leaves its temporary file behind. The next save of
``run.npz``, and the next :func:`~numpy_transformer.training.checkpoint.load_checkpoint` of it, remove the stale
ones of that checkpoint only: those whose writer process is gone, and any older than
:data:`STALE_SECONDS` (a live writer touches its file all the time; after an hour its process id may
have been reused). A concurrent live writer's temporary file is left alone.

A write that fails (a full disk: ENOSPC, a quota: EDQUOT, an I/O error) removes its temporary file,
leaves the previous checkpoint as it was, and raises :class:`CheckpointWriteError`, an ``OSError``
whose message names the path and the cause.
"""

from __future__ import annotations

import errno
import os
import re
import tempfile
import time
import warnings

__all__ = ["CheckpointError", "CheckpointWriteError", "atomic_write", "remove_stale_temps", "temp_prefix",
           "STALE_SECONDS"]


class CheckpointError(ValueError):
    """A checkpoint that cannot be used here: wrong format or version, or another configuration."""

STALE_SECONDS = 3600.0

NO_SPACE = {errno.ENOSPC: "no space left on the device"}
if hasattr(errno, "EDQUOT"):
    NO_SPACE[errno.EDQUOT] = "no space left: the disk quota is exceeded"


class CheckpointWriteError(OSError):
    """A checkpoint could not be written (the previous file at that path is unchanged).

    An ``OSError`` with the ``errno`` of the cause (``errno.ENOSPC`` for a full disk); ``str()`` is the
    one-line message alone, ready for ``error: ...``.
    """

    def __str__(self):
        return str(self.strerror)


def temp_prefix(path: str) -> str:
    """``.tmp-<name>-<pid>-``: the start of this process's temporary files for checkpoint ``path``."""
    return f".tmp-{os.path.basename(path)}-{os.getpid()}-"


def _umask() -> int:
    """The process's umask, read without changing it where Linux allows (``/proc/self/status``)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)              # elsewhere: set and restore (the only portable way to read it)
    os.umask(mask)
    return mask


def _fsync_directory(directory: str) -> None:
    """Make a rename inside ``directory`` durable (POSIX; a no-op where directories cannot be opened)."""
    if not hasattr(os, "O_DIRECTORY"):
        return
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_error(path: str, exc: OSError) -> CheckpointWriteError:
    cause = NO_SPACE.get(exc.errno) or exc.strerror or str(exc)
    return CheckpointWriteError(exc.errno, f"cannot save checkpoint {path}: {cause} (in "
                                           f"{os.path.dirname(os.path.abspath(path))}); the previous "
                                           f"checkpoint there, if any, is unchanged")


def atomic_write(path: str, write) -> None:
    """Write ``path`` atomically and durably: ``write(f)`` fills a temporary file beside it, which is
    fsynced, chmodded to ``0o666 & ~umask``, renamed over ``path``; then the directory is fsynced.

    Stale temporary files of ``path`` are removed first (:func:`remove_stale_temps`). On any failure
    the temporary file is removed and ``path`` is untouched; an ``OSError`` while writing becomes a
    :class:`CheckpointWriteError` naming ``path`` (a full disk: "no space left on the device").
    """
    directory = os.path.dirname(os.path.abspath(path))
    remove_stale_temps(path)
    fd, tmp = tempfile.mkstemp(prefix=temp_prefix(path), dir=directory)
    try:
        try:
            os.fchmod(fd, 0o666 & ~_umask())
            with os.fdopen(fd, "wb") as f:
                fd = None                                  # the file object closes it from here on
                write(f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except OSError as exc:
            raise _write_error(path, exc) from exc
    except BaseException:
        if fd is not None:
            os.close(fd)
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    try:
        _fsync_directory(directory)
    except OSError as exc:                 # the new file is in place; only its durability is in doubt
        raise _write_error(path, exc) from exc


def _writer_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True                        # this process: perhaps another thread is writing it now
    try:
        os.kill(pid, 0)                    # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:
        return True                        # it exists, under another user
    except OSError:
        return True                        # cannot tell: keep the file
    return True


def remove_stale_temps(path, now: float = None) -> list:
    """Remove the temporary files an interrupted save of checkpoint ``path`` left; returns their paths.

    Only files named ``.tmp-<name of path>-<pid>-<random>`` are considered (other checkpoints' and
    other files are never touched), and of those only the ones whose writer process ``<pid>`` no longer
    exists or that are older than :data:`STALE_SECONDS`. Files in the form of earlier versions
    (``.tmp-<name>-<random>``, no pid) are removed once older than :data:`STALE_SECONDS`. A file that
    cannot be removed is reported with a warning and left.
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    start = f".tmp-{os.path.basename(path)}-"
    now = time.time() if now is None else now
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    removed = []
    for name in names:
        if not name.startswith(start):
            continue
        rest = name[len(start):]
        with_pid = re.fullmatch(r"(\d+)-[a-z0-9_]+", rest)
        if not with_pid and not re.fullmatch(r"[a-z0-9_]+", rest):
            continue                                   # another checkpoint's (``run.npz-2``) or not ours
        full = os.path.join(directory, name)
        try:
            old = now - os.lstat(full).st_mtime > STALE_SECONDS
        except FileNotFoundError:
            continue                                   # its writer just renamed or removed it
        if not old and (not with_pid or _writer_alive(int(with_pid.group(1)))):
            continue
        try:
            os.unlink(full)
            removed.append(full)
        except FileNotFoundError:
            pass
        except OSError as exc:
            warnings.warn(f"could not remove the stale temporary file {full} of an interrupted checkpoint "
                          f"save: {exc.strerror or exc}", RuntimeWarning, stacklevel=2)
    return removed
