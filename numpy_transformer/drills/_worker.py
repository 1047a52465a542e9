"""The grading child: ``python -m numpy_transformer.drills._worker --file F --exercise E --rfd R --wfd W``.

It runs in a process group of its own (:mod:`.spawn`), so that nothing in the user's file (an infinite
loop, ``sys.exit``, ``os._exit``, a segfault, a flood of output, processes of its own) can take the
grader down. It is the only process that imports the user's file, and all it does is run the file's
functions on the inputs the parent sends and hand back what they returned, as plain arrays
(:mod:`._wire`). It never receives an expected output, computes no reference, compares nothing and
writes no verdict: the parent (:mod:`.judge`) does all of that.

Before importing the file it seals itself off the library (:func:`._guard.seal`): ``numpy_transformer``,
``reference_torch`` and ``torch`` cannot be imported from the user's code. The conversation:

* the child sends ``{"ok": True, "callable": [...]}`` (the exercise's functions the file defines) or
  ``{"ok": False, "kind": ..., "message": ...}`` when the file cannot be imported;
* then, per request ``{"op": "run", "inputs": {...}, "skip": {function: reason}}``, it answers
  ``{"outputs": {name: {"array": a} | {"problem": text} | {"missing": True}}, "failure": ..., "notes": [...],
  "mutations": [...], "seconds": s}``; to ``{"op": "batch", "inputs": [...], "skip": ...}`` (every case of
  a check in one message: one round trip, and the parent computes the references meanwhile) it sends
  one such answer per inputs, in order, skipping a function on later cases once it timed out; end of
  file on its input ends it.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import signal
import sys
import time
import warnings

import numpy as np

from . import _guard, _wire
from ._harness import CallTimeout, _on_alarm, run_impl, user_frame
from .diagnose import as_array
from .exercises import EXERCISES, MISSING


def load_user_module(path, time_limit):
    """Import the user's file under a private name. Returns ``(module, None)`` or ``(None, failure)``."""
    name = "_drill_user_" + re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
    folder = os.path.dirname(path)
    if folder not in sys.path:
        sys.path.append(folder)          # the user's own helper modules, after everything else
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            return None, {"kind": "import", "message": f"cannot import {path} as a Python module"}
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
    except Exception as exc:  # noqa: BLE001
        return None, {"kind": "import", "message": f"cannot import {path}: {type(exc).__name__}: {exc}"}
    use_timer = bool(time_limit) and hasattr(signal, "setitimer")
    try:
        if use_timer:
            old = signal.signal(signal.SIGALRM, _on_alarm)
            signal.setitimer(signal.ITIMER_REAL, float(time_limit))
        try:
            spec.loader.exec_module(module)
        finally:
            if use_timer:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, old)
    except CallTimeout:
        return None, {"kind": "import", "message": f"importing the file did not finish within {time_limit:g} s "
                                                   "(module-level code that loops forever?)"}
    except KeyboardInterrupt:
        raise
    except _guard.RefusedImport as exc:
        where = user_frame(exc.__traceback__, path)
        return None, {"kind": "refused", "message": str(exc), "line": where[0] if where else None}
    except SyntaxError as exc:
        return None, {"kind": "syntax", "message": f"SyntaxError: {exc.msg}", "line": exc.lineno,
                      "text": (exc.text or "").rstrip("\n")}
    except BaseException as exc:  # noqa: BLE001 - SystemExit included
        where = user_frame(exc.__traceback__, path)
        return None, {"kind": "import", "message": f"importing the file raised {type(exc).__name__}: {exc}",
                      "where": list(where) if where else None}
    return module, None


def plain(value):
    """What a returned value becomes on the wire: a plain numeric array, a problem's text, or "missing"."""
    if value is MISSING:
        return {"missing": True}
    try:
        arr, problem = as_array(value)       # a user object's __array__ runs here, in the child
        if arr is None:
            return {"problem": str(problem)}
        return {"array": np.array(arr, copy=True, subok=False)}
    except BaseException as exc:  # noqa: BLE001 - whatever the user's object raises
        return {"problem": f"is not an array ({type(value).__name__}: {type(exc).__name__})"}


def _answer(ex, module, msg, path, call_timeout):
    skip = {str(k): str(v) for k, v in (msg.get("skip") or {}).items()}
    t0 = time.perf_counter()
    rec = run_impl(ex, module, msg["inputs"], call_timeout, path, skip)
    seconds = time.perf_counter() - t0
    failure = None
    if rec.failure is not None:
        f = rec.failure
        failure = {"function": str(f["function"]), "kind": str(f["kind"]), "message": str(f["message"]),
                   "where": [int(f["where"][0]), str(f["where"][1])] if f.get("where") else None}
    return {"outputs": {str(k): plain(v) for k, v in rec.outputs.items()}, "failure": failure,
            "notes": [str(n) for n in rec.notes], "mutations": [str(m) for m in rec.mutations],
            "seconds": seconds}


def serve(path, exercise, call_timeout, rfd, wfd):
    """Import ``path`` and answer the parent's requests until it closes the pipe."""
    ex = EXERCISES[exercise]
    warnings.simplefilter("ignore")
    _guard.seal()
    with np.errstate(all="ignore"):
        module, problem = load_user_module(path, call_timeout)
        if module is None:
            _wire.send(wfd, {"ok": False, **problem})
            return 0
        _wire.send(wfd, {"ok": True, "callable": [f for f in ex.functions if callable(getattr(module, f, None))]})
        while True:
            msg = _wire.receive(rfd)
            if msg is None or msg.get("op") not in ("run", "batch"):
                return 0
            if msg["op"] == "run":
                _wire.send(wfd, _answer(ex, module, msg, path, call_timeout))
                continue
            skip = dict(msg.get("skip") or {})
            for inputs in msg["inputs"]:
                answer = _answer(ex, module, {"inputs": inputs, "skip": skip}, path, call_timeout)
                f = answer["failure"]
                if f is not None and f["kind"] == "timeout":
                    skip[f["function"]] = f"skipped: {f['function']} timed out on an earlier case"
                _wire.send(wfd, answer)


def main(argv=None):
    p = argparse.ArgumentParser(description="drill grading child (internal)")
    p.add_argument("--file", required=True)
    p.add_argument("--exercise", required=True)
    p.add_argument("--call-timeout", type=float, default=10.0)
    p.add_argument("--rfd", type=int, required=True)
    p.add_argument("--wfd", type=int, required=True)
    args = p.parse_args(argv)
    return serve(os.path.abspath(args.file), args.exercise, args.call_timeout, args.rfd, args.wfd)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip interpreter teardown: user code may have left threads or atexit hooks behind
