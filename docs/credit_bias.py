"""Measure docs/mdp.md's "Why a fresh eval": how far a stopped job's best observed score sits above its true one.

    PYTHONPATH=. python3 docs/credit_bias.py [--seeds 0-5] [--jobs 100] [--noise 0.05] [--calibration paper]

Plays SRTF-Est + EvalStop(k=2) over the workload of each test seed (`jobs` jobs, eval noise sigma
`noise`) on the simulator, which stops the same jobs at the same checkpoints as the envs do (tested
for every scheduler x stopper), and for every stopped job compares two scores of the checkpoint it
delivers (its best observed one) with that checkpoint's hidden true score: the best observed score
(the maximum of noisy draws, selected upwards) and the fresh eval the envs credit it
(`evalstop_gym.envs.base.FreshEvalCredit`, the same object the envs call, seeded by the episode).
Prints the number of stops, each error's mean over them, the fresh error's standard error and its
standard deviation (the world's eval noise at the delivered checkpoints).
"""

from __future__ import annotations

import argparse
import math
import statistics

from evalstop_gym import WorkloadConfig
from evalstop_gym.baselines import make_policy
from evalstop_gym.checks import ConfigError
from evalstop_gym.commands.common import seed_range
from evalstop_gym.envs.base import FreshEvalCredit
from evalstop_gym.policy import drive
from evalstop_gym.seeds import check_seeds
from evalstop_gym.simulator import Simulator
from evalstop_gym.workload import generate


def stop_errors(config: WorkloadConfig) -> tuple[list[float], list[float]]:
    """(best observed - true, fresh credit - true) of every job EvalStop(k=2) stops in ``config``'s episode."""
    workload = generate(config)
    outcome = drive(Simulator(workload), make_policy("srtf-est", "evalstop", k=2))
    credit = FreshEvalCredit(workload, config.seed)
    best, fresh = [], []
    for j in outcome.stopped.nonzero()[0]:
        d = int(outcome.delivered_ckpt[j])
        true = workload.curves.gold.item(j, d)
        best.append(workload.observed.item(j, d) - true)
        fresh.append(credit(int(j), d) - true)
    return best, fresh


def report(seeds: list[int], jobs: int, noise: float, calibration: str) -> None:
    """Print the two errors over every stop on ``seeds``."""
    best, fresh = [], []
    for seed in seeds:
        b, f = stop_errors(WorkloadConfig(jobs=jobs, noise=noise, calibration=calibration, seed=seed))
        best += b
        fresh += f
    if not best:
        raise SystemExit("no job was stopped: nothing to compare")
    sd = statistics.pstdev(fresh)
    print(f"{len(best)} stops of SRTF-Est + EvalStop(k=2), {jobs}-job episodes, noise {noise:g}, {calibration} "
          f"world, seeds {seeds[0]}-{seeds[-1]}:")
    print(f"best observed score - true score: mean {statistics.mean(best):+.4f}")
    print(f"fresh eval (the credit) - true score: mean {statistics.mean(fresh):+.4f} "
          f"(standard error {sd / math.sqrt(len(fresh)):.4f}), standard deviation {sd:.4f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="0-5", help="test seeds A-B (default 0-5)")
    ap.add_argument("--jobs", type=int, default=100, help="jobs per episode (default 100)")
    ap.add_argument("--noise", type=float, default=0.05, help="eval noise sigma, score units (default 0.05)")
    ap.add_argument("--calibration", default="paper", help="a world's name or file (default paper, the default)")
    args = ap.parse_args()
    try:
        report(check_seeds("test", seed_range(args.seeds)), args.jobs, args.noise, args.calibration)
    except ConfigError as e:   # one line naming the bad value, not a traceback
        raise SystemExit(f"error: {e}") from None


if __name__ == "__main__":
    main()
