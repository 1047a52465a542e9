"""What the three held-out sets of drill mistakes (``unlisted/``, ``fresh/``, ``third/``) share: each
mistake graded once per session, its (status, report) kept where every pytest-xdist worker finds it,
so that a set's rate test reads what its per-mistake tests graded instead of grading all again."""

from __future__ import annotations

import json
import os

from tests.drills.drill_helpers import check_inprocess, solution_source

#: cases per graded file (the grader's default is larger; these are enough to catch every mistake)
CASES = 12


def apply_once(source, patches):
    """Apply each (old, new) to ``source``; every old text must occur exactly once."""
    for old, new in patches:
        assert source.count(old) == 1, f"patch target found {source.count(old)} times: {old!r}"
        source = source.replace(old, new)
    return source


def reports_root(tmp_path_factory, folder):
    """The session's folder ``folder`` for graded reports (under pytest-xdist the workers' base
    directories share a parent, fresh per session)."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    path = root / folder
    path.mkdir(exist_ok=True)
    return path


def graded(data, name, index, reports):
    """(exit status, report) of mistake ``index`` of the data module ``data`` (exercise ``name``),
    graded once per session."""
    saved = reports / f"{name}-{index}.json"
    if saved.exists():
        rc, out = json.loads(saved.read_text())
        return rc, out
    work = reports / f"{name}-{index}"
    work.mkdir(exist_ok=True)
    path = work / f"{name}.py"
    path.write_text(apply_once(solution_source(name), data.MISTAKES[index]["patch"]))
    rc, out = check_inprocess(path, exercise=name, cases=CASES)
    tmp = saved.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps([rc, out]))
    os.replace(tmp, saved)                         # whole or absent: another worker may read it
    return rc, out
