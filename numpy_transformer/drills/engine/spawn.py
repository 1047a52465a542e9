"""Start the grading child (:mod:`.worker`) in a process group of its own, talk to it, and end it.

The child imports the user's file and runs its functions on the inputs the parent sends, one request at
a time (:mod:`.wire`: plain JSON and arrays through two pipes); it never receives an expected output and
never writes a verdict. Whatever the user's file does (an infinite loop, ``sys.exit``, ``os._exit``, a
segfault, a flood of output, processes of its own) happens in that process group: the parent reads its
answers, its exit status and its output, and kills the whole group (``killpg``) when the check ends, at the
wall-clock limit, on Ctrl-C, SIGTERM or SIGHUP.

The child is always a **fresh interpreter** that never imported ``numpy_transformer``:
``sys.executable -I -B .../drills/engine/worker.py`` (isolated mode: no current directory on ``sys.path``, no
``PYTHON*`` variables; the script, not ``-m``, so the package is not imported on the way). A copy of this
process (``fork``) would hold the library and the exercise's reference solution in memory, where the
user's code could find them (``gc.get_objects()``) whatever ``sys.modules`` says. To keep a check quick,
:func:`start_worker` is called as early as possible, before the parent draws the cases and computes the
references, so that the child's start and NumPy import overlap that work; :func:`setup_message` then
tells it which file to import and how the exercise calls its functions.
"""

from __future__ import annotations

import dis
import inspect
import os
import select
import signal
import subprocess
import sys
import textwrap
import threading
import time
import types

import numpy as np

from . import wire

__all__ = ["Child", "ChildGone", "Deadline", "setup_message", "start_worker", "WORKER"]

#: the child's script, run by path (never imported as part of the package)
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")


class ChildGone(Exception):
    """The grading child ended (or sent something that is not a message) before answering."""


class Deadline(Exception):
    """The check ran past its wall-clock limit."""


class Child:
    """The running grading child: :meth:`request` sends a message and returns its answer; :meth:`close`
    ends the child and every process of its group and returns ``(rc, stdout, stderr, timed_out)``."""

    def __init__(self, proc, to_child, from_child, tmp, deadline):
        self.proc, self.pid, self.to_child, self.from_child = proc, proc.pid, to_child, from_child
        self.tmp, self.deadline = tmp, deadline
        self.timed_out, self.status = False, None

    def _wait_readable(self):
        left = self.deadline - time.monotonic()
        if left <= 0 or not select.select([self.from_child], [], [], left)[0]:
            self.timed_out = True
            raise Deadline()

    def _wait_writable(self):
        left = self.deadline - time.monotonic()
        if left <= 0 or not select.select([], [self.to_child], [], left)[1]:
            self.timed_out = True
            raise Deadline()

    def receive(self):
        """The child's next message (raises :class:`ChildGone`, :class:`Deadline`)."""
        try:
            msg = wire.receive(self.from_child, self._wait_readable)
        except wire.WireError as exc:
            raise ChildGone(str(exc)) from None
        except OSError as exc:
            raise ChildGone(str(exc)) from None
        if msg is None or not isinstance(msg, dict):
            raise ChildGone("the grading process ended")
        return msg

    def send(self, msg):
        """Send ``msg`` to the child (raises :class:`ChildGone`)."""
        try:
            wire.send(self.to_child, msg, self._wait_writable)
        except OSError as exc:                        # a closed pipe: the child has gone
            raise ChildGone(str(exc)) from None

    def request(self, msg):
        """Send ``msg``; return the child's answer."""
        self.send(msg)
        return self.receive()

    def _poll(self):
        if self.status is None and self.proc.poll() is not None:
            self.status = self.proc.returncode
        return self.status is not None

    def close(self, grace=1.0):
        """End the child (end of file on its input first, then SIGKILL to its whole process group); reap it.

        Ctrl-C, SIGTERM and SIGHUP wait until this is done (they are blocked meanwhile), so that no
        signal can leave the child or its group running."""
        signals = {getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n)}
        masked = hasattr(signal, "pthread_sigmask") and threading.current_thread() is threading.main_thread()
        old = signal.pthread_sigmask(signal.SIG_BLOCK, signals) if masked else None
        try:
            return self._close(grace)
        finally:
            if masked:
                signal.pthread_sigmask(signal.SIG_SETMASK, old)

    def _close(self, grace):
        for fd in (self.to_child, self.from_child):
            try:
                os.close(fd)                          # the child reads end of file: it exits
            except OSError:
                pass
        t_end = time.monotonic() + (grace if not self.timed_out else 0.0)
        try:
            while not self._poll() and time.monotonic() < t_end:
                time.sleep(0.002)
        finally:
            try:
                os.killpg(self.pid, signal.SIGKILL)   # the child, and anything the user's code started
            except OSError:
                pass
            if self.status is None:
                self.proc.wait()
                self.status = self.proc.returncode
        rc = None if self.timed_out else self.status
        return rc, _read(os.path.join(self.tmp, "stdout")), _read(os.path.join(self.tmp, "stderr")), self.timed_out


def start_worker(timeout, tmp):
    """Start the child (a fresh interpreter, :data:`WORKER`); return a :class:`Child`.

    ``timeout``: seconds for the whole conversation; ``tmp``: a scratch directory for the captured output.
    Send :func:`setup_message` next: the child imports NumPy meanwhile.
    """
    to_r, to_w = os.pipe()
    from_r, from_w = os.pipe()
    deadline = time.monotonic() + timeout
    try:
        cmd = [sys.executable, "-I", "-B", WORKER, "--rfd", str(to_r), "--wfd", str(from_w)]
        with open(os.path.join(tmp, "stdout"), "wb") as out, open(os.path.join(tmp, "stderr"), "wb") as err:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, pass_fds=(to_r, from_w),
                                    start_new_session=True)     # a session, so a process group, of its own
    except BaseException:
        for fd in (to_r, to_w, from_r, from_w):
            os.close(fd)
        raise
    os.close(to_r)
    os.close(from_w)
    return Child(proc, to_w, from_r, tmp, deadline)


def _driver_constants(fn):
    """The module-level names ``fn`` reads, with their values: plain data only (``np`` and ``MISSING``
    are the child's own). Anything else is a grader bug: the driver could not run in the child."""
    from .definition import MISSING

    names, todo = set(), [fn.__code__]
    while todo:
        code = todo.pop()
        names.update(i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME"))
        todo += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    constants = {}
    for name in sorted(names):
        if name not in fn.__globals__:
            continue                                # a builtin (``zip``, ``isinstance``): the child has it
        value = fn.__globals__[name]
        if value is np or value is MISSING:
            continue
        if not _is_plain(value):
            raise TypeError(f"internal error: the driver {fn.__qualname__} reads {name} "
                            f"({type(value).__name__}), which cannot be sent to the grading child")
        constants[name] = value
    return constants


def _is_plain(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (tuple, list)):
        return all(_is_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_plain(v) for k, v in value.items())
    return False


def setup_message(ex, path, call_timeout):
    """The child's first message: the file to import, the exercise's function names, the per-call time
    limit, and how the exercise calls the functions (its ``run(rec, inputs)`` as source text, with the
    plain constants it reads). Nothing of the reference or the library is in it."""
    fn = ex.run
    return {"op": "setup", "file": os.path.abspath(path), "functions": list(ex.functions),
            "call_timeout": float(call_timeout), "driver": textwrap.dedent(inspect.getsource(fn)),
            "driver_name": fn.__name__, "constants": _driver_constants(fn)}


def _read(path):
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return b""
