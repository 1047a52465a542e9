"""The judge's two small containers: the :class:`Candidate` (the user's functions, run by the grading
child) and the :class:`Events` of one check (what :mod:`.report` turns into the report)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from . import diagnose
from .definition import MISSING


class Candidate:
    """The user's functions, as the grading child runs them: ``run(inputs, skip)`` sends one request and
    returns what came back as a recorder-like namespace (``outputs``, ``failure``, ``notes``,
    ``mutations``, ``seconds``). Raises :class:`.spawn.ChildGone` or :class:`.spawn.Deadline`."""

    def __init__(self, child):
        self.child = child

    def run(self, inputs, skip=None):
        return self._result(self.child.request({"op": "run", "inputs": inputs, "skip": dict(skip or {})}))

    def run_all(self, inputs_list, skip=None):
        """Send every inputs at once (now: the child starts on them while this process does other work);
        return an iterator over the results in order, each received as it is asked for (a function that
        times out is skipped on the later inputs, as ``grade_case`` would ask). Every result must be read
        before the next request."""
        inputs_list = list(inputs_list)
        self.child.send({"op": "batch", "inputs": inputs_list, "skip": dict(skip or {})})
        return (self._result(self.child.receive()) for _ in inputs_list)

    def run_perturbed(self, inputs, points, skip=None):
        """The gradient check's forwards in one request: ``inputs``, then ``inputs`` with each point's
        element moved (``points``: ``[(path, flat index, step)]``; the child builds them). An iterator
        over the results, as :meth:`run_all`'s."""
        points = [[list(path), int(flat), float(step)] for path, flat, step in points]
        self.child.send({"op": "perturb", "inputs": inputs, "points": points, "skip": dict(skip or {})})
        return (self._result(self.child.receive()) for _ in range(len(points) + 1))

    @staticmethod
    def _result(msg):
        outputs = {}
        for name, v in (msg.get("outputs") or {}).items():
            if isinstance(v, dict) and isinstance(v.get("array"), np.ndarray):
                outputs[name] = v["array"]
            elif isinstance(v, dict) and v.get("missing") is True:
                outputs[name] = MISSING
            else:
                problem = v.get("problem") if isinstance(v, dict) else None
                outputs[name] = diagnose.Unusable(str(problem or "is not an array"))
        failure = msg.get("failure")
        if failure is not None:
            failure = {"function": str(failure.get("function")), "kind": str(failure.get("kind")),
                       "message": str(failure.get("message")), "where": failure.get("where")}
        return SimpleNamespace(outputs=outputs, failure=failure, notes=[str(n) for n in msg.get("notes") or []],
                               mutations=[str(m) for m in msg.get("mutations") or []],
                               seconds=float(msg.get("seconds") or 0.0))


class Events(list):
    """The events of one check, each as JSON would give it back (lists, not tuples or arrays; a copy)."""

    def emit(self, **event):
        self.append(jsonable(event))


def jsonable(x):
    """``x`` as JSON would give it back: dicts with string keys, lists, plain numbers."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return float(x)
    if isinstance(x, np.ndarray):
        return x.tolist()
    return x
