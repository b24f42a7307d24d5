"""The realistic world's stop-policy trained on simulation-only supervision (`ppo-realistic-detect.yml`:
the hidden-truth reward terms `detect` and `true_waste_gpu_h`, docs/mdp.md), judged by the targets protocol
(docs/evaluation.md) on held-out test seeds 0-9.

    python -m pytest -m slow tests/test_agents_recipe_detect.py

Asserts the recipe fits its budget, the kept run wastes no more than the best detector on validation seeds
(the run selection's rule), its test F1 is well above EvalStop k=2's, and target (b) itself: test F1 higher
than the best detector's, significant (the bench's paired t-test; one claim, so Holm leaves its p as it is),
at no more waste.

Time: three training runs of about 5 CPU minutes each (in the trainer's process since 2026-12-03; about 8
with two SubprocVecEnv workers, counting them), and 2-4 minutes of selection and evaluation, on an idle 2-core machine (the label-first worlds' measurement, when both
kept runs of two seed groups, and five of six single runs, met (b) with F1 0.944-0.969 against divergence's
0.931; docs/learned.md). Re-run on today's worlds on 2026-12-02 (27.1 wall minutes, with CI and another test
sharing the 2 cores, load 3-5): 1477 CPU s, over the 1200 s budget (the budget test failed; not re-measured
idle); all three runs wasted more than divergence on validation seeds (2628-2714 against 2105 GPU-h; the
selection kept seed 0); on test seeds F1 0.858 against srtf-est + divergence's 0.762, +0.096 [+0.055, +0.137]
(p < 0.001), and EvalStop k=2's 0.696, at 31.3% more waste (2749 against 2095 GPU-h): (b) missed on waste.
Re-run 2026-12-02 with the detector tuned with the bench's budget (srtf-est + smoothed threshold=0.05 window=7,
F1 0.873 at 3049 GPU-h on validation seeds; 27.7 min wall beside the other slow file): the kept run is within
its validation waste and (b) is met (Holm-significant F1 at no more waste); 1479.7 CPU s, over the budget.
Re-run 2026-12-03 twice, beside the leaderboard run and then alone on an idle machine (22.3 min wall): the
same verdicts both times, (b) met with F1 +0.034 against the tuned detector's (p 0.020), waste 2823 against
3178 GPU-h; 1417.6 and 1390.4 CPU s (runs of about 7 wall minutes each, where the label-first worlds' took
5.1-5.5): over the 1200 s budget even idle, so the budget test is a strict xfail (4 passed, 1 xfailed).
Re-run later on 2026-12-03 after one-job resets were made faster with the same values: the test-seed figures
recorded before (F1 0.862 against 0.828, waste 2823 against 3178 GPU-h; run seed 1 kept), in 23.7 wall minutes and 1470.5 CPU s
(CPU seconds move by about 6% between runs here): still over the budget (4 passed, 1 xfailed). Then the recipe's
two training envs were moved into the trainer's process (vec_env: in-process; SB3 steps the same envs with the same
actions): every run's validation figures, the kept run and the test-seed figures above again, in 943.1 CPU s and
16.5 wall minutes (runs of 295-315 CPU s): within the budget (5 passed).
Torch differs across CPUs in the last bits, so another machine trains other runs.
"""

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from evalstop_gym import WorkloadConfig  # noqa: E402
from evalstop_gym.agents.targets import targets  # noqa: E402
from evalstop_gym.agents.train import train  # noqa: E402
from evalstop_gym.api import run_policy  # noqa: E402
from evalstop_gym.baselines import make_policy  # noqa: E402
from evalstop_gym.workload import generate  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]   # trains a recipe: past the 300 s default

RECIPE = Path(__file__).resolve().parents[1] / "evalstop_gym" / "agents" / "hyperparams" / "ppo-realistic-detect.yml"
REALISTIC = WorkloadConfig(calibration="realistic")
TEST_SEEDS = range(10)
BUDGET_S = 20 * 60      # CPU seconds of the whole recipe: its three runs and the selection
F1_MARGIN = 0.05        # above EvalStop k=2's F1 (0.696 on these seeds today, 0.823 in the label-first worlds)


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    out = tmp_path_factory.mktemp("stop-detect")
    config = train("EvalStop-StopControl-v0", "ppo", out=out, seed=0, echo=lambda _: None, hyperparams=str(RECIPE))
    report = targets(REALISTIC, stop_model=str(out), seeds=len(TEST_SEEDS), out=tmp_path_factory.mktemp("targets"))
    return config, report.main


def test_recipe_fits_the_cpu_budget(judged):
    config, _ = judged
    assert config["cpu_seconds"] < BUDGET_S


def test_the_kept_run_is_within_the_detectors_validation_waste(judged):
    # passed 2026-12-02 against the tuned detector (srtf-est + smoothed, 3049 GPU-h on validation seeds)
    config, _ = judged
    sel = config["run_selection"]
    assert [r["seed"] for r in sel["runs"]] == [0, 1, 2]
    kept = [r for r in sel["runs"] if r["kept"]]
    assert len(kept) == 1 and kept[0]["seed"] == config["seed"]
    assert kept[0]["compute_waste_gpu_h"] <= sel["detector"]["compute_waste_gpu_h"]


def test_f1_well_above_evalstops(judged):
    _, j = judged
    evalstop = np.mean([run_policy(generate(REALISTIC.replace(seed=s)), make_policy("srtf-est", "evalstop"))["f1"]
                        for s in TEST_SEEDS])
    assert j.learned_f1 >= evalstop + F1_MARGIN, (j.learned_f1, evalstop)


MISSED_AT_100 = pytest.mark.xfail(strict=True, reason=(
    "re-run 2026-12-05 with the detector tuned with 100 trials a family (the bench's budget since then): test F1 "
    "0.863 against its 0.860, +0.003 [-0.021, +0.027], p 0.80, at no more waste: a tie, so target (b) is missed"))


@MISSED_AT_100
def test_f1_above_the_best_detectors(judged):
    # measured 2026-12-02: 0.858 against 0.762, +0.096 [+0.055, +0.137], p < 0.001 (detector tuned with 12 trials)
    _, j = judged
    assert j.learned_f1 > j.detector_f1 and j.f1["p_holm"] < 0.05, (j.learned_f1, j.detector_f1, j.f1)


@MISSED_AT_100
def test_target_b_f1_above_the_best_detectors_at_no_more_waste(judged):
    # met 2026-12-02 against the detector tuned with the bench's budget (srtf-est + smoothed threshold=0.05 window=7)
    _, j = judged
    assert j.learned_waste <= j.detector_waste, (j.learned_waste, j.detector_waste)
    assert j.b.met
