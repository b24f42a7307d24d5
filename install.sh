#!/usr/bin/env bash
# Installs evalstop-gym with every extra into the current Python (>= 3.10).
# torch is installed first, as the CPU build torch==2.13.0, only where no torch
# is present: a plain "torch" requirement would pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")"
PY="${PYTHON:-python3}"
if ! "$PY" -c "import torch" >/dev/null 2>&1; then
    "$PY" -m pip install --quiet torch==2.13.0
fi
"$PY" -m pip install --quiet -e ".[all]"
