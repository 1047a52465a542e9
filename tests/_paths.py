"""Where the repository is, for the tests in the folders below (``tests/<package>/test_*.py``)."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
