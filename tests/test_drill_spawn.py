"""How ``drill check`` starts its grading process (:mod:`numpy_transformer.drills.spawn`).

Both ways (a fork of the checking process, and a fresh interpreter) must isolate the user's file the
same way: exits, hard exits, infinite loops, printing. And the quick start that made the fork worth it
must not quietly go: ``import numpy_transformer`` is lazy, and ``drill`` imports only its own command.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest

import numpy_transformer as nt
import numpy_transformer.drills as drills
from numpy_transformer.drills import spawn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

OK = """
import numpy as np
def softmax_forward(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    y = e / e.sum(axis=-1, keepdims=True)
    return y, y
"""
OK_BACKWARD = "def softmax_backward(dy, y):\n    return y * (dy - (dy * y).sum(axis=-1, keepdims=True))\n"

METHODS = ["fork", "subprocess"] if sys.platform.startswith("linux") else ["subprocess"]


@pytest.fixture(params=METHODS)
def method(request, monkeypatch, tmp_path):
    monkeypatch.setattr(spawn, "FORCE", request.param)
    monkeypatch.setenv("NT_DRILL_DATA", str(tmp_path / "data"))     # attempts are recorded: not in ~
    return request.param


def grade(tmp_path, src, **kw):
    path = tmp_path / "softmax.py"
    path.write_text(src)
    buf = io.StringIO()
    kw.setdefault("cases", 4)
    rc = drills.check_file(str(path), stream=buf, torch="off", quiet=True, **kw)
    return rc, buf.getvalue()


def test_a_correct_file_passes_by_the_chosen_way(method, tmp_path, monkeypatch):
    used = []
    for way in ("_start_forked", "_start_subprocess"):
        real = getattr(spawn, way)
        monkeypatch.setattr(spawn, way, lambda *a, _real=real, _way=way: used.append(_way) or _real(*a))
    rc, out = grade(tmp_path, OK + OK_BACKWARD)
    assert rc == 0, out
    assert "PASS" in out
    assert used == ["_start_forked" if method == "fork" else "_start_subprocess"]


@pytest.mark.parametrize("src, status, needle", [
    (OK + "import sys\nsys.exit(3)\n", 2, "importing the file raised SystemExit: 3"),
    (OK + "def softmax_backward(dy, y):\n    import os\n    os._exit(7)\n", 1,
     "exited unexpectedly during case 1 (exit status 7)"),
    (OK + "def softmax_backward(dy, y):\n    import os, signal\n    os.kill(os.getpid(), signal.SIGKILL)\n", 1,
     "exited unexpectedly during case 1"),
    (OK + "def softmax_backward(dy, y):\n    import sys\n    sys.exit('bye')\n", 1,
     "softmax_backward raised SystemExit: bye"),
])
def test_exits_are_reported_and_the_caller_lives_on(method, tmp_path, src, status, needle):
    rc, out = grade(tmp_path, src)
    assert rc == status, out
    assert needle in " ".join(out.split()), out
    # this process (the one that forked, when it did) is unharmed and can grade again
    assert grade(tmp_path, OK + OK_BACKWARD)[0] == 0


def test_the_wall_clock_limit_kills_the_worker(method, tmp_path):
    src = OK + "def softmax_backward(dy, y):\n    while True:\n        pass\n"
    rc, out = grade(tmp_path, src, call_timeout=0, timeout=2)
    assert rc == 1, out
    assert "ran past the time limit of 2 s" in " ".join(out.split()), out


def test_the_users_output_is_captured_not_printed(method, tmp_path, capfd):
    src = OK.replace("return y, y", "print('debug', y.shape)\n    return y, y") + OK_BACKWARD
    rc, out = grade(tmp_path, src, show_output=True)
    assert rc == 0, out
    assert "debug (1, 1)" in out                            # in the report, where it belongs
    captured = capfd.readouterr()
    assert "debug" not in captured.out + captured.err      # and not on the caller's own streams


def test_fork_is_the_choice_on_linux_in_a_single_threaded_process():
    code = ("import sys; from numpy_transformer.drills import spawn; "
            "print(spawn.spawn_method())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=ROOT), check=True).stdout.strip()
    assert out == ("fork" if sys.platform.startswith("linux") else "subprocess")


def test_another_python_thread_means_a_fresh_interpreter():
    import threading
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert spawn.spawn_method() == "subprocess"
    finally:
        stop.set()
        t.join()


def test_import_numpy_transformer_is_lazy_and_every_public_name_resolves():
    code = ("import sys, numpy_transformer as nt\n"
            "heavy = [m for m in ('numpy_transformer.nn', 'numpy_transformer.functional', 'numpy_transformer.gpt') "
            "if m in sys.modules]\n"
            "assert not heavy, heavy\n"
            "from numpy_transformer import *\n"
            "assert all(getattr(nt, n) is not None for n in nt.__all__)\n")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), check=True)
    assert set(nt.__all__) <= set(dir(nt))
    assert nt.Linear is nt.nn.Linear and nt.functional.softmax_forward
    import numpy_transformer.gradcheck.pair                             # the subpackage of the same name
    assert nt.gradcheck is sys.modules["numpy_transformer.gradcheck.pair"].gradcheck
    with pytest.raises(AttributeError, match="has no attribute 'Linaer'"):
        nt.Linaer                                                       # noqa: B018


def test_drill_imports_only_its_own_command():
    code = ("import sys\nfrom numpy_transformer.cli import main\n"
            "assert main(['drill', 'list']) == 0\n"
            "loaded = [m for m in ('numpy_transformer.training', 'numpy_transformer.registry', "
            "'numpy_transformer.cli.train', 'numpy_transformer.plotting') if m in sys.modules]\n"
            "assert not loaded, loaded\n")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                   env=dict(os.environ, PYTHONPATH=ROOT), check=True)


needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX-only")


@needs_fork
def test_an_interrupted_check_kills_the_grading_child(tmp_path):
    """Ctrl-C sent to the checking process alone (not its group) while it waits must not leave the
    user's infinite loop running in the forked child."""
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
@pytest.mark.parametrize("code, status", [(None, 0), (3, 3), ("bye", 1)])
def test_the_child_exits_as_the_interpreter_would(tmp_path, code, status):
    pid = os.fork()
    if pid == 0:                                 # pragma: no cover - the child
        spawn._child(lambda argv: sys.exit(code), [], str(tmp_path / "o"), str(tmp_path / "e"))
    _, st = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(st) == status


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
            "assert nt.nn.Module and nt.model.TransformerModel and nt.gpt.GPT and nt.kernels.erf\n"
            "assert 'importlib' not in dir(nt) and 'annotations' not in dir(nt)\n")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), check=True)
