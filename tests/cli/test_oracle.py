"""numpy_transformer.oracle: the one place that loads reference_torch, and what each command says
when torch is not installed."""

import ast
import os
import subprocess
import sys

import pytest
from _paths import REPO_ROOT, pyproject

from numpy_transformer import oracle
from numpy_transformer.cli import main

ROOT = str(REPO_ROOT)
HINT = ("needs PyTorch, the optional oracle: "
        "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu "
        "(the CPU build; or pip install -e '.[dev]')")
SMALL_TRAIN = ["--task", "reverse", "--vocab-size", "10", "--seq-len", "6", "--num-train", "40", "--num-val", "10",
               "--d-model", "16", "--nhead", "2", "--layers", "1", "--dim-feedforward", "32", "--batch-size", "4",
               "--steps", "1", "--quiet"]


@pytest.fixture
def no_torch(monkeypatch):
    """As if torch were not installed (reference_torch forgotten so that it is imported again)."""
    monkeypatch.setitem(sys.modules, "torch", None)
    for name in [m for m in sys.modules if m == "reference_torch" or m.startswith("reference_torch.")]:
        monkeypatch.delitem(sys.modules, name)


def test_load_and_available_without_torch(no_torch):
    assert oracle.available() == (False, "torch not installed")
    assert oracle.available("models.encoder") == (False, "torch not installed")
    with pytest.raises(oracle.OracleUnavailable) as info:
        oracle.load("models.encoder", purpose="--check-torch")
    exc = info.value
    assert isinstance(exc, ImportError) and exc.torch_missing and exc.reason == "torch not installed"
    assert str(exc) == f"--check-torch {HINT}"
    assert str(exc).count("\n") == 0


def test_load_names_a_real_import_error():
    pytest.importorskip("torch")
    assert oracle.available("models.encoder") == (True, None)
    assert oracle.load("models.encoder").__name__ == "reference_torch.models.encoder"
    with pytest.raises(oracle.OracleUnavailable, match=r"reference_torch\.no_such_module, which failed to import: "
                                                         r"ModuleNotFoundError") as info:
        oracle.load("no_such_module")
    assert not info.value.torch_missing
    assert info.value.reason.startswith("reference_torch unavailable: No module named")


def test_the_pin_is_the_test_and_dev_extras():
    extras = pyproject()["project"]["optional-dependencies"]
    assert oracle.TORCH_REQUIREMENT in extras["test"] and oracle.TORCH_REQUIREMENT in extras["dev"]


def test_train_check_torch_without_torch(no_torch, capsys):
    assert main(["train", "--check-torch", *SMALL_TRAIN]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"error: --check-torch {HINT}\n"


def test_demo_without_torch(no_torch, capsys):
    assert main(["demo", "--vocab", "20", "--d-model", "8", "--nhead", "2", "--dim-feedforward", "16", "--batch", "1",
                 "--seq-len", "3"]) == 0
    assert f"PyTorch comparison skipped: this {HINT}" in capsys.readouterr().out


def test_checker_without_torch_prints_one_line(tmp_path):
    fake = tmp_path / "fake"
    (fake / "torch").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text("raise ImportError('No module named torch', name='torch')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(fake), ROOT]))
    proc = subprocess.run([sys.executable, "-m", "reference_torch.check", "--trials", "1"], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr == f"error: python -m reference_torch.check {HINT}\n", proc.stderr


BLOCKER = """import sys
class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, _NoTorch())
"""


@pytest.mark.parametrize("argv,expect", [
    (["-m", "reference_torch.check", "--trials", "1"], f"error: python -m reference_torch.check {HINT}\n"),
    (["-m", "numpy_transformer", "train", *SMALL_TRAIN, "--check-torch"], f"error: --check-torch {HINT}\n"),
])
def test_missing_torch_in_a_fresh_interpreter_is_one_line(tmp_path, argv, expect):
    """torch not installed at all (an import blocker in sitecustomize, as a fresh clone without torch)."""
    (tmp_path / "sitecustomize.py").write_text(BLOCKER)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), ROOT]))
    proc = subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=120)
    assert (proc.returncode, proc.stderr) == (1 if "reference_torch.check" in argv else 2, expect), proc.stderr


def _code_mentions(path, word):
    """Lines where ``word`` occurs in an import or a string that is not a docstring."""
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            if word in node.value:
                hits.append(node.lineno)
        elif isinstance(node, ast.Import) and any(a.name.split(".")[0] == word for a in node.names):
            hits.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == word:
            hits.append(node.lineno)
    return hits


def test_only_the_loader_names_reference_torch():
    package = os.path.join(ROOT, "numpy_transformer")
    found = {}
    for directory, _, files in os.walk(package):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                hits = _code_mentions(path, "reference_torch")
                if hits:
                    found[os.path.relpath(path, ROOT)] = hits
    # the one declared exception: the drill guard's list of packages a submission may not import names
    # the oracle's package as data (it refuses it, never imports it), on that one line of code
    guard = os.path.join("numpy_transformer", "drills", "engine", "guard.py")
    forbidden_line = [i for i, line in enumerate(open(os.path.join(ROOT, guard)), 1)
                      if line.startswith("FORBIDDEN = (")]
    assert found.pop(guard, None) == forbidden_line, "the drill guard names reference_torch only in FORBIDDEN"
    assert set(found) == {os.path.join("numpy_transformer", "oracle.py")}, found
