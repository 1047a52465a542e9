"""Calling an implementation (the user's, the reference, or a mistake variant) and recording its outputs.

An exercise's ``run(rec, inputs)`` drives the functions through a :class:`Recorder`: ``rec.call`` calls
one function (on copies of the inputs, under a time limit, catching *everything*), ``rec.pair`` and
``rec.unpack`` check what it returned, ``rec.output`` records a named array to grade. When a call fails
the recorder raises :class:`Stop`, the run ends there, and every output not yet recorded is reported as
"not computed because ...".

It imports NumPy and the standard library only: the grading child loads it by file path (:mod:`.worker`),
and must hold nothing else of the package.
"""

from __future__ import annotations

import inspect
import os
import signal
import traceback

import numpy as np


class Stop(Exception):
    """Raised by the recorder to end a run after a user function failed."""


class CallTimeout(BaseException):
    """Raised (by a timer signal) inside a call that runs past its time limit."""


def on_alarm(signum, frame):  # pragma: no cover - exercised through a subprocess
    """The SIGALRM handler of a call's time limit (the worker installs it too): raise :class:`CallTimeout`."""
    raise CallTimeout()


def describe(value):
    """A short description of a returned value, for messages."""
    if value is None:
        return "None (a missing `return`?)"
    if isinstance(value, np.ndarray):
        return f"an ndarray of shape {value.shape}"
    if isinstance(value, (tuple, list)):
        kinds = ", ".join(type(v).__name__ if not isinstance(v, np.ndarray) else f"ndarray{v.shape}"
                          for v in value[:6])
        more = ", ..." if len(value) > 6 else ""
        return f"a {type(value).__name__} of {len(value)} item{'s' if len(value) != 1 else ''} ({kinds}{more})"
    return f"a {type(value).__name__}"


def _copy(value):
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    return value


def _changed(before, after):
    if isinstance(before, np.ndarray):
        if not isinstance(after, np.ndarray) or before.shape != after.shape:
            return True
        return not np.array_equal(before, after, equal_nan=True)
    if isinstance(before, dict) and isinstance(after, dict):
        return any(_changed(before[k], after.get(k)) for k in before)
    return False


def user_frame(tb, path):
    """``(line number, source line)`` of the innermost traceback frame in the file ``path``, or None."""
    if path is None:
        return None
    target = os.path.realpath(path)
    found = None
    for fr in traceback.extract_tb(tb):
        try:
            if os.path.realpath(fr.filename) == target:
                found = (fr.lineno, (fr.line or "").strip())
        except (OSError, ValueError):
            continue
    return found


class Recorder:
    """Runs one implementation on one case and records outputs, failures and notes.

    Parameters
    ----------
    ns : object
        Anything with the exercise's functions as attributes (a module, a namespace).
    time_limit : float, optional
        Seconds per call (POSIX main thread only); a call running longer is stopped.
    user_path : str, optional
        The user's file, to point at the failing line in tracebacks.
    """

    def __init__(self, ns, time_limit=None, user_path=None, protected=None):
        self.ns = ns
        self.time_limit = time_limit
        self.user_path = user_path
        self.watch = True               # check each call's arguments for changes in place
        self.outputs = {}
        self.failure = None
        self.notes = []
        self.mutations = []             # the grader's inputs a function changed in place: a FAIL
        self._protected = set()
        for v in (protected or {}).values():
            self._protected.add(id(v))
            if isinstance(v, dict):
                self._protected.update(id(w) for w in v.values())

    # -- failures ----------------------------------------------------------------------------
    def fail(self, function, kind, message, where=None):
        self.failure = {"function": function, "kind": kind, "message": message, "where": where}
        raise Stop(message)

    # -- calling -------------------------------------------------------------------------------
    def call(self, fname, *args, **kwargs):
        fn = getattr(self.ns, fname, None)
        if fn is None:
            self.fail(fname, "missing", f"{fname} is not defined in your file")
        if not callable(fn):
            self.fail(fname, "missing", f"{fname} is defined but is not a function ({type(fn).__name__})")
        cargs = [_copy(a) for a in args]
        ckw = {k: _copy(v) for k, v in kwargs.items()}
        use_timer = bool(self.time_limit) and hasattr(signal, "setitimer")
        try:
            if use_timer:
                old = signal.signal(signal.SIGALRM, on_alarm)
                signal.setitimer(signal.ITIMER_REAL, float(self.time_limit))
            try:
                result = fn(*cargs, **ckw)
            finally:
                if use_timer:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                    signal.signal(signal.SIGALRM, old)
        except CallTimeout:
            self.fail(fname, "timeout", f"{fname} did not return within {self.time_limit:g} s "
                                        "(an infinite loop, or a loop over every element?)")
        except KeyboardInterrupt:
            raise
        except NotImplementedError as exc:
            self.fail(fname, "not_implemented", f"{fname} is not implemented yet (raises NotImplementedError"
                                                f"{': ' + str(exc) if str(exc) else ''})")
        except BaseException as exc:  # noqa: BLE001 - the user's code may raise anything, SystemExit too
            where = user_frame(exc.__traceback__, self.user_path)
            msg = f"{type(exc).__name__}: {exc}".strip().rstrip(":")
            if len(msg) > 400:
                msg = msg[:400] + " ..."
            self.fail(fname, "exception", f"{fname} raised {msg}", where)
        if self.watch:
            self._check_mutation(fname, fn, args, kwargs, cargs, ckw)
        return result

    def _check_mutation(self, fname, fn, args, kwargs, cargs, ckw):
        try:
            names = list(inspect.signature(fn).parameters)
        except (TypeError, ValueError):
            names = []
        changed = [(names[i] if i < len(names) else f"argument {i + 1}", before)
                   for i, (before, after) in enumerate(zip(args, cargs)) if _changed(before, after)]
        changed += [(k, before) for k, before in kwargs.items() if _changed(before, ckw[k])]
        for arg, before in changed:
            if id(before) in self._protected:
                # an input the grader passed: a caller's array would change under it
                self.mutations.append(
                    f"{fname} modified its input `{arg}` in place (a caller's array changes under it: "
                    "work on a copy, e.g. `x = x - m`, not `x -= m`)")
            else:
                # the function's own cache (made by the forward): harmless, but worth knowing
                self.notes.append(f"{fname} modified its argument `{arg}` (its own cache) in place")

    # -- checking returns ----------------------------------------------------------------------
    def pair(self, fname, result, what="(out, cache)"):
        """``result`` must be a 2-tuple ``(out, cache)``."""
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            self.fail(fname, "arity", f"{fname} must return {what}; it returned {describe(result)}")
        return result[0], result[1]

    def unpack(self, fname, result, names):
        """``result`` must be a tuple of ``len(names)`` items (a single value when one name)."""
        if len(names) == 1:
            if isinstance(result, (tuple, list)) and len(result) == 1:
                return (result[0],)
            if isinstance(result, tuple):
                self.fail(fname, "arity", f"{fname} must return {names[0]} (one array); "
                                          f"it returned {describe(result)}")
            return (result,)
        if not isinstance(result, (tuple, list)) or len(result) != len(names):
            want = "(" + ", ".join(names) + ")"
            self.fail(fname, "arity", f"{fname} must return {len(names)} values {want}; "
                                      f"it returned {describe(result)}")
        return tuple(result)

    def output(self, name, value):
        self.outputs[name] = value


def run_impl(ex, ns, inputs, time_limit=None, user_path=None, disabled=None, watch=True):
    """Run exercise ``ex``'s functions from ``ns`` on ``inputs``; return the :class:`Recorder`.

    ``watch=False`` skips the check for inputs changed in place (the grader's own reference and the
    patched solutions of the known mistakes, whose mutations nobody reads; each call still gets copies).

    ``disabled``: ``{function: reason}`` of functions not to call (a timeout on an earlier case, or the
    backward while only the forward is wanted); a run reaching one ends there with that reason.
    """
    rec = Recorder(ns, time_limit=time_limit, user_path=user_path, protected=inputs)
    rec.watch = watch
    if disabled:
        real_call = rec.call

        def call(fname, *args, **kwargs):
            if fname in disabled:
                rec.fail(fname, "skipped", disabled[fname])
            return real_call(fname, *args, **kwargs)
        rec.call = call
    try:
        ex.run(rec, inputs)
    except Stop:
        pass
    return rec
