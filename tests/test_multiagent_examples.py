"""The multi-agent examples run end to end on tiny settings (they are documentation that must not rot)."""

import runpy
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load(name):
    return runpy.run_path(str(EXAMPLES / name), run_name="example")


def test_selfish_tenants_study_writes_table_csv_and_plot(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    assert load("selfish_tenants.py")["main"](["--seeds", "2", "--jobs", "16", "--out", str(tmp_path)]) == 0
    table = capsys.readouterr().out
    assert "| all cooperative" in table and "platform EvalStop" in table
    for ext in ("md", "csv", "png"):
        assert (tmp_path / f"selfish_tenants.{ext}").stat().st_size > 0
    # enforcing EvalStop makes any mix of selfish tenants identical to the all-cooperative population
    rows = {line.split("|")[1].strip(): line for line in table.splitlines() if line.startswith("|")}
    cells = lambda name: rows[name].split("|")[2]  # noqa: E731  (JCT of all jobs)
    assert cells("4 selfish (never) + platform EvalStop") == cells("all cooperative")


def test_train_tenants_smoke(capsys):
    pytest.importorskip("supersuit")
    pytest.importorskip("stable_baselines3")
    example = load("train_tenants.py")
    venv = example["make_vec_env"]({"jobs": 10}, copies=2, seed=0)
    assert venv.num_envs == 8  # 4 tenants x 2 env copies, one shared policy
    venv.close()
    assert example["main"](["--timesteps", "256", "--jobs", "10", "--eval-seeds", "1"]) == 0
    assert "PPO, shared parameters" in capsys.readouterr().out
