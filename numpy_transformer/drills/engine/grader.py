"""``drill check FILE``: grade a user's file the way a judge does, and print the report.

This process never imports the user's code. It checks the file compiles (reporting a syntax error with
its line), refuses a file that imports ``numpy_transformer``, ``reference_torch`` or ``torch`` (a drill
is NumPy alone: :mod:`.guard`), as it does one that reaches for the grader's memory or files (``gc``,
``inspect``, frames, ``exec``/``eval``, ``importlib``, ``ctypes``), works out which exercise it is, and
starts the grading child (:mod:`.worker`, a fresh interpreter that never imported the library, in a
process group of its own: :mod:`.spawn`) with a wall-clock limit. The child runs
the user's functions on the inputs :mod:`.judge` sends and hands back plain arrays; the judge, here,
computes the reference, compares and diagnoses, and :mod:`.report` turns its events into the report:
PASS/FAIL per case and per returned array, the first failing case, the worst element, the known mistake
a wrong array matches, the interview clock, a score. Ctrl-C, SIGTERM and SIGHUP end the check, its
child's process group and its temporary directory.

Exit status: 0 every check passed; 1 something failed, the run was cut short, or the file was refused
for its imports; 2 the file cannot be graded at all (missing, not Python, syntax error, none of the
functions defined, unknown exercise); 130 interrupted; 128 + the signal's number for SIGTERM and SIGHUP.
"""

from __future__ import annotations

import ast
import os
import re
import signal
import sys
import tempfile
import threading
import time
from types import SimpleNamespace

from ...utils.text import fit
from ..exercises import EXERCISES, get
from . import diagnose, guard
from .judge import Events, grade_all
from .report import format_duration, report
from .spawn import ChildGone, Deadline, setup_message, start_worker

__all__ = ["check_file", "format_duration", "guess_exercise", "started_at"]

HEADER_EXERCISE = re.compile(r"^#\s*drill:\s*([A-Za-z0-9_\-]+)", re.M)
HEADER_STARTED = re.compile(r"^#\s*started:.*\(unix\s+(\d+(?:\.\d+)?)\)", re.M)

DEFAULT_CASES = 40
DEFAULT_CALL_TIMEOUT = 10.0


class _Terminated(BaseException):
    """SIGTERM or SIGHUP arrived during a check: unwind (ending the child, removing the temporary
    directory) as Ctrl-C does, then exit with 128 + the signal's number."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def _on_signal(signum, frame):
    raise _Terminated(signum)


class _Signals:
    """SIGTERM and SIGHUP raise :class:`_Terminated` while a check runs (main thread only)."""

    def __enter__(self):
        self.old = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)):
                if sig is not None:
                    self.old[sig] = signal.signal(sig, _on_signal)
        return self

    def __exit__(self, *exc):
        for sig, handler in self.old.items():
            signal.signal(sig, handler)
        return False


class _Out:
    def __init__(self, stream):
        self.stream = stream

    def __call__(self, text=""):
        print(fit(text), file=self.stream)


def guess_exercise(source, path):
    """The exercise named in the file header, else the one whose function names the file defines."""
    m = HEADER_EXERCISE.search(source)
    if m and get(m.group(1)):
        return get(m.group(1))
    try:
        names = {n.name for n in ast.parse(source).body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    except SyntaxError:
        names = set()
    by_name = get(os.path.splitext(os.path.basename(path))[0])
    best, best_n = None, 0
    for ex in EXERCISES.values():
        n = len(names & set(ex.functions))
        # a tie (cross_entropy and cross_entropy_options share names): the file's name decides
        if n > best_n or (n == best_n and n and ex is by_name):
            best, best_n = ex, n
    if best is not None:
        return best
    return by_name


def started_at(source):
    m = HEADER_STARTED.search(source)
    return float(m.group(1)) if m else None


def _syntax_report(out, path, exc):
    line = exc.lineno or 0
    out(f"FAIL  {path}: syntax error, line {line}: {exc.msg}")
    if exc.text:
        text = exc.text.rstrip("\n")
        out(f"    {text}")
        if exc.offset:
            out("    " + " " * (max(exc.offset, 1) - 1) + "^")
    out("The file must be valid Python before it can be graded; fix the line above and run the check again.")


def check_file(path, exercise=None, seed=0, cases=DEFAULT_CASES, timeout=None, call_timeout=DEFAULT_CALL_TIMEOUT,
               torch="off", tol=diagnose.TOL, verbose=False, quiet=False, show_output=False, stream=None,
               now=None, dump=None, result=None):
    """Grade ``path``; print the report to ``stream`` (stdout); return the exit status (0, 1 or 2).

    ``torch="auto"`` re-checks the reference with PyTorch when it is installed (``--torch``; slower);
    the default grades against the verified NumPy reference alone. ``dump``: a directory where the
    smallest failing case is saved as .npz. ``result``: a dict that receives ``exercise``, ``passed``,
    ``mistakes`` (the known mistakes named) and ``elapsed`` (seconds on the interview clock, or None),
    for ``drill stats`` and ``drill mock``.
    """
    out = _Out(stream or sys.stdout)
    opts = SimpleNamespace(exercise=exercise, seed=seed, cases=cases, timeout=timeout, call_timeout=call_timeout,
                           torch=torch, tol=tol, verbose=verbose, quiet=quiet, show_output=show_output, now=now,
                           dump=dump, result=result if result is not None else {})
    try:
        with _Signals():
            return _check(out, path, opts)
    except KeyboardInterrupt:
        out("interrupted")
        return 130
    except _Terminated as exc:
        out(f"terminated ({signal.Signals(exc.signum).name}): the check was stopped")
        raise SystemExit(128 + exc.signum) from None
    except BrokenPipeError:            # the reader went away (`drill check FILE | head`): not a grader bug
        raise
    except Exception as exc:  # noqa: BLE001 - the grader reports, never crashes
        out(f"FAIL  the grader itself failed ({type(exc).__name__}: {exc}); please report this bug")
        return 2


def _check(out, path, opts):
    exercise, cases = opts.exercise, opts.cases
    if not os.path.exists(path):
        out(f"FAIL  {path}: no such file (create one with `python -m numpy_transformer drill start NAME`)")
        return 2
    if os.path.isdir(path):
        out(f"FAIL  {path} is a directory; give the exercise file, e.g. {os.path.join(path, 'softmax.py')}")
        return 2
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
        source = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        out(f"FAIL  {path} is not UTF-8 text ({exc.reason} at byte {exc.start}); is it a Python file?")
        return 2
    except OSError as exc:
        out(f"FAIL  cannot read {path}: {exc.strerror or exc}")
        return 2
    try:
        compile(source, path, "exec")
    except SyntaxError as exc:
        _syntax_report(out, path, exc)
        return 2
    except ValueError as exc:
        out(f"FAIL  {path} cannot be compiled: {exc}")
        return 2

    if exercise is not None:
        ex = get(exercise)
        if ex is None:
            out(f"FAIL  unknown exercise {exercise!r}; see `python -m numpy_transformer drill list`")
            return 2
    else:
        ex = guess_exercise(source, path)
        if ex is None:
            out(f"FAIL  cannot tell which exercise {path} is: it has no `# drill: NAME` header and defines none "
                "of the exercises' functions. Pass --exercise NAME (see `drill list`).")
            return 2

    if cases < 1:
        out("FAIL  --cases must be at least 1")
        return 2
    timeout = opts.timeout if opts.timeout is not None else max(60.0, 20.0 + 2.0 * cases)
    now = time.time() if opts.now is None else opts.now
    t_start = started_at(source)

    refused = guard.scan(source)
    if refused:
        line, name = refused[0]
        events = [{"event": "load", "ok": False, "kind": "refused", "line": line, "message": guard.message(name)}]
        run = SimpleNamespace(events=events, t_start=t_start, now=now, timed_out=False, timeout=timeout, rc=None,
                              user_output="", wall=0.0)
        return report(out, path, ex, run, opts)

    ev = Events()
    with tempfile.TemporaryDirectory(prefix="drill-") as tmp:
        t0 = time.time()
        child = start_worker(timeout, tmp)          # first: its start overlaps the drawing of the cases
        try:
            child.send(setup_message(ex, path, opts.call_timeout))
            grade_all(ex, os.path.abspath(path), opts, child, ev)
        except (ChildGone, Deadline):
            pass                                        # the events so far say where it stopped
        finally:
            rc, stdout, stderr, timed_out = child.close()
        wall = time.time() - t0
    user_output = (stdout or b"").decode("utf-8", "replace") + (stderr or b"").decode("utf-8", "replace")
    run = SimpleNamespace(events=list(ev), t_start=t_start, now=now, timed_out=timed_out, timeout=timeout, rc=rc,
                          user_output=user_output, wall=wall)
    return report(out, path, ex, run, opts)
