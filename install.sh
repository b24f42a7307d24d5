#!/usr/bin/env bash
# Installs evalstop-gym (editable) with every extra into one Python (>= 3.10): $PYTHON, else python3.
#
# torch: installed first as torch==2.13.0, only where no torch is present (an installed torch is
# kept). Which build that is depends on the package index pip uses: on the default public index
# (PyPI) Linux wheels are CUDA builds that pull several GB of nvidia-* libraries; set
# TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu for the CPU build. The script prints the
# build it ended with.
#
# It refuses, in one line and before installing anything, a Python whose packages the system
# manages (PEP 668: an EXTERNALLY-MANAGED marker outside a virtual environment).
# INSTALL_DRY_RUN=1 checks and says where it would install, and installs nothing.
#
# On a Python that already has this checkout installed (editable) with every requirement of
# evalstop-gym[all] at an allowed version (tools/install_check.py reads them from pyproject.toml), it
# says so and runs no pip: a second run takes seconds. INSTALL_FORCE=1 runs pip anyway.
set -euo pipefail
cd "$(dirname "$0")"
PY="${PYTHON:-python3}"

if ! TARGET=$("$PY" - <<'EOF'
import os, sys, sysconfig
if sys.version_info < (3, 10):
    sys.exit(f"install.sh: error: {sys.executable} is Python {sys.version.split()[0]}; evalstop-gym needs >= 3.10")
marker = os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")
if sys.prefix == sys.base_prefix and os.path.exists(marker):
    sys.exit(f"install.sh: error: {sys.executable} is an externally managed Python (PEP 668: {marker}); "
             "create a virtual environment and run install.sh with it: "
             "python3 -m venv .venv && PYTHON=.venv/bin/python ./install.sh")
print(f"{sys.executable} (packages go to {sysconfig.get_path('purelib')})")
EOF
); then
    exit 1
fi
if [[ "${INSTALL_FORCE:-0}" != 1 ]] && "$PY" tools/install_check.py "$PWD" >/dev/null 2>&1; then
    echo "install.sh: evalstop-gym[all] is installed in $TARGET with every requirement met: nothing to do"
    exit 0
fi
echo "install.sh: installing evalstop-gym[all] into $TARGET"
if [[ "${INSTALL_DRY_RUN:-0}" == 1 ]]; then
    exit 0
fi
if ! "$PY" -c "import torch" >/dev/null 2>&1; then
    "$PY" -m pip install --quiet torch==2.13.0 ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
fi
"$PY" -m pip install --quiet -e ".[all]"
"$PY" -c "import torch; print(f'install.sh: torch {torch.__version__}, ' + (f'CUDA {torch.version.cuda} build' if torch.version.cuda else 'CPU build'))"
