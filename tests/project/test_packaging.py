"""The package as pip sees it: the licence, the metadata of ``pyproject.toml``'s ``[project]`` table, the
``test`` extra that runs this suite, ``py.typed`` and the drills' pages in the wheel, ``--version``.

Everything here runs offline: the wheel is built from a copy of the sources with the setuptools already
installed (``--no-build-isolation``), and nothing is installed."""

import ast
import re
import shutil
import subprocess
import sys
import zipfile

import pytest
from _paths import REPO_ROOT, pyproject

import numpy_transformer

PROJECT = pyproject()["project"]
SUPPORTED = ["3.10", "3.11", "3.12", "3.13"]
FIRST_PARTY = {"numpy_transformer", "reference_torch", "tests"}
#: import name -> distribution name, where the two differ
DISTRIBUTION = {"xdist": "pytest-xdist"}


def _name(requirement: str) -> str:
    """The normalised distribution name of a requirement string (PEP 503): ``"torch==2.13.0"`` -> torch."""
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", requirement).group(0)).lower()


def _imported_modules(path) -> set[str]:
    """The top-level modules a file imports: ``import x.y``, ``from x import y`` (absolute ones, at any
    depth of the file) and the string given to ``pytest.importorskip`` or ``importlib.import_module``."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            found.add(node.module.split(".")[0])
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("importorskip", "import_module") and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
              and not node.args[0].value.startswith(".")):
            found.add(node.args[0].value.split(".")[0])
    return found


def _third_party_imports_of_the_tests() -> dict[str, list[str]]:
    """Each third-party module that a file under tests/ imports -> those files: neither the standard
    library, nor ours, nor a module of the repository (``_paths``, ``bench_layer``...)."""
    ours = FIRST_PARTY | {p.stem for p in REPO_ROOT.glob("tests/**/*.py")} | {
        p.stem for p in REPO_ROOT.glob("benchmarks/*.py")}
    where: dict[str, list[str]] = {}
    for path in sorted(REPO_ROOT.glob("tests/**/*.py")):
        for module in _imported_modules(path) - ours - set(sys.stdlib_module_names):
            where.setdefault(module, []).append(str(path.relative_to(REPO_ROOT)))
    return where


def test_the_licence_is_mit_and_declared():
    text = (REPO_ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License") and "numpy-transformer authors" in text
    assert PROJECT["license"] == "MIT" and PROJECT["license-files"] == ["LICENSE"]


def test_the_project_table_holds_the_metadata():
    for field in ("name", "description", "readme", "license", "requires-python", "classifiers", "dependencies",
                  "optional-dependencies", "scripts"):
        assert PROJECT.get(field), f"pyproject.toml [project] lacks {field!r}"
    assert PROJECT["name"] == "numpy-transformer" and PROJECT["readme"] == "README.md"
    assert PROJECT["dynamic"] == ["version"]
    tool = pyproject()["tool"]["setuptools"]
    assert tool["dynamic"]["version"] == {"attr": "numpy_transformer.__version__"}
    assert PROJECT["requires-python"] == f">={SUPPORTED[0]}"
    pythons = [c.rsplit(" :: ", 1)[1] for c in PROJECT["classifiers"]
               if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)]
    assert pythons == SUPPORTED
    assert {_name(r) for r in PROJECT["dependencies"]} == {"numpy", "tqdm"}
    assert PROJECT["scripts"] == {"numpy-transformer": "numpy_transformer.cli:main"}
    assert not (REPO_ROOT / "setup.cfg").exists(), "the metadata lives in pyproject.toml alone"


def test_py_typed_is_package_data():
    assert (REPO_ROOT / "numpy_transformer" / "py.typed").is_file()
    assert "py.typed" in pyproject()["tool"]["setuptools"]["package-data"]["numpy_transformer"]


def test_the_test_extra_holds_every_third_party_module_the_tests_import():
    extras = PROJECT["optional-dependencies"]
    provided = {_name(r) for r in PROJECT["dependencies"] + extras["test"]}
    imported = _third_party_imports_of_the_tests()
    assert {"numpy", "pytest", "hypothesis", "torch", "transformers"} <= set(imported)   # the scan sees them
    missing = {m: files for m, files in imported.items() if _name(DISTRIBUTION.get(m, m)) not in provided}
    assert not missing, f"the test extra of pyproject.toml lacks what these tests import: {missing}"
    assert {"pytest-xdist", "ruff"} <= provided                     # scripts/test.sh's -n 2; test_style.py
    assert "torch==2.13.0" in extras["test"]                        # the pin the comparisons are made with
    assert set(extras["test"]) <= set(extras["dev"]), "dev is the test extra and more"


def test_the_scan_sees_nested_imports_and_importorskip(tmp_path):
    src = tmp_path / "test_x.py"
    src.write_text("import os.path\nfrom numpy import linalg\ndef f():\n    import mpmath\n"
                   "    pytest.importorskip('safetensors')\n    from . import sibling\n", encoding="utf-8")
    assert _imported_modules(src) == {"os", "numpy", "mpmath", "safetensors"}


def test_version_is_printed_by_the_command():
    proc = subprocess.run([sys.executable, "-m", "numpy_transformer", "--version"], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"numpy-transformer {numpy_transformer.__version__}\n",
                                                           "")
    assert re.fullmatch(r"\d+\.\d+\.\d+", numpy_transformer.__version__)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git to list the tracked sources")
def test_the_wheel_ships_py_typed_the_licence_the_drill_pages_and_the_script(tmp_path):
    """Built offline from a copy of the tracked sources (no build folder is left in the checkout)."""
    src = tmp_path / "src"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "pyproject.toml", "README.md",
                            "LICENSE", "numpy_transformer", "reference_torch"], cwd=REPO_ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    for name in files:
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / name, src / name)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                           "--no-index", str(src), "-w", str(tmp_path / "wheel")], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    (wheel,) = (tmp_path / "wheel").glob("numpy_transformer-*.whl")
    assert wheel.name.startswith(f"numpy_transformer-{numpy_transformer.__version__}-py3-none-any")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        info = f"numpy_transformer-{numpy_transformer.__version__}.dist-info"
        metadata = z.read(f"{info}/METADATA").decode()
        entry_points = z.read(f"{info}/entry_points.txt").decode()
    assert "numpy_transformer/py.typed" in names and f"{info}/licenses/LICENSE" in names
    exercises = {p.name for p in (REPO_ROOT / "numpy_transformer/drills/exercises").iterdir()
                 if (p / "derivation.md").is_file()}
    assert exercises and all(f"numpy_transformer/drills/exercises/{e}/derivation.md" in names for e in exercises)
    assert any(n.startswith("reference_torch/") for n in names)
    assert "License-Expression: MIT" in metadata and "Requires-Python: >=3.10" in metadata
    assert "numpy-transformer = numpy_transformer.cli:main" in entry_points
