#!/usr/bin/env bash
# Run the demo (one encoder block forward + backward, every step traced) in .venv, creating it on first use.
# Usage: scripts/demo.sh [demo options...]   e.g. scripts/demo.sh --d-model 128 --nhead 4
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[dev]"
exec .venv/bin/python -m numpy_transformer demo "$@"
