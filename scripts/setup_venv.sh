#!/usr/bin/env bash
# Create (once) the checkout's virtual environment .venv and install the project into it with the
# dev extra (NumPy, tqdm, matplotlib, pytest, hypothesis, and torch==2.13.0 for the oracle).
# scripts/test.sh and scripts/demo.sh run this first.
#
# TORCH_INDEX_URL: the package index torch is taken from. PyPI's Linux wheel of torch is the CUDA build
# (gigabytes); on a machine without a GPU use the CPU build:
#     TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu scripts/test.sh
# Unset (the default), torch comes from pip's own configured index like everything else.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
pip=(.venv/bin/python -m pip install -q --disable-pip-version-check)
if [ -n "${TORCH_INDEX_URL:-}" ]; then
    "${pip[@]}" --index-url "$TORCH_INDEX_URL" "torch==2.13.0"
fi
"${pip[@]}" -e ".[dev]"
