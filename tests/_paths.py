"""Where the repository is, for the tests in the folders below (``tests/<package>/test_*.py``), and its
``pyproject.toml`` read as TOML."""

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:                                       # Python 3.10: the test extra installs tomli, tomllib's original
    import tomli as tomllib

REPO_ROOT = Path(__file__).resolve().parents[1]


def pyproject() -> dict:
    """``pyproject.toml`` of the repository, parsed (the package's metadata is its ``[project]`` table)."""
    with open(REPO_ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)
