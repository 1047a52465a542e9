#!/usr/bin/env bash
# Run the demo (one encoder block forward + backward, every step traced) in .venv, creating it on first use.
# Usage: scripts/demo.sh [demo options...]   e.g. scripts/demo.sh --d-model 128 --nhead 4
# A machine without a GPU: TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu scripts/demo.sh (see setup_venv.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_venv.sh
exec .venv/bin/python -m numpy_transformer demo "$@"
