"""The grading child: ``python -I .../drills/engine/worker.py --rfd R --wfd W``, a fresh interpreter.

It runs in a process group of its own (:mod:`.spawn`), so that nothing in the user's file (an infinite
loop, ``sys.exit``, ``os._exit``, a segfault, a flood of output, processes of its own) can take the
grader down. It is the only process that imports the user's file, and all it does is run the file's
functions on the inputs the parent sends and hand back what they returned, as plain arrays
(:mod:`.wire`). It never receives an expected output, computes no reference, compares nothing and
writes no verdict: the parent (:mod:`.judge`) does all of that.

**It never holds the library.** It is started as a script in isolated mode (``-I``: no current directory
on ``sys.path``, no ``PYTHON*`` variables), never as ``-m numpy_transformer...``, and it imports the
standard library and NumPy only. The three helpers it needs (:mod:`.wire`, :mod:`.guard`,
:mod:`.harness`, which import nothing of the package either) are loaded by file path under private
names (``_drill_child_wire`` ...), so neither ``sys.modules`` nor the heap (``gc.get_objects()``) holds
a module of ``numpy_transformer``, its functions, or an exercise's reference solution. How the
exercise's functions are called (the exercise's ``run(rec, inputs)``: a few lines of ``rec.call``) comes
from the parent as source text with the plain constants it names (:func:`.spawn.setup_message`).
Before importing the user's file it seals itself (:func:`.guard.seal`): ``numpy_transformer``,
``reference_torch`` and ``torch`` cannot be imported from the user's code.

The conversation:

* the parent sends (as soon as the child is started: it waits in the pipe while NumPy loads)
  ``{"op": "setup", "file": path, "functions": [...], "call_timeout": s, "driver":
  source, "driver_name": name, "constants": {...}}``; the child imports the file and answers ``{"ok":
  True, "callable": [...]}`` (the exercise's functions the file defines) or ``{"ok": False, "kind": ...,
  "message": ...}`` when the file cannot be imported;
* then, per request ``{"op": "run", "inputs": {...}, "skip": {function: reason}}``, it answers
  ``{"outputs": {name: {"array": a} | {"problem": text} | {"missing": True}}, "failure": ..., "notes": [...],
  "mutations": [...], "seconds": s}``; to ``{"op": "batch", "inputs": [...], "skip": ...}`` (every case of
  a check in one message: one round trip, and the parent computes the references meanwhile) it sends
  one such answer per inputs, in order, skipping a function on later cases once it timed out; to
  ``{"op": "perturb", "inputs": {...}, "points": [[path, flat index, step], ...], "skip": ...}`` (the
  gradient check's forwards: the inputs, then each with one element moved by ``step``, built here so
  that one copy of the inputs crosses the pipe, not one per point) one answer for the inputs, then one
  per point; end of file on its input ends it.
"""

import argparse
import builtins
import importlib.util
import os
import re
import signal
import sys
import time
import warnings
from types import SimpleNamespace

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def load_helper(name):
    """The sibling module ``name`` (``"wire"``), loaded from its file as ``_drill_child_<name>``: never
    through the ``numpy_transformer`` package, which this process must not import."""
    private = "_drill_child_" + name
    if private in sys.modules:
        return sys.modules[private]
    spec = importlib.util.spec_from_file_location(private, os.path.join(HERE, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[private] = module
    spec.loader.exec_module(module)
    return module


class _Missing:
    """What the driver records for an output the user's function did not return (a key absent from a dict)."""

    def __repr__(self):
        return "<missing>"


MISSING = _Missing()


def build_driver(msg):
    """The exercise's ``run(rec, inputs)`` from the parent's source text and constants: an object with
    ``run``, as :func:`.harness.run_impl` wants it."""
    namespace = {"__builtins__": builtins, "__name__": "_drill_driver", "np": np, "MISSING": MISSING}
    namespace.update(msg.get("constants") or {})
    exec(compile(msg["driver"], "<drill driver>", "exec"), namespace)   # the parent's code, not the user's
    return SimpleNamespace(run=namespace[msg["driver_name"]])


def load_user_module(path, time_limit, harness, guard):
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
            old = signal.signal(signal.SIGALRM, harness.on_alarm)
            signal.setitimer(signal.ITIMER_REAL, float(time_limit))
        try:
            spec.loader.exec_module(module)
        finally:
            if use_timer:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, old)
    except harness.CallTimeout:
        return None, {"kind": "import", "message": f"importing the file did not finish within {time_limit:g} s "
                                                   "(module-level code that loops forever?)"}
    except KeyboardInterrupt:
        raise
    except guard.RefusedImport as exc:
        where = harness.user_frame(exc.__traceback__, path)
        return None, {"kind": "refused", "message": str(exc), "line": where[0] if where else None}
    except SyntaxError as exc:
        return None, {"kind": "syntax", "message": f"SyntaxError: {exc.msg}", "line": exc.lineno,
                      "text": (exc.text or "").rstrip("\n")}
    except BaseException as exc:  # noqa: BLE001 - SystemExit included
        where = harness.user_frame(exc.__traceback__, path)
        return None, {"kind": "import", "message": f"importing the file raised {type(exc).__name__}: {exc}",
                      "where": list(where) if where else None}
    return module, None


def plain(value):
    """What a returned value becomes on the wire: a plain numeric array, a problem's text, or "missing"
    (the same wording as :func:`.diagnose.as_array`, which the parent applies again)."""
    if value is MISSING:
        return {"missing": True}
    if value is None:
        return {"problem": "returned None (a missing `return`?)"}
    try:
        try:
            arr = np.asarray(value)          # a user object's __array__ runs here, in the child
        except Exception as exc:  # noqa: BLE001 - arbitrary user objects
            return {"problem": f"is not an array ({type(value).__name__}: {exc})"}
        if arr.dtype == object:
            return {"problem": f"is not a numeric array (got {type(value).__name__} of objects)"}
        if arr.dtype.kind == "c":
            return {"problem": "is complex"}
        if arr.dtype.kind not in "fiub":
            return {"problem": f"is not numeric (dtype {arr.dtype})"}
        return {"array": np.array(arr, copy=True, subok=False)}
    except BaseException as exc:  # noqa: BLE001 - whatever the user's object raises
        return {"problem": f"is not an array ({type(value).__name__}: {type(exc).__name__})"}


def _answer(harness, driver, module, msg, path, call_timeout):
    skip = {str(k): str(v) for k, v in (msg.get("skip") or {}).items()}
    t0 = time.perf_counter()
    rec = harness.run_impl(driver, module, msg["inputs"], call_timeout, path, skip)
    seconds = time.perf_counter() - t0
    failure = None
    if rec.failure is not None:
        f = rec.failure
        failure = {"function": str(f["function"]), "kind": str(f["kind"]), "message": str(f["message"]),
                   "where": [int(f["where"][0]), str(f["where"][1])] if f.get("where") else None}
    return {"outputs": {str(k): plain(v) for k, v in rec.outputs.items()}, "failure": failure,
            "notes": [str(n) for n in rec.notes], "mutations": [str(m) for m in rec.mutations],
            "seconds": seconds}


def perturbed(inputs, path, flat, step):
    """``inputs`` with element ``flat`` (of the flattened array at ``path``: ``["x"]``, ``["params",
    "W1"]``) moved by ``step``; only the dicts on the path and that array are copied."""
    out = dict(inputs)
    holder = out
    for part in path[:-1]:
        holder[part] = dict(holder[part])
        holder = holder[part]
    arr = np.array(holder[path[-1]], copy=True, order="C")
    arr.reshape(-1)[int(flat)] += float(step)
    holder[path[-1]] = arr
    return out


def _many(msg):
    """The inputs a ``batch`` or ``perturb`` request asks to run, in order."""
    if msg["op"] == "batch":
        return list(msg["inputs"])
    base = msg["inputs"]
    return [base] + [perturbed(base, [str(p) for p in path], flat, step) for path, flat, step in msg["points"]]


def serve(rfd, wfd):
    """Take the setup, import the user's file and answer the parent's requests until it
    closes the pipe."""
    wire, guard, harness = load_helper("wire"), load_helper("guard"), load_helper("harness")
    setup = wire.receive(rfd)
    if setup is None or setup.get("op") != "setup":
        return 0
    driver = build_driver(setup)
    path, call_timeout = os.path.abspath(setup["file"]), float(setup["call_timeout"])
    warnings.simplefilter("ignore")
    guard.seal()
    with np.errstate(all="ignore"):
        module, problem = load_user_module(path, call_timeout, harness, guard)
        if module is None:
            wire.send(wfd, {"ok": False, **problem})
            return 0
        functions = [str(f) for f in setup["functions"]]
        wire.send(wfd, {"ok": True, "callable": [f for f in functions if callable(getattr(module, f, None))]})
        while True:
            msg = wire.receive(rfd)
            if msg is None or msg.get("op") not in ("run", "batch", "perturb"):
                return 0
            if msg["op"] == "run":
                wire.send(wfd, _answer(harness, driver, module, msg, path, call_timeout))
                continue
            skip = dict(msg.get("skip") or {})
            for inputs in _many(msg):
                answer = _answer(harness, driver, module, {"inputs": inputs, "skip": skip}, path, call_timeout)
                f = answer["failure"]
                if f is not None and f["kind"] == "timeout":
                    skip[f["function"]] = f"skipped: {f['function']} timed out on an earlier case"
                wire.send(wfd, answer)


def main(argv=None):
    p = argparse.ArgumentParser(description="drill grading child (internal)")
    p.add_argument("--rfd", type=int, required=True)
    p.add_argument("--wfd", type=int, required=True)
    args = p.parse_args(argv)
    return serve(args.rfd, args.wfd)


if __name__ == "__main__":
    sys.dont_write_bytecode = True
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip interpreter teardown: user code may have left threads or atexit hooks behind
