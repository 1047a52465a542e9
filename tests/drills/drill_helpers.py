"""Helpers shared by the drill tests (not a test module): grading a file as a user would, in a
subprocess (``check``) or through ``drills.check_file`` (``check_inprocess``), the reference solutions,
the known mistakes as patches, and assertions on the report.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import tempfile

from _paths import REPO_ROOT

import numpy_transformer.drills as drills

ROOT = str(REPO_ROOT)
NAMES = list(drills.EXERCISES)


#: `drill check` records every attempt in the stats file: the tests keep it out of the user's data directory
DATA_DIR = tempfile.mkdtemp(prefix="nt-drill-test-")


def check(path, *extra, cases=12):
    """Run ``drill check`` as a user would (a subprocess); return (exit status, output)."""
    cmd = [sys.executable, "-m", "numpy_transformer.cli.drill", "check", str(path), "-q",
           "--cases", str(cases), *extra]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               NT_DRILL_DATA=DATA_DIR)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    return proc.returncode, proc.stdout + proc.stderr


def check_inprocess(path, **kw):
    """``drills.check_file`` called directly: the grading still runs in a subprocess, only the CLI process
    is saved (most tests; ``check`` covers the command line itself). Returns (status, output)."""
    buf = io.StringIO()
    kw.setdefault("cases", 8)
    kw.setdefault("torch", "off")
    kw.setdefault("quiet", True)
    rc = drills.check_file(str(path), stream=buf, **kw)
    return rc, buf.getvalue()


def solution_source(name):
    with open(drills.solution_path(name), encoding="utf-8") as fh:
        return fh.read()


def first_diagnosis(output):
    m = re.search(r"known mistake \[(\w+)\]: ", output)
    return m.group(1) if m else None


# (exercise, mistake id): [(text in the reference solution, what a person making the mistake writes), ...]:
# each mistake's own patch of its folder's solution.py (mistakes.py), applied as a user's file here
MISTAKES = {(ex.name, m.id): list(m.patches) for ex in drills.EXERCISES.values() for m in ex.mistakes}


def apply_patches(source, patches):
    for old, new in patches:
        assert old in source, f"patch target not in the reference solution: {old!r}"
        source = source.replace(old, new)
    return source


SOFTMAX_OK_FORWARD = """
import numpy as np
def softmax_forward(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    y = e / e.sum(axis=-1, keepdims=True)
    return y, y
"""


def write(tmp_path, text, name="softmax.py"):
    path = tmp_path / name
    path.write_text(text)
    return path


def flat(text):
    """The report with its line wraps undone (it wraps at 100 columns, between words)."""
    return " ".join(text.split())


def assert_reported(rc, out, status, *needles):
    assert rc == status, out
    assert "Traceback" not in out, out
    for n in needles:
        assert flat(n) in flat(out), (n, out)
