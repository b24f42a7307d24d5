"""The realistic world's recipes against every hand-coded scheduler x stopper pair on held-out seeds 0-9
(slow: about 8 CPU minutes of training and 2 of evaluation; 7.3 minutes wall on the shared 2-core machine).

    python -m pytest -m slow tests/test_agents_recipe_realistic.py

Each target is the issue's, asserted as measured; docs/learned.md gives the figures.
"""

from pathlib import Path

import pytest

pytest.importorskip("sb3_contrib")

from evalstop_gym import WorkloadConfig  # noqa: E402
from evalstop_gym.agents.evaluate import evaluate  # noqa: E402
from evalstop_gym.agents.train import train  # noqa: E402
from evalstop_gym.baselines import SCHEDULERS, STOPPERS  # noqa: E402

pytestmark = pytest.mark.slow

HYPERPARAMS = Path(__file__).resolve().parents[1] / "evalstop_gym" / "agents" / "hyperparams"
REALISTIC = WorkloadConfig(calibration="realistic")
DETECTORS = [s for s in STOPPERS if s != "none"]
BUDGET_S = 20 * 60   # CPU seconds per recipe


@pytest.fixture(scope="module")
def stop_policy(tmp_path_factory):
    out = tmp_path_factory.mktemp("stop")
    config = train("EvalStop-StopControl-v0", "ppo", out=out, seed=0, echo=lambda _: None,
                   hyperparams=str(HYPERPARAMS / "ppo-realistic.yml"))
    return out, config


@pytest.mark.xfail(strict=True, reason="target missed: F1 0.701 at 689 GPU-h of waste against divergence's 0.931 "
                                       "at 2716 (seed 0, docs/learned.md)")
def test_stop_policy_f1_at_least_the_best_detectors_at_no_more_waste(stop_policy):
    out, config = stop_policy
    assert config["cpu_seconds"] < BUDGET_S
    rows = evaluate([str(out), *DETECTORS], seeds=10, base=REALISTIC).rows
    learned, hand = rows[0], rows[1:]
    best = max(hand, key=lambda r: r["f1"])
    assert learned["f1"] >= best["f1"], (learned["f1"], best["arm"], best["f1"])
    assert learned["compute_waste_gpu_h"] <= best["compute_waste_gpu_h"]


def test_scheduler_and_stop_policy_jct_3_percent_below_every_hand_coded_pair(stop_policy, tmp_path):
    stop_out, _ = stop_policy
    entry = {"env_wrapper": [{"evalstop_gym.agents.wrappers.HandCodedStops": {
        "stop_model": str(stop_out), "work_conserving": True, "preempt": False}}]}
    config = train("EvalStop-Cluster-v0", "maskable-ppo", out=tmp_path, seed=0, echo=lambda _: None,
                   hyperparams=str(HYPERPARAMS / "maskable-ppo-realistic.yml"), overrides=entry)
    assert config["cpu_seconds"] < BUDGET_S
    pairs = [s if t == "none" else f"{s}+{t}" for s in SCHEDULERS for t in STOPPERS]
    rows = evaluate([str(tmp_path), *pairs], seeds=10, base=REALISTIC).rows
    learned, hand = rows[0], rows[1:]
    best = min(hand, key=lambda r: r["avg_jct_h"])
    srtf = next(r for r in hand if r["arm"] == "srtf-est")
    assert learned["avg_jct_h"] <= 0.97 * best["avg_jct_h"], (learned["avg_jct_h"], best["arm"], best["avg_jct_h"])
    assert learned["preemptions"] <= srtf["preemptions"]
