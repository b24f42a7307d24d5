"""install.sh checks where it installs before installing anything (INSTALL_DRY_RUN=1 installs nothing)."""

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def dry_run(python, force="1"):
    env = {**os.environ, "INSTALL_DRY_RUN": "1", "PYTHON": python, "INSTALL_FORCE": force}
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


def test_a_second_run_with_everything_installed_runs_no_pip():
    """tools/install_check.py: the checkout installed editable, every requirement of [all] at an allowed
    version; install.sh then says so (the dry run too) and stops in seconds."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from install_check import missing
    finally:
        sys.path.pop(0)
    gaps = missing(ROOT)
    r = dry_run(sys.executable, force="0")
    assert r.returncode == 0, r.stderr
    if gaps:   # e.g. a worktree beside the installed checkout: pip would run
        assert r.stdout.startswith("install.sh: installing evalstop-gym[all] into"), (gaps, r.stdout)
    else:
        assert r.stdout.strip().endswith("with every requirement met: nothing to do")


def test_the_check_names_what_is_missing(tmp_path):
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from install_check import missing, requirements
    finally:
        sys.path.pop(0)
    project = {"dependencies": ["pytest>=1"], "optional-dependencies": {
        "a": ["pytest>=999", "surely-not-a-package-here>=1"], "b": ["evalstop-gym[a]"],
        "all": ["evalstop-gym[b]", "numpy>=1; python_version < '3'"]}}
    assert requirements(project) == ["pytest>=1", "numpy>=1; python_version < '3'", "pytest>=999",
                                     "surely-not-a-package-here>=1"]
    text = (ROOT / "pyproject.toml").read_text().replace('dependencies = [', 'dependencies = [\n    "pytest>=999",', 1)
    (tmp_path / "pyproject.toml").write_text(text)
    gaps = missing(tmp_path)
    assert any(g.startswith("pytest ") and g.endswith("does not satisfy >=999") for g in gaps), gaps
    assert f"evalstop-gym is not an editable install of {tmp_path.resolve()}" in gaps
