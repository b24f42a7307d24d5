"""The built wheel installs only the evalstop_gym namespace: no generic top-level agents/ or
baselines/ in site-packages, with the hyperparameter files and the py.typed marker inside."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel_files(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                        str(out), str(ROOT)], capture_output=True, text=True, timeout=300)
    if r.returncode != 0 and "No module named" in r.stderr:
        pytest.skip(f"cannot build here: {r.stderr.strip().splitlines()[-1]}")
    assert r.returncode == 0, r.stderr
    (wheel,) = out.glob("evalstop_gym-*.whl")
    return zipfile.ZipFile(wheel).namelist()


def test_the_wheel_has_no_generic_top_level_packages(wheel_files):
    tops = {name.split("/")[0] for name in wheel_files}
    assert {t for t in tops if not t.startswith("evalstop_gym")} == set()
    assert not any(name.startswith(("agents/", "baselines/")) for name in wheel_files)


def test_the_wheel_holds_the_policies_hyperparameters_and_py_typed(wheel_files):
    files = set(wheel_files)
    assert "evalstop_gym/baselines/evalstop.py" in files and "evalstop_gym/agents/train.py" in files
    assert "evalstop_gym/py.typed" in files
    yml = {Path(n).name for n in files if n.startswith("evalstop_gym/agents/hyperparams/")}
    assert {"ppo.yml", "a2c.yml", "dqn.yml", "maskable-ppo.yml", "maskable-ppo-preemptive.yml"} <= yml


def test_the_wheel_ships_the_trl_curve_library(wheel_files):
    files = set(wheel_files)
    assert {"evalstop_gym/data/__init__.py", "evalstop_gym/data/trl_library.csv.gz",
            "evalstop_gym/data/trl_library.json"} <= files
