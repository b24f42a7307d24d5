"""The realistic world's recipes judged by the targets protocol (docs/evaluation.md): the best hand-coded
scheduler x stopper pair and detector chosen on validation seeds, the learned pairs on held-out seeds 0-9.

    python -m pytest -m slow tests/test_agents_recipe_realistic.py

Two recipe pairs: the JCT-leaning one (ppo-realistic.yml + maskable-ppo-realistic.yml) and the
quality-leaning one (ppo-realistic-quality.yml + maskable-ppo-realistic-quality.yml). Each target is asserted
through the protocol's own verdict (the bench's paired comparisons, Holm-corrected); a target missed when last
measured is a strict xfail, so a recipe that meets it turns the test red until the docs say so.

Time: 29.6 wall minutes on 2 cores shared with a leaderboard run (load average 3-4; 2026-12-02): training
274 + 477 CPU s (JCT-leaning stop-policy, scheduler) and 259 + 500 (quality-leaning), the rest selection and
evaluation. Measured then, on today's realistic world (test seeds 0-9; the hand-coded pair and detector
chosen on validation seeds, each stopper at its shipped defaults: srtf-progress + stopat, 5.80 h, regret
0.0366; srtf-est + divergence, F1 0.762): the JCT-leaning pair meets (a), 5.25 h, -9.4% [-12.6, -6.2], no
preemptions, regret 0.0242, and misses (b), F1 0.599; the quality-leaning pair misses (a), 9.24 h, +57.9%
[+39.7, +76.1], at regret 0.0121, and (b), F1 0.768, +0.006 [-0.024, +0.035], p 0.67 (a tie), wasting 20.7%
more. Those comparators were each stopper at its shipped defaults. Re-run 2026-12-02 (27.3 min wall, both
slow files at once) with the selection tuned with the bench's budget (pair: srtf-est + divergence tuned,
6.63 h on the test seeds, regret 0.0181): the JCT-leaning pair misses (a) on quality (5.25 h, regret
0.0242 against 0.0181); the other assertions held as written (4 passed, 2 xfailed). Re-run 2026-12-03
(24.6 min wall, beside the leaderboard run; 4 passed, 3 xfailed): against the tuned selection the JCT-leaning
pair misses (a) on quality and (b), and the quality-leaning pair misses (a) and still delivers significantly
lower regret than the tuned pair; the tuned comparators' test-seed figures were not printed by that run.
"""

from pathlib import Path

import pytest

pytest.importorskip("sb3_contrib")

from evalstop_gym import WorkloadConfig  # noqa: E402
from evalstop_gym.agents.targets import targets  # noqa: E402
from evalstop_gym.agents.verdicts import ALPHA, TARGET_JCT_GAIN_PCT  # noqa: E402
from evalstop_gym.agents.train import train  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]   # trains recipes: past the 300 s default

HYPERPARAMS = Path(__file__).resolve().parents[1] / "evalstop_gym" / "agents" / "hyperparams"
REALISTIC = WorkloadConfig(calibration="realistic")
BUDGET_S = 20 * 60   # CPU seconds per recipe


@pytest.fixture(scope="module")
def targets_out(tmp_path_factory):
    """One folder for both pairs' judging: the selection and the hand-coded runs are played once."""
    return tmp_path_factory.mktemp("targets")


def train_and_judge(stop_recipe: str, scheduler_recipe: str, tmp_path_factory, out):
    """Train a stop-policy recipe, then the scheduler recipe over it (its ``stop_model`` path pointed at the
    fresh stop-policy), and judge the pair by the project's protocol (``evalstop-gym targets``): the best
    hand-coded pair and detector chosen on validation seeds, the models on held-out test seeds 0-9."""
    stop_out = tmp_path_factory.mktemp("stop")
    stop_config = train("EvalStop-StopControl-v0", "ppo", out=stop_out, seed=0, echo=lambda _: None,
                        hyperparams=str(HYPERPARAMS / stop_recipe))
    sched_out = tmp_path_factory.mktemp("scheduler")
    entry = {"env_wrapper": [{"evalstop_gym.agents.wrappers.HandCodedStops": {
        "stop_model": str(stop_out), "work_conserving": True, "preempt": False}}]}
    sched_config = train("EvalStop-Cluster-v0", "maskable-ppo", out=sched_out, seed=0, echo=lambda _: None,
                         hyperparams=str(HYPERPARAMS / scheduler_recipe), overrides=entry)
    report = targets(REALISTIC, scheduler_model=str(sched_out), stop_model=str(stop_out), seeds=10, out=out)
    return stop_config, sched_config, report.main


@pytest.fixture(scope="module")
def judged(tmp_path_factory, targets_out):
    return train_and_judge("ppo-realistic.yml", "maskable-ppo-realistic.yml", tmp_path_factory, targets_out)


@pytest.fixture(scope="module")
def judged_quality(tmp_path_factory, targets_out):
    return train_and_judge("ppo-realistic-quality.yml", "maskable-ppo-realistic-quality.yml", tmp_path_factory,
                           targets_out)


def test_recipes_fit_the_cpu_budget(judged):
    stop_config, sched_config, _ = judged
    assert stop_config["cpu_seconds"] < BUDGET_S and sched_config["cpu_seconds"] < BUDGET_S


@pytest.mark.xfail(strict=True, reason="target missed against the detector tuned with the bench's budget "
                                       "(2026-12-03; module docstring)")
def test_target_b_stop_policy_f1_at_least_the_best_detectors_at_no_more_waste(judged):
    _, _, j = judged
    assert j.b is not None and j.b.met, j.b


@pytest.mark.xfail(strict=True, reason="target missed (measured 2026-12-02 against the pair tuned with the bench's "
                                       "budget, 6.63 h on test seeds): 5.25 h, but regret 0.0242 against the pair's 0.0181")
def test_target_a_jct_3_percent_below_the_best_pair_at_no_worse_quality(judged):
    _, _, j = judged
    assert j.a is not None and j.a.met, j.a


def test_the_learned_pair_is_faster_without_preempting(judged):
    # what holds of target (a) as measured: the JCT part and the preemption cap (not the quality condition)
    _, _, j = judged
    assert -j.jct["change"] >= TARGET_JCT_GAIN_PCT and j.learned_preemptions <= j.reference_preemptions, j.a


def test_quality_recipes_fit_the_cpu_budget(judged_quality):
    stop_config, sched_config, _ = judged_quality
    assert stop_config["cpu_seconds"] < BUDGET_S and sched_config["cpu_seconds"] < BUDGET_S


@pytest.mark.xfail(strict=True, reason="target missed against the pair tuned with the bench's budget "
                                       "(2026-12-03; module docstring)")
def test_quality_pair_target_a(judged_quality):
    _, _, j = judged_quality
    assert j.a is not None and j.a.met, j.a


def test_the_quality_pair_delivers_better_quality_without_preempting(judged_quality):
    # what it buys with its JCT: lower regret than the pair's, significant (held 2026-12-02 and -03), no preemptions
    _, _, j = judged_quality
    assert j.learned_preemptions <= j.reference_preemptions, j.a
    assert j.learned_regret < j.pair_regret and j.regret["ci"][1] < 0, j.a
