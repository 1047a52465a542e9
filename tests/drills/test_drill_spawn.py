"""How ``drill check`` starts its grading process (:mod:`numpy_transformer.drills.engine.spawn`).

The child is a fresh interpreter in isolated mode that runs the worker script by path: it must isolate
the user's file (exits, hard exits, infinite loops, printing) and never hold the library. And the quick
start must not quietly go: ``import numpy_transformer`` is lazy, and ``drill`` imports only its own
command.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest
from _paths import REPO_ROOT

import numpy_transformer as nt
import numpy_transformer.drills as drills
from numpy_transformer.drills.engine import spawn

ROOT = str(REPO_ROOT)

OK = """
import numpy as np
def softmax_forward(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    y = e / e.sum(axis=-1, keepdims=True)
    return y, y
"""
OK_BACKWARD = "def softmax_backward(dy, y):\n    return y * (dy - (dy * y).sum(axis=-1, keepdims=True))\n"

@pytest.fixture(autouse=True)
def data(monkeypatch, tmp_path):
    monkeypatch.setenv("NT_DRILL_DATA", str(tmp_path / "data"))     # attempts are recorded: not in ~
    return tmp_path / "data"


def grade(tmp_path, src, **kw):
    path = tmp_path / "softmax.py"
    path.write_text(src)
    buf = io.StringIO()
    kw.setdefault("cases", 4)
    rc = drills.check_file(str(path), stream=buf, torch="off", quiet=True, **kw)
    return rc, buf.getvalue()


def test_a_correct_file_passes_in_a_fresh_isolated_interpreter(tmp_path, monkeypatch):
    started = []
    real = subprocess.Popen
    monkeypatch.setattr(spawn.subprocess, "Popen", lambda cmd, **kw: started.append(cmd) or real(cmd, **kw))
    rc, out = grade(tmp_path, OK + OK_BACKWARD)
    assert rc == 0, out
    assert "PASS" in out
    # the worker script by path, isolated (-I: no cwd on sys.path, no PYTHON* variables): never a fork
    assert len(started) == 1 and started[0][:4] == [sys.executable, "-I", "-B", spawn.WORKER], started
    assert spawn.WORKER.endswith(os.path.join("drills", "engine", "worker.py"))


@pytest.mark.parametrize("src, status, needle", [
    (OK + "import sys\nsys.exit(3)\n", 2, "importing the file raised SystemExit: 3"),
    (OK + "def softmax_backward(dy, y):\n    import os\n    os._exit(7)\n", 1,
     "exited unexpectedly during case 1 (exit status 7)"),
    (OK + "def softmax_backward(dy, y):\n    import os, signal\n    os.kill(os.getpid(), signal.SIGKILL)\n", 1,
     "exited unexpectedly during case 1"),
    (OK + "def softmax_backward(dy, y):\n    import sys\n    sys.exit('bye')\n", 1,
     "softmax_backward raised SystemExit: bye"),
])
def test_exits_are_reported_and_the_caller_lives_on(tmp_path, src, status, needle):
    rc, out = grade(tmp_path, src)
    assert rc == status, out
    assert needle in " ".join(out.split()), out
    # this process is unharmed and can grade again
    assert grade(tmp_path, OK + OK_BACKWARD)[0] == 0


def test_the_wall_clock_limit_kills_the_worker(tmp_path):
    src = OK + "def softmax_backward(dy, y):\n    while True:\n        pass\n"
    rc, out = grade(tmp_path, src, call_timeout=0, timeout=2)
    assert rc == 1, out
    assert "ran past the time limit of 2 s" in " ".join(out.split()), out


def test_the_users_output_is_captured_not_printed(tmp_path, capfd):
    src = OK.replace("return y, y", "print('debug', y.shape)\n    return y, y") + OK_BACKWARD
    rc, out = grade(tmp_path, src, show_output=True)
    assert rc == 0, out
    assert "debug (1, 1)" in out                            # in the report, where it belongs
    captured = capfd.readouterr()
    assert "debug" not in captured.out + captured.err      # and not on the caller's own streams


def test_the_worker_script_runs_without_the_package_on_the_path(tmp_path):
    """``python -I engine/worker.py`` from any directory, without PYTHONPATH: it loads its helpers by path, so
    it starts and ends cleanly (end of file on its input: exit status 0, nothing on stderr)."""
    r, w = os.pipe()
    os.close(w)
    proc = subprocess.run([sys.executable, "-I", "-B", spawn.WORKER, "--rfd", str(r), "--wfd", "1"],
                          cwd=str(tmp_path), pass_fds=(r,), capture_output=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    os.close(r)
    assert proc.returncode == 0 and not proc.stderr, proc.stderr.decode()


def test_every_exercise_driver_is_plain_source_and_data(tmp_path):
    for ex in drills.EXERCISES.values():
        msg = spawn.setup_message(ex, str(tmp_path / "f.py"), 1.0)
        assert msg["driver_name"] == ex.run.__name__ and f"def {ex.run.__name__}(" in msg["driver"]
        assert all(isinstance(v, (str, int, float, tuple, list, dict)) for v in msg["constants"].values())
        assert "numpy_transformer" not in msg["driver"] + repr(msg["constants"]), ex.name


def test_import_numpy_transformer_is_lazy_and_every_public_name_resolves():
    code = ("import sys, numpy_transformer as nt\n"
            "heavy = [m for m in ('numpy_transformer.nn', 'numpy_transformer.functional', "
            "'numpy_transformer.models.gpt') if m in sys.modules]\n"
            "assert not heavy, heavy\n"
            "from numpy_transformer import *\n"
            "assert all(getattr(nt, n) is not None for n in nt.__all__)\n")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), check=True)
    assert set(nt.__all__) <= set(dir(nt))
    assert nt.Linear is nt.nn.Linear and nt.functional.softmax_forward
    assert nt.gradcheck is sys.modules["numpy_transformer.study.gradchecking.pair"].gradcheck
    with pytest.raises(AttributeError, match="has no attribute 'Linaer'"):
        nt.Linaer                                                       # noqa: B018


def test_drill_imports_only_its_own_command():
    code = ("import sys\nfrom numpy_transformer.cli import main\n"
            "assert main(['drill', 'list']) == 0\n"
            "loaded = [m for m in ('numpy_transformer.training.trainer', 'numpy_transformer.testing', "
            "'numpy_transformer.cli.train', 'numpy_transformer.study.plotting') if m in sys.modules]\n"
            "assert not loaded, loaded\n")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                   env=dict(os.environ, PYTHONPATH=ROOT), check=True)


needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX-only")


@needs_fork
def test_an_interrupted_check_kills_the_grading_child(tmp_path):
    """Ctrl-C sent to the checking process alone (not its group) while it waits must not leave the
    user's infinite loop running in the grading child."""
    import signal
    import time
    pidfile = tmp_path / "child.pid"
    user = tmp_path / "softmax.py"
    user.write_text(f"import os\nopen({str(pidfile)!r}, 'w').write(str(os.getpid()))\nwhile True:\n    pass\n")
    code = ("import io, sys\nimport numpy_transformer.drills as d\n"
            f"sys.exit(d.check_file({str(user)!r}, exercise='softmax', cases=1, stream=io.StringIO()))\n")
    parent = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT))
    try:
        for _ in range(600):                     # until the child has started the user's loop
            if pidfile.exists() and pidfile.read_text():
                break
            time.sleep(0.05)
        child = int(pidfile.read_text())
        parent.send_signal(signal.SIGINT)
        assert parent.wait(timeout=30) == 130                       # "interrupted"
        for _ in range(100):
            try:
                os.kill(child, 0)
            except ProcessLookupError:
                break                                                # killed and reaped
            time.sleep(0.05)
        else:
            os.kill(child, signal.SIGKILL)
            pytest.fail("the grading child outlived the interrupted check")
    finally:
        if parent.poll() is None:
            parent.kill()


@needs_fork
def test_the_elementwise_pool_works_in_a_forked_child():
    """fork copies only the calling thread: the child must not wait on the parent's pool threads."""
    import numpy as np

    from numpy_transformer.kernels import parallel
    big = np.ones(4 * parallel.CHUNK, np.float32)
    out = np.empty_like(big)
    parallel.map_chunks(lambda o, x: np.multiply(x, 2, out=o), out, big)      # the parent's pool exists
    pid = os.fork()
    if pid == 0:                                 # pragma: no cover - the child
        import signal
        signal.alarm(20)                         # a hang would end here, with SIGALRM's status
        parallel.map_chunks(lambda o, x: np.multiply(x, 3, out=o), out, big)
        os._exit(0 if out[0] == 3 else 1)
    _, st = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(st) == 0


def test_the_pool_threads_use_the_callers_errstate():
    import numpy as np

    from numpy_transformer.kernels import parallel
    big = np.full(4 * parallel.CHUNK, 3e38, np.float32)
    out = np.empty_like(big)
    with np.errstate(over="raise"), pytest.raises(FloatingPointError):
        parallel.map_chunks(lambda o, x: np.multiply(x, 10, out=o), out, big)
    with np.errstate(over="ignore"):
        parallel.map_chunks(lambda o, x: np.multiply(x, 10, out=o), out, big)
    assert np.isinf(out).all()


def test_every_submodule_is_an_attribute_as_with_eager_imports():
    code = ("import numpy_transformer as nt\n"
            "assert nt.nn.Module and nt.models.encoder.TransformerModel and nt.models.gpt.GPT and nt.kernels.erf\n"
            "assert 'importlib' not in dir(nt) and 'annotations' not in dir(nt)\n")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), check=True)
