"""The repository passes ``ruff check`` with the configuration in pyproject.toml ([tool.ruff])."""

import importlib.util
import subprocess
import sys

import pytest
from _paths import REPO_ROOT


def test_ruff_check_is_clean():
    if importlib.util.find_spec("ruff") is None:
        pytest.fail("ruff is not installed: it is a development dependency, pip install -e .[dev]")
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=REPO_ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, f"ruff check . failed (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}"
