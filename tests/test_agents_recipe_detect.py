"""The realistic world's stop-policy trained on simulation-only supervision (`ppo-realistic-detect.yml`:
the hidden-truth reward terms `detect` and `true_waste_gpu_h`, docs/mdp.md), judged by the targets protocol
(docs/evaluation.md) on held-out test seeds 0-9 (slow: three training runs of about 5.5 CPU minutes each,
counting the vectorized env's workers, the run kept on validation seeds, and 2-4 minutes of evaluation).

    python -m pytest -m slow tests/test_agents_recipe_detect.py

Asserts the recipe fits its budget, the kept run wastes no more than the best detector on validation seeds
(the run selection's rule), its test F1 is well above EvalStop k=2's, and target (b) itself: test F1 at least
the best detector's at no more waste. Torch differs across CPUs in the last bits, so another machine trains
other runs; on this one both kept runs of two seed groups, and five of six single runs, met (b) with F1
0.944-0.969 against 0.931 (docs/learned.md).
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
F1_MARGIN = 0.05        # above EvalStop k=2's F1 (0.823 on these seeds; the recipe's run: docs/learned.md)


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


def test_target_b_f1_at_least_the_best_detectors_at_no_more_waste(judged):
    _, j = judged
    assert j.learned_f1 >= j.detector_f1, (j.learned_f1, j.detector_f1)
    assert j.learned_waste <= j.detector_waste, (j.learned_waste, j.detector_waste)
    assert j.b.met
