"""A verdict users can trust: ``drill check`` grades the way a judge does.

The process that runs the candidate's file never holds the expected answers and never writes the verdict;
it hands back plain arrays, and the parent (which never imports the file) computes the reference and
compares. These tests are the five short submissions that used to grade themselves PASS, the refusal of
``numpy_transformer``/``torch`` imports, the process group, the signals, and the stats file's integrity.
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from _paths import REPO_ROOT

import numpy_transformer.drills as drills
from numpy_transformer.drills import exercises
from numpy_transformer.drills.engine import guard as _guard
from numpy_transformer.drills.engine import mock, stats

ROOT = str(REPO_ROOT)

#: a candidate that returns zeros: it PASSes only if its trick fools the grader
ZEROS = """
def softmax_forward(x):
    {trick}
    return np.zeros_like(x), x

def softmax_backward(dy, cache):
    return np.zeros_like(dy)
"""

#: 1. replace the grader's comparison function (found through sys.modules: no import statement)
CHEAT_COMPARE = "import numpy as np, sys\n" + ZEROS.format(trick=textwrap.dedent("""\
    for m in list(sys.modules.values()):
            if getattr(m, "compare", None) is not None and "diagnose" in getattr(m, "__name__", ""):
                m.compare = lambda got, ref, tol=0: {"ok": True, "problem": None, "rel": 0.0, "abs": 0.0,
                                                     "index": None, "got": None, "expected": None,
                                                     "message": ""}""").replace("\n", "\n    "))

#: 2. write passing events into the result file found through the stack, then leave
CHEAT_EVENTS = """
import json, os, sys
import numpy as np

def softmax_forward(x):
    f = sys._getframe()
    while f is not None:
        args = f.f_locals.get("args")
        if getattr(args, "events", None):
            with open(args.events, "a") as fh:
                for i in range(args.cases):
                    fh.write(json.dumps({"event": "case", "index": i, "desc": "x", "tags": [], "edge": False,
                                         "features": [], "results": {"y": {"ok": True}, "dx": {"ok": True}},
                                         "failure": None, "notes": [], "seconds": 0.0, "oracle": None,
                                         "contradicted": [], "mutations": []}) + "\\n")
                fh.write(json.dumps({"event": "done"}) + "\\n")
            os._exit(0)
        f = f.f_back
    return np.zeros_like(x), x

def softmax_backward(dy, cache):
    return np.zeros_like(dy)
"""

#: 3. replace the library op the reference calls, at import time
CHEAT_LIBRARY = """
import sys
import numpy as np
_F = sys.modules.get("numpy_transformer.functional")
if _F is not None:
    _F.softmax_forward = lambda x, axis=-1: (np.zeros_like(x), x)
    _F.softmax_backward = lambda dy, cache: np.zeros_like(dy)

def softmax_forward(x):
    return np.zeros_like(x), x

def softmax_backward(dy, cache):
    return np.zeros_like(dy)
"""

#: 4. an object whose __array__ reads the expected array from the grader's frame
CHEAT_ARRAY = """
import sys
import numpy as np

class Expected:
    def __array__(self, dtype=None, copy=None):
        f = sys._getframe()
        while f is not None:
            ref, name = f.f_locals.get("ref"), f.f_locals.get("name")
            if isinstance(ref, dict) and name in ref:
                return np.asarray(ref[name], dtype=dtype)
            f = f.f_back
        return np.zeros(1)

def softmax_forward(x):
    return Expected(), x

def softmax_backward(dy, cache):
    return Expected()
"""

#: 5. the library's own solution
CHEAT_IMPORT = "from numpy_transformer.drills.exercises.softmax.solution import *\n"

CHEATS = {"compare": CHEAT_COMPARE, "events": CHEAT_EVENTS, "library": CHEAT_LIBRARY, "array": CHEAT_ARRAY,
          "import": CHEAT_IMPORT}


@pytest.fixture
def data(monkeypatch, tmp_path):
    monkeypatch.setenv("NT_DRILL_DATA", str(tmp_path / "data"))
    return tmp_path / "data"


def _check(path, **kw):
    buf = io.StringIO()
    result = {}
    rc = drills.check_file(str(path), stream=buf, torch="off", quiet=True, cases=kw.pop("cases", 6),
                           result=result, **kw)
    return rc, buf.getvalue(), result


@pytest.mark.parametrize("cheat", sorted(CHEATS))
def test_a_cheat_fails_the_check_and_is_recorded_as_a_fail(cheat, tmp_path, data):
    path = tmp_path / "softmax.py"
    path.write_text(CHEATS[cheat])
    rc, out, result = _check(path)
    assert rc == 1, out
    assert not out.rstrip().endswith("PASS") and result["passed"] is False, out
    stats.record(result)
    entry = stats.load()["softmax"]
    assert entry["attempts"] == 1 and entry["passes"] == 0, entry
    if cheat == "import":
        assert entry["refusals"] == 1 and result["refused"], (entry, out)
        assert "NumPy alone" in out and "numpy_transformer" in out, out

    # a mock interview with that file records a FAIL too
    (tmp_path / "mock").mkdir()
    (tmp_path / "mock" / "softmax.py").write_text(CHEATS[cheat])
    (tmp_path / "mock" / mock.SESSION).write_text(json.dumps(
        {"started": time.time(), "minutes": 10, "exercises": ["softmax"], "files": ["softmax.py"]}))
    lines = []
    assert mock.grade_mock(str(tmp_path / "mock"), out=lines.append, cases=6) == 1
    assert any(line.lstrip().startswith("FAIL  softmax") for line in lines), lines
    entry = stats.load()["softmax"]
    assert entry["attempts"] == 2 and entry["passes"] == 0 and entry["mock_attempts"] == 1, entry


@pytest.mark.parametrize("src", [
    "import torch\n",
    "import numpy as np\nimport numpy_transformer.functional as F\n",
    "from reference_torch import drill_oracle\n",
    "import importlib\nF = importlib.import_module('numpy_transformer.functional')\n",
    "F = __import__('numpy_transformer')\n",
    "def softmax_forward(x):\n    from torch import nn\n",
])
def test_an_import_of_the_library_or_torch_is_refused_before_running(src, tmp_path, data):
    path = tmp_path / "softmax.py"
    path.write_text(src + "def softmax_backward(dy, cache):\n    return dy\n")
    rc, out, result = _check(path)
    assert rc == 1 and result["refused"] and not result["passed"], out
    flat = " ".join(out.split())
    assert "a drill is NumPy alone" in flat and "line " in flat, out


def test_an_import_hidden_from_the_scan_is_refused_when_it_runs(tmp_path, data):
    src = ("import numpy as np\nNAME = 'numpy' + '_transformer.functional'\n"
           "def softmax_forward(x):\n    F = __import__(NAME, fromlist=['x'])\n    return F.softmax_forward(x)\n"
           "def softmax_backward(dy, cache):\n    return dy\n")
    path = tmp_path / "softmax.py"
    path.write_text(src)
    rc, out, result = _check(path)
    assert rc == 1 and not result["passed"], out
    assert "a drill is NumPy alone" in " ".join(out.split()), out


#: 6. the library's own functions, found in the grading process's heap (no import, no sys.modules)
CHEAT_GC = """
import gc
def _find():
    for o in gc.get_objects():
        if (isinstance(o, dict) and str(o.get('__name__','')).startswith('numpy_transformer.')
                and 'softmax_forward' in o and 'softmax_backward' in o):
            return o
_g = _find()
def softmax_forward(x): return _g['softmax_forward'](x)
def softmax_backward(dy, cache): return _g['softmax_backward'](dy, cache)
"""

#: ``import gc`` with every name computed at run time: the static scan cannot see it
_HIDDEN_GC = ("_b = __builtins__ if isinstance(__builtins__, dict) else vars(__builtins__)\n"
              "gc = _b['ev' + 'al'](\"__imp\" + \"ort__('g' + 'c')\")\n")


def hidden(src):
    """``src`` with what the static scan looks for spelled at run time, so that only the process model
    stands between it and the grader's memory."""
    src = src.replace("import gc\n", _HIDDEN_GC).replace("sys._getframe()", "getattr(sys, '_get' + 'frame')()")
    return re.sub(r"(\w+)\.f_(locals|back)", r"getattr(\1, 'f_' + '\2')", src)


def test_the_heap_cheat_is_refused_by_the_scan(tmp_path, data):
    path = tmp_path / "softmax.py"
    path.write_text(CHEAT_GC)
    rc, out, result = _check(path)
    assert rc == 1 and result["refused"] and result["passed"] is False, out
    flat = " ".join(out.split())
    assert "line 2 uses gc: a drill is NumPy alone" in flat and "instead of computing it" in flat, out


@pytest.mark.parametrize("cheat", ["gc", "compare", "events", "library", "array"])
def test_a_cheat_hidden_from_the_scan_finds_nothing_in_the_child_and_fails(cheat, tmp_path, data):
    src = hidden({"gc": CHEAT_GC, **CHEATS}[cheat])
    assert _guard.scan(src) == [], _guard.scan(src)                    # it does get past the scan
    path = tmp_path / "softmax.py"
    path.write_text(src)
    rc, out, result = _check(path)
    assert rc == 1 and result["passed"] is False and not result.get("refused"), out
    assert not out.rstrip().endswith("PASS"), out


#: a submission that lists what of the library the grading process holds (in sys.modules or anywhere in
#: its heap: module namespaces, functions, classes) and writes it down; its own functions are correct
INVENTORY = _HIDDEN_GC + """
import json, os, sys
import numpy as np

def _inventory(pkg_dir):
    roots = ("numpy_transformer", "reference_torch", "torch")
    modules = sorted(m for m in sys.modules if m.split(".")[0] in roots)
    namespaces, files, classes = set(), set(), set()
    for o in gc.get_objects():
        if isinstance(o, dict) and str(o.get("__name__", "")).split(".")[0] in roots:
            namespaces.add(str(o["__name__"]))
        code = getattr(o, "__code__", None)
        name = getattr(code, "co_filename", "")
        if name.startswith(pkg_dir):
            files.add(os.path.relpath(name, pkg_dir))
        if isinstance(o, type) and str(getattr(o, "__module__", "")).split(".")[0] in roots:
            classes.add(o.__module__ + "." + o.__qualname__)
    return {"modules": modules, "namespaces": sorted(namespaces), "files": sorted(files),
            "classes": sorted(classes)}

with open(OUT, "w") as fh:
    json.dump(_inventory(PKG), fh)

def softmax_forward(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    y = e / e.sum(axis=-1, keepdims=True)
    return y, y

def softmax_backward(dy, y):
    return y * (dy - (dy * y).sum(axis=-1, keepdims=True))
"""


def test_the_grading_process_holds_nothing_of_the_library(tmp_path, data):
    """The process that runs the candidate's code never holds the expected answers: not the library, not
    the exercise's reference, not torch; of the package's files, only the child's own helpers."""
    out_file = tmp_path / "inventory.json"
    pkg = os.path.join(ROOT, "numpy_transformer") + os.sep
    path = tmp_path / "softmax.py"
    path.write_text(f"OUT = {str(out_file)!r}\nPKG = {pkg!r}\n" + INVENTORY)
    assert _guard.scan(path.read_text()) == []
    rc, out, _ = _check(path)
    assert rc == 0, out
    found = json.loads(out_file.read_text())
    assert found["modules"] == [] and found["namespaces"] == [] and found["classes"] == [], found
    helpers = {os.path.join("drills", "engine", f) for f in ("worker.py", "wire.py", "guard.py", "harness.py")}
    assert set(found["files"]) <= helpers, found["files"]


@pytest.mark.parametrize("src, what", [
    ("import gc\n", "gc"),
    ("import inspect\n", "inspect"),
    ("import sys\nF = sys._getframe(1)\n", "sys._getframe"),
    ("import sys\ndef softmax_forward(x):\n    return sys.exc_info()[2].tb_frame\n", "a frame's .tb_frame"),
    ("from importlib import util\n", "importlib"),
    ("import importlib.util\n", "importlib.util"),
    ("def softmax_forward(x):\n    return eval('x')\n", "eval"),
    ("exec('y = 1')\n", "exec"),
    ("c = compile('1', 'f', 'eval')\n", "compile"),
    ("import ctypes\n", "ctypes"),
    ("import runpy\n", "runpy"),
    ("g = __import__('gc')\n", "gc"),
    ("src = open('/site/numpy_transformer/functional/softmax.py').read()\n",
     "open() of a numpy_transformer/reference_torch path"),
    ("import os\nfrom pathlib import Path\nt = Path(os.path.join('x', 'reference_torch')).read_text()\n",
     "Path() of a numpy_transformer/reference_torch path"),
])
def test_introspection_and_the_librarys_files_are_refused_before_running(src, what, tmp_path, data):
    path = tmp_path / "softmax.py"
    path.write_text(src + "def softmax_backward(dy, cache):\n    return dy\n")
    rc, out, result = _check(path)
    assert rc == 1 and result["refused"] and not result["passed"], out
    flat = " ".join(out.split())
    assert f"uses {what}: a drill is NumPy alone" in flat and "instead of computing it" in flat, out
    assert "line " in flat, out


@pytest.mark.parametrize("src", [
    "import re\nPATTERN = re.compile('x+')\n",
    "import numpy as np\nW = np.load('my_weights.npz')\n",
    '"""Softmax, as numpy_transformer.functional.softmax_forward computes it."""\n',
    "evaluate = 1\nnotes = open('notes.txt')\n",
    "import math, functools, itertools\n",
])
def test_plain_numpy_code_is_not_refused(src):
    assert _guard.scan(src) == []


def _gone(pid, wait=5.0):
    """True once ``pid`` no longer runs (gone, or a zombie waiting for init)."""
    t0 = time.time()
    while time.time() - t0 < wait:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and fork")
def test_processes_the_submission_forks_die_with_the_check(tmp_path, data):
    pidfile = tmp_path / "grandchild.pid"
    src = f"""
import os, time
import numpy as np
pid = os.fork()
if pid == 0:
    time.sleep(60)
    os._exit(0)
open({str(pidfile)!r}, "w").write(str(pid))

def softmax_forward(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True), None
"""
    path = tmp_path / "softmax.py"
    path.write_text(src)
    _check(path, cases=2)
    pid = int(pidfile.read_text())
    try:
        assert _gone(pid), f"the submission's forked process {pid} outlived the check"
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX signals")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_end_the_check_and_remove_its_temporary_directory(sig, tmp_path):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    marker = tmp_path / "running"
    path = tmp_path / "softmax.py"
    path.write_text("import os, time\ndef softmax_forward(x):\n"
                    f"    open({str(marker)!r}, 'w').write(str(os.getpid()))\n"
                    "    time.sleep(60)\n")
    env = dict(os.environ, PYTHONPATH=ROOT, TMPDIR=str(scratch), NT_DRILL_DATA=str(tmp_path / "data"))
    proc = subprocess.Popen([sys.executable, "-m", "numpy_transformer.cli.drill", "check", str(path), "-q",
                             "--cases", "2"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        t0 = time.time()
        while not marker.exists() or not marker.read_text():
            assert time.time() - t0 < 60 and proc.poll() is None, proc.stdout.read().decode()
            time.sleep(0.05)
        assert [p.name for p in scratch.iterdir()], "the check has no temporary directory to remove"
        proc.send_signal(sig)
        out = proc.communicate(timeout=30)[0].decode()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + sig, (proc.returncode, out)
    assert "Traceback" not in out, out
    assert list(scratch.iterdir()) == [], list(scratch.iterdir())
    assert _gone(int(marker.read_text())), "the grading child outlived the check"


_RECORDER = """
import sys
from numpy_transformer.drills.engine import stats
for i in range(int(sys.argv[1])):
    stats.record({"exercise": "softmax", "passed": i % 2 == 0, "mistakes": ["softmax_unstable"], "elapsed": 60.0})
"""


def test_four_concurrent_checks_lose_no_stats_record(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT, NT_DRILL_DATA=str(tmp_path))
    procs = [subprocess.Popen([sys.executable, "-c", _RECORDER, "25"], env=env, stderr=subprocess.PIPE)
             for _ in range(4)]
    errs = [p.communicate(timeout=120)[1].decode() for p in procs]
    assert all(p.returncode == 0 for p in procs), errs
    with open(tmp_path / stats.FILENAME, encoding="utf-8") as fh:
        entry = json.load(fh)["exercises"]["softmax"]
    assert entry["attempts"] == 100 and entry["passes"] == 52, entry
    assert entry["mistakes"] == {"softmax_unstable": 100}, entry
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(stats.FILENAME)) == [], \
        list(tmp_path.iterdir())


def test_a_corrupt_stats_file_is_kept_aside_and_reported(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("NT_DRILL_DATA", str(tmp_path))
    bad = tmp_path / stats.FILENAME
    bad.write_text('{"version": 1, "exercises": {"softmax": {"attempts": 7')
    text = stats.stats_text()
    assert "cannot be read" in text and str(bad) in text, text
    assert bad.read_text().endswith('"attempts": 7')              # reading it changes nothing
    stats.record({"exercise": "softmax", "passed": True, "mistakes": [], "elapsed": None})
    kept = [p for p in tmp_path.iterdir() if p.name.startswith(stats.FILENAME + ".corrupt")]
    assert len(kept) == 1 and kept[0].read_text().endswith('"attempts": 7'), list(tmp_path.iterdir())
    err = capsys.readouterr().err
    assert "not valid" in err and kept[0].name in err, err
    assert stats.load()["softmax"]["attempts"] == 1


def test_the_upstream_gradient_has_a_stream_of_its_own():
    from numpy_transformer.drills.engine import upstream as _upstream
    for ex in exercises.EXERCISES.values():
        for i in range(12):
            inputs = exercises.draw_case(ex, 0, i).inputs
            for j, key in enumerate(_upstream.UPSTREAM):
                up = inputs.get(key)
                if not isinstance(up, np.ndarray):
                    continue
                others = {k: v for k, v in inputs.items() if k != key}
                np.testing.assert_array_equal(up, _upstream.upstream_gradient(0, i, ex.name, j, up.shape, others))
                for k, v in inputs.items():
                    if k != key and isinstance(v, np.ndarray) and v.shape == up.shape and up.size > 1:
                        assert not _upstream.parallel(up, v), (ex.name, i, key, k)


def test_an_upstream_gradient_parallel_to_an_input_is_redrawn():
    from numpy_transformer.drills.engine import upstream as _upstream
    first = _upstream.upstream_gradient(0, 0, "softmax", 0, (3, 4), {})
    for other in (first, -2.5 * first):
        again = _upstream.upstream_gradient(0, 0, "softmax", 0, (3, 4), {"x": other})
        assert again.shape == (3, 4) and not _upstream.parallel(again, other)
    # not the inputs' stream: default_rng(seed) and the case's own generator give other numbers
    for rng in (np.random.default_rng(0), np.random.default_rng([0, 0, len("softmax")])):
        assert not np.array_equal(first, rng.standard_normal((3, 4)))
