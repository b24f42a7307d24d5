"""RL Zoo users train and enjoy with rl_zoo3's own scripts on the project's hyperparameter files,
unchanged (a tiny budget: the command line only shrinks the run). Needs the zoo extra."""

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("rl_zoo3")

ROOT = Path(__file__).resolve().parents[1]
ENV = "EvalStop-StopControl-v0"
TINY = {"ppo": ["n_steps:64", "batch_size:64", "n_epochs:1"], "a2c": [],
        "dqn": ["learning_starts:64", "buffer_size:1000"]}


def zoo(script, *args):
    return subprocess.run([sys.executable, "-m", f"rl_zoo3.{script}", "--env", ENV, "--gym-packages", "evalstop_gym",
                           "--num-threads", "1", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("algo", ["ppo", "a2c", "dqn"])   # about 17 s each
def test_rl_zoo_trains_and_enjoys_from_the_yaml(tmp_path, algo):
    conf = ROOT / "evalstop_gym" / "agents" / "hyperparams" / f"{algo}.yml"
    args = ["--algo", algo, "--conf-file", str(conf), "-n", "256", "-f", str(tmp_path), "--seed", "0"]
    if TINY[algo]:
        args += ["--hyperparams", *TINY[algo]]
    r = zoo("train", *args)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    run = tmp_path / algo / f"{ENV}_1"
    assert (run / f"{ENV}.zip").is_file()
    saved = (run / ENV / "config.yml").read_text()
    assert "evalstop_gym.agents.wrappers.JobFeatures" in saved and "train_workload" not in saved
    r = zoo("enjoy", "--algo", algo, "-f", str(tmp_path), "--exp-id", "1", "-n", "30", "--no-render")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "Mean reward" in r.stdout
