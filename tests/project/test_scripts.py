"""scripts/test.sh and scripts/demo.sh: the venv set-up they share, and TORCH_INDEX_URL for the CPU build
of torch (PyPI's Linux wheel is the CUDA one). Run against a stand-in .venv/bin/python that records
what it was asked to do, so no package is installed."""

import os
import shutil
import subprocess

import pytest
from _paths import REPO_ROOT

ROOT = str(REPO_ROOT)
CPU = "https://download.pytorch.org/whl/cpu"


def _run(tmp_path, script, env_extra):
    repo = tmp_path / "repo"
    shutil.copytree(os.path.join(ROOT, "scripts"), repo / "scripts")
    (repo / ".venv" / "bin").mkdir(parents=True)
    calls = tmp_path / "calls.txt"
    fake = repo / ".venv" / "bin" / "python"
    fake.write_text(f'#!/usr/bin/env bash\necho "$*" >> "{calls}"\n')
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "TORCH_INDEX_URL"}
    env.update(env_extra)
    proc = subprocess.run(["bash", str(repo / "scripts" / script), "-k", "x"], capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return calls.read_text().splitlines()


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("script,last", [("test.sh", "-m pytest -n 2 -k x"),
                                         ("demo.sh", "-m numpy_transformer demo -k x")])
def test_scripts_take_the_torch_index_from_the_environment(tmp_path, script, last):
    pip = "-m pip install -q --disable-pip-version-check"
    assert _run(tmp_path / "plain", script, {}) == [f"{pip} -e .[dev]", last]          # unchanged default
    assert _run(tmp_path / "cpu", script, {"TORCH_INDEX_URL": CPU}) == [
        f"{pip} --index-url {CPU} torch==2.13.0", f"{pip} -e .[dev]", last]


def test_ci_runs_the_readme_test_command():
    ci = open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8").read()
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    assert "exec bash scripts/test.sh\n" in ci and "scripts/test.sh " in readme
    assert f"TORCH_INDEX_URL={CPU}" in readme



@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_demo_installs_only_when_needed(tmp_path):
    """The first call installs; the next ones run the demo at once; a changed pyproject.toml (or
    setup_venv.sh) installs again."""
    repo = tmp_path / "repo"
    shutil.copytree(os.path.join(ROOT, "scripts"), repo / "scripts")
    shutil.copy(os.path.join(ROOT, "pyproject.toml"), repo / "pyproject.toml")
    (repo / ".venv" / "bin").mkdir(parents=True)
    calls = tmp_path / "calls.txt"
    fake = repo / ".venv" / "bin" / "python"
    fake.write_text(f'#!/usr/bin/env bash\necho "$*" >> "{calls}"\n')
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "TORCH_INDEX_URL"}

    def demo():
        calls.write_text("")
        proc = subprocess.run(["bash", str(repo / "scripts" / "demo.sh")], capture_output=True, text=True, env=env,
                              timeout=60)
        assert proc.returncode == 0, proc.stderr
        return calls.read_text().splitlines()
    install, run = "-m pip install -q --disable-pip-version-check -e .[dev]", "-m numpy_transformer demo"
    assert demo() == [install, run]
    assert demo() == [run] and demo() == [run]
    with open(repo / "pyproject.toml", "a") as f:
        f.write("# changed\n")
    assert demo() == [install, run]
    assert demo() == [run]
