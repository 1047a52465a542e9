"""Start the grading child (:mod:`._worker`) in a process group of its own, talk to it, and end it.

The child imports the user's file and runs its functions on the inputs the parent sends, one request at
a time (:mod:`._wire`: plain JSON and arrays through two pipes); it never receives an expected output and
never writes a verdict. Whatever the user's file does (an infinite loop, ``sys.exit``, ``os._exit``, a
segfault, a flood of output, processes of its own) happens in that process group: the parent reads its
answers, its exit status and its output, and kills the whole group (``killpg``) when the check ends, at the
wall-clock limit, on Ctrl-C, SIGTERM or SIGHUP.

Two ways to start it, the same isolation:

- **fork** (Linux): the child is a copy of this process, which has already imported NumPy and the
  library, so a check does not pay for a second interpreter start and those imports (about 0.5 s of a
  1.2 s check). The copy leaves the library behind (:func:`._guard.seal`), redirects its standard
  streams to files, runs :func:`._worker.main` and ends with ``os._exit``: it never returns into the
  caller's code. It is used only while this process runs a single Python thread (forking a threaded
  process can copy a lock another thread holds); OpenBLAS's own threads are safe, as it stops and
  restarts its pool around ``fork``, and so is the library's elementwise pool (:mod:`..kernels.parallel`
  starts a new one in the copy).
- **subprocess** (elsewhere, and whenever another Python thread runs): ``python -m
  numpy_transformer.drills._worker`` in a fresh interpreter and a new session. macOS and Windows use it
  always (fork after system frameworks are loaded is not safe on macOS; Windows has no fork).
"""

from __future__ import annotations

import faulthandler
import os
import select
import signal
import subprocess
import sys
import threading
import time

from . import _wire

__all__ = ["Child", "ChildGone", "Deadline", "start_worker", "spawn_method"]

#: ``None``: choose by platform; tests set ``"fork"`` or ``"subprocess"`` to exercise one way
FORCE = None


class ChildGone(Exception):
    """The grading child ended (or sent something that is not a message) before answering."""


class Deadline(Exception):
    """The check ran past its wall-clock limit."""


def spawn_method():
    """``"fork"`` or ``"subprocess"``: how :func:`start_worker` will start the child now."""
    if FORCE is not None:
        return FORCE
    if sys.platform.startswith("linux") and hasattr(os, "fork") and threading.active_count() == 1:
        return "fork"
    return "subprocess"


class Child:
    """The running grading child: :meth:`request` sends a message and returns its answer; :meth:`close`
    ends the child and every process of its group and returns ``(rc, stdout, stderr, timed_out)``."""

    def __init__(self, pid, proc, to_child, from_child, tmp, deadline):
        self.pid, self.proc, self.to_child, self.from_child = pid, proc, to_child, from_child
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
            msg = _wire.receive(self.from_child, self._wait_readable)
        except _wire.WireError as exc:
            raise ChildGone(str(exc)) from None
        except OSError as exc:
            raise ChildGone(str(exc)) from None
        if msg is None or not isinstance(msg, dict):
            raise ChildGone("the grading process ended")
        return msg

    def send(self, msg):
        """Send ``msg`` to the child (raises :class:`ChildGone`)."""
        try:
            _wire.send(self.to_child, msg, self._wait_writable)
        except OSError as exc:                        # a closed pipe: the child has gone
            raise ChildGone(str(exc)) from None

    def request(self, msg):
        """Send ``msg``; return the child's answer."""
        self.send(msg)
        return self.receive()

    def _poll(self):
        if self.status is not None:
            return True
        if self.proc is not None:
            if self.proc.poll() is not None:
                self.status = self.proc.returncode
        else:
            done, st = os.waitpid(self.pid, os.WNOHANG)
            if done:
                self.status = os.waitstatus_to_exitcode(st)
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
                if self.proc is not None:
                    self.proc.wait()
                    self.status = self.proc.returncode
                else:
                    _, st = os.waitpid(self.pid, 0)
                    self.status = os.waitstatus_to_exitcode(st)
        rc = None if self.timed_out else self.status
        return rc, _read(os.path.join(self.tmp, "stdout")), _read(os.path.join(self.tmp, "stderr")), self.timed_out


def start_worker(argv, timeout, tmp):
    """Start the child with command-line arguments ``argv`` (the pipes are added); return a :class:`Child`.

    ``timeout``: seconds for the whole conversation; ``tmp``: a scratch directory for the captured output.
    """
    to_r, to_w = os.pipe()
    from_r, from_w = os.pipe()
    argv = list(argv) + ["--rfd", str(to_r), "--wfd", str(from_w)]
    deadline = time.monotonic() + timeout
    try:
        pid = proc = None
        if spawn_method() == "fork":
            try:
                pid = _start_forked(argv, tmp, (to_w, from_r))
            except OSError:              # fork failed: the fresh interpreter may still start
                pid = None
        if pid is None:
            proc = _start_subprocess(argv, tmp, (to_r, from_w))
            pid = proc.pid
    except BaseException:
        for fd in (to_r, to_w, from_r, from_w):
            os.close(fd)
        raise
    os.close(to_r)
    os.close(from_w)
    return Child(pid, proc, to_w, from_r, tmp, deadline)


def _project_root():
    """The directory holding the ``numpy_transformer`` package (put on the worker's PYTHONPATH)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _start_subprocess(argv, tmp, keep):
    env = dict(os.environ)
    env["PYTHONPATH"] = _project_root() + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    cmd = [sys.executable, "-m", "numpy_transformer.drills._worker", *argv]
    with open(os.path.join(tmp, "stdout"), "wb") as out, open(os.path.join(tmp, "stderr"), "wb") as err:
        return subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err, pass_fds=keep,
                                start_new_session=True)


def _start_forked(argv, tmp, parent_ends):
    from . import _worker                # imported here, before the fork, so that the copy has it already

    out_path, err_path = os.path.join(tmp, "stdout"), os.path.join(tmp, "stderr")
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()               # else the copy would print the parent's pending output again
    pid = os.fork()                      # OSError (no process to spare): the caller starts a fresh interpreter
    if pid == 0:
        try:
            os.setpgid(0, 0)             # a process group of its own: killpg ends whatever it starts
            for fd in parent_ends:
                os.close(fd)
        except BaseException:            # noqa: BLE001
            os._exit(70)
        _child(_worker.main, argv, out_path, err_path)      # never returns
    try:
        os.setpgid(pid, pid)             # also here: no killpg may run before the child is in its group
    except OSError:
        pass
    return pid


def _child(main, argv, out_path, err_path):
    """In the forked copy: standard streams to /dev/null and the two files, run the worker, exit."""
    code = 70                            # EX_SOFTWARE, if even the redirection fails
    try:
        sys.dont_write_bytecode = True
        fd_in = os.open(os.devnull, os.O_RDONLY)
        fd_out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        fd_err = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        for fd, target in ((fd_in, 0), (fd_out, 1), (fd_err, 2)):
            os.dup2(fd, target)
            os.close(fd)
        # fresh Python streams on the redirected descriptors (the caller's may be a test's capture)
        sys.stdin = open(0, "r", closefd=False)
        sys.stdout = open(1, "w", closefd=False)
        sys.stderr = open(2, "w", closefd=False)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)      # the caller's handlers are not the child's
        if faulthandler.is_enabled():    # the caller's (e.g. pytest's) crash reports: not the worker's
            faulthandler.disable()
        code = main(argv)
        code = code if isinstance(code, int) else 0
    except SystemExit as exc:            # as the interpreter: None is 0, an int itself, anything else 1
        code = 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1
    except BaseException:                # noqa: BLE001 - report it as a subprocess would, then exit
        try:
            import traceback
            traceback.print_exc()
        except BaseException:            # noqa: BLE001
            pass
        code = 70
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:            # noqa: BLE001
            pass
        os._exit(code)


def _read(path):
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return b""
