"""Stop-policies against the best hand-coded pair on validation seeds: how a stop-policy's reward weights are
chosen without looking at the held-out test seeds (docs/learned.md describes the recipes; this script names the pair it compares against).

    PYTHONPATH=. python3 docs/stop_policy_validation.py MODEL_DIR [MODEL_DIR ...]

Plays the realistic world's default workload (200 jobs, 64 GPUs, rlhf-heavy) on validation seeds
900000-900009, the seeds `evalstop-gym targets` chooses its hand-coded pair on (`evaluate` refuses them):
the pair `srtf-progress + evalstop`, and each stop-policy over `sjf-est` (non-preemptive, the hand-coded
stand-in for a learned scheduler). Prints, per stop-policy, the average JCT and its mean per-seed change
against the pair, and the delivered-quality regret with its mean per-seed difference from the pair's, the
number of seeds where it is lower and the paired t-test p (`evalstop_gym.experiments.stats`).
"""

from __future__ import annotations

import sys

from evalstop_gym import WorkloadConfig
from evalstop_gym.agents.evaluate import learned_on
from evalstop_gym.agents.seeds import VALIDATION_FIRST
from evalstop_gym.api import run_policy
from evalstop_gym.baselines import make_policy
from evalstop_gym.experiments.stats import paired_difference, paired_gain
from evalstop_gym.workload import generate

SEEDS = range(VALIDATION_FIRST, VALIDATION_FIRST + 10)
PAIR = ("srtf-progress", "evalstop")   # the pair `targets` chooses on these seeds (docs/evaluation.md)
SCHEDULER = "sjf-est"


def main(models: list[str]) -> None:
    workloads = [generate(WorkloadConfig(calibration="realistic", seed=s)) for s in SEEDS]
    pair = [run_policy(w, make_policy(*PAIR)) for w in workloads]
    print(f"validation seeds {SEEDS[0]}-{SEEDS[-1]}; {' + '.join(PAIR)}: avg JCT {mean(pair, 'avg_jct_h'):.3f} h, "
          f"quality regret {mean(pair, 'delivered_quality_regret'):.4f}")
    for model in models:
        runs = [learned_on(SCHEDULER, {"model": model}, w) for w in workloads]
        jct = paired_gain([m["avg_jct_h"] for m in pair], [m["avg_jct_h"] for m in runs])
        reg = paired_difference([m["delivered_quality_regret"] for m in pair],
                                [m["delivered_quality_regret"] for m in runs])
        lower = sum(m["delivered_quality_regret"] < p["delivered_quality_regret"] for m, p in zip(runs, pair))
        print(f"{model} over {SCHEDULER}: avg JCT {mean(runs, 'avg_jct_h'):.3f} h ({-jct.gain_pct:+.1f}% per seed), "
              f"quality regret {mean(runs, 'delivered_quality_regret'):.4f} ({reg.diff:+.4f}, lower on "
              f"{lower}/{len(runs)} seeds, p {reg.p_t:.2g})")


def mean(runs, key: str) -> float:
    return sum(m[key] for m in runs) / len(runs)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
