"""install.sh checks where it installs before installing anything (INSTALL_DRY_RUN=1 installs nothing)."""

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def dry_run(python):
    env = {**os.environ, "INSTALL_DRY_RUN": "1", "PYTHON": python}
    return subprocess.run(["bash", str(ROOT / "install.sh")], env=env, capture_output=True, text=True, timeout=60)


def test_it_says_which_python_and_site_packages_it_installs_into():
    r = dry_run(sys.executable)
    if sys.prefix == sys.base_prefix and os.path.exists(os.path.join(sysconfig.get_path("stdlib"),
                                                                     "EXTERNALLY-MANAGED")):
        pytest.skip("the test runner's own Python is externally managed")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == (f"install.sh: installing evalstop-gym[all] into {sys.executable} "
                                f"(packages go to {sysconfig.get_path('purelib')})")


def test_it_refuses_an_externally_managed_python_in_one_line():
    system = "/usr/bin/python3"
    probe = "import os, sysconfig; print(os.path.exists(os.path.join(sysconfig.get_path('stdlib'), 'EXTERNALLY-MANAGED')))"
    if not os.path.exists(system) or subprocess.run([system, "-c", probe], capture_output=True,
                                                    text=True).stdout.strip() != "True":
        pytest.skip("no externally managed system Python here")
    r = dry_run(system)
    assert r.returncode == 1 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("install.sh: error: ") and "PEP 668" in lines[0]
    assert "python3 -m venv" in lines[0]
