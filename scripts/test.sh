#!/usr/bin/env bash
# Run the test suite in a virtual environment of its own (.venv), creating it on first use.
# Usage: scripts/test.sh [pytest args...]   e.g. scripts/test.sh -m slow, or HYPOTHESIS_PROFILE=thorough
# A machine without a GPU: TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu scripts/test.sh (see setup_venv.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_venv.sh
exec .venv/bin/python -m pytest -n "${PYTEST_WORKERS:-2}" "$@"
