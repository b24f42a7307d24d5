"""The paper world's shipped recipes meet their targets on held-out seeds, with the env's fresh-eval credit
and preemption charge (slow: 2.5 CPU minutes, 5 minutes wall on two shared cores).

    python -m pytest -m slow tests/test_agents_recipe.py
"""

import pytest

pytest.importorskip("sb3_contrib")

from evalstop_gym.agents.evaluate import evaluate  # noqa: E402
from evalstop_gym.agents.train import train  # noqa: E402
from evalstop_gym import WorkloadConfig  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]   # trains recipes: past the 300 s default


def test_ppo_stop_policy_f1_at_sigma_005_is_at_least_evalstops(tmp_path):
    config = train("EvalStop-StopControl-v0", "ppo", out=tmp_path, seed=0, echo=lambda _: None)
    rows = evaluate([str(tmp_path), "evalstop"], seeds=10, base=WorkloadConfig(noise=0.05)).rows
    learned, evalstop = rows
    assert learned["f1"] >= evalstop["f1"], (learned["f1"], evalstop["f1"])
    assert config["cpu_seconds"] < 600


def test_maskable_ppo_scheduler_jct_within_5_percent_of_srtf_est_with_evalstop(tmp_path):
    config = train("EvalStop-Cluster-v0", "maskable-ppo", out=tmp_path, seed=0, echo=lambda _: None)
    rows = evaluate([str(tmp_path), "srtf-est+evalstop"], seeds=10, base=WorkloadConfig()).rows
    learned, srtf = rows
    assert learned["avg_jct_h"] <= 1.05 * srtf["avg_jct_h"], (learned["avg_jct_h"], srtf["avg_jct_h"])
    assert config["cpu_seconds"] < 600
