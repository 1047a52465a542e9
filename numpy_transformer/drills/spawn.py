"""Start the grading worker (:mod:`._worker`) in a process of its own and wait for it, with a time limit.

Two ways, the same isolation. Whatever the user's file does (an infinite loop, ``sys.exit``,
``os._exit``, a segfault, a flood of output) happens in the worker process: the parent reads its exit
status, its output and the events file, and kills it at the wall-clock limit.

- **fork** (Linux): the worker is a copy of this process, which has already imported NumPy and the
  library, so a check does not pay for a second interpreter start and those imports (about 0.5 s of a
  1.2 s check). The copy redirects its standard streams to files, runs :func:`._worker.main` and ends
  with ``os._exit``: it never returns into the caller's code, and the parent kills and reaps it however
  the wait ends (the time limit, Ctrl-C). It is used only while this process runs a single Python
  thread (forking a threaded process can copy a lock another thread holds); OpenBLAS's own threads are
  safe, as it stops and restarts its pool around ``fork``, and so is the library's elementwise pool
  (:mod:`..kernels.parallel` starts a new one in the copy).
- **subprocess** (elsewhere, and whenever another Python thread runs): ``python -m
  numpy_transformer.drills._worker`` in a fresh interpreter. macOS and Windows use it always (fork
  after system frameworks are loaded is not safe on macOS; Windows has no fork).
"""

from __future__ import annotations

import faulthandler
import os
import signal
import subprocess
import sys
import threading
import time

__all__ = ["run_worker", "spawn_method"]

#: ``None``: choose by platform; tests set ``"fork"`` or ``"subprocess"`` to exercise one way
FORCE = None


def spawn_method():
    """``"fork"`` or ``"subprocess"``: how :func:`run_worker` will start the worker now."""
    if FORCE is not None:
        return FORCE
    if sys.platform.startswith("linux") and hasattr(os, "fork") and threading.active_count() == 1:
        return "fork"
    return "subprocess"


def run_worker(argv, timeout, tmp):
    """Run the worker with command-line arguments ``argv``; return ``(rc, stdout, stderr, timed_out)``.

    ``rc`` is the exit status (negative: killed by that signal), ``None`` when the worker ran past
    ``timeout`` seconds and was killed. ``tmp`` is a scratch directory for the captured output.
    """
    if spawn_method() == "fork":
        return _run_forked(argv, timeout, tmp)
    return _run_subprocess(argv, timeout)


def _project_root():
    """The directory holding the ``numpy_transformer`` package (put on the worker's PYTHONPATH)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run_subprocess(argv, timeout):
    env = dict(os.environ)
    env["PYTHONPATH"] = _project_root() + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    cmd = [sys.executable, "-m", "numpy_transformer.drills._worker", *argv]
    try:
        proc = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
        return proc.returncode, proc.stdout, proc.stderr, False
    except subprocess.TimeoutExpired as exc:
        return None, exc.stdout or b"", exc.stderr or b"", True


def _run_forked(argv, timeout, tmp):
    from . import _worker                # imported here, before the fork, so that the copy has it already

    out_path, err_path = os.path.join(tmp, "stdout"), os.path.join(tmp, "stderr")
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()               # else the copy would print the parent's pending output again
    try:
        pid = os.fork()
    except OSError:                      # no process to spare: the fresh interpreter may still start
        return _run_subprocess(argv, timeout)
    if pid == 0:
        _child(_worker.main, argv, out_path, err_path)      # never returns
    deadline = time.monotonic() + timeout
    status = None
    try:
        while status is None:
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status = st
            elif time.monotonic() > deadline:
                break
            else:
                time.sleep(0.005)
    finally:
        if status is None:               # past the limit, or interrupted (Ctrl-C): no runaway child
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    timed_out = status is None
    rc = None if timed_out else os.waitstatus_to_exitcode(status)
    return rc, _read(out_path), _read(err_path), timed_out


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
        signal.signal(signal.SIGINT, signal.SIG_DFL)
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
