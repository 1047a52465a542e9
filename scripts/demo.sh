#!/usr/bin/env bash
# Run the demo (one encoder block forward + backward, every step traced) in .venv, creating it on first use.
# Usage: scripts/demo.sh [demo options...]   e.g. scripts/demo.sh --d-model 128 --nhead 4
# A machine without a GPU: TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu scripts/demo.sh (see setup_venv.sh)
# The install runs only when needed: no .venv yet, or pyproject.toml or scripts/setup_venv.sh changed since
# the last one (.venv/.installed holds their checksum); otherwise the demo starts at once.
set -euo pipefail
cd "$(dirname "$0")/.."
stamp=$(cksum pyproject.toml scripts/setup_venv.sh 2>/dev/null || true)
if [ ! -x .venv/bin/python ] || [ "$(cat .venv/.installed 2>/dev/null)" != "$stamp" ]; then
    bash scripts/setup_venv.sh
    echo "$stamp" > .venv/.installed
fi
exec .venv/bin/python -m numpy_transformer demo "$@"
