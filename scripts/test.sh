#!/usr/bin/env bash
# Run the test suite in a virtual environment of its own (.venv), creating it on first use.
# Usage: scripts/test.sh [pytest args...]   e.g. scripts/test.sh -m slow, or HYPOTHESIS_PROFILE=thorough
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[dev]"
exec .venv/bin/python -m pytest -n "${PYTEST_WORKERS:-2}" "$@"
