"""Measure the `queue_load` docs/mdp.md quotes: a world's waiting jobs per GPU, weighted by busy GPU-hours.

    PYTHONPATH=. python3 docs/queue_load.py [--calibration realistic] [--seeds 900000-900002]

Plays full episodes of EvalStop-StopControl-v0 (the default 200-job workload, SRTF-Est base, `queue_load`
unset so the `queue_h` term charges each episode's own queue) with EvalStop k=2 deciding every stop, on
validation seeds only (the load is a recipe's setting; any other seed is refused), and divides the
episode's `queue_h` (hours of waiting per held GPU-hour, summed over the steps' `reward_terms`, which
divide every term by the episode's jobs) by its busy GPU-hours (the `gpu_hours` metric). Prints each
seed's load and the load pooled over the seeds (summed `queue_h` over summed GPU-hours), the value a
one-job episode's `queue_load` stands in for.
"""

from __future__ import annotations

import argparse

import gymnasium as gym

from evalstop_gym.baselines import make_policy  # importing the package registers the envs
from evalstop_gym.checks import ConfigError
from evalstop_gym.commands.common import seed_range
from evalstop_gym.seeds import check_seeds


def episode_load(calibration: str, seed: int) -> tuple[float, float]:
    """(queue_h summed over the episode, busy GPU-hours) of one seed's full episode."""
    env = gym.make("EvalStop-StopControl-v0", calibration=calibration, scheduler="srtf-est")
    stopper = make_policy("srtf-est", "evalstop", k=2)
    stopper.reset()
    env.reset(seed=seed)
    unwrapped, queue_h, done = env.unwrapped, 0.0, False
    while not done:
        action = int(stopper.should_stop(unwrapped.decision_job, unwrapped.cluster))
        _, _, terminated, truncated, info = env.step(action)
        queue_h += info["reward_terms"]["queue_h"]
        done = terminated or truncated
    if truncated:
        raise SystemExit(f"seed {seed}: the episode was truncated before every job ended")
    metrics = info["metrics"]
    return queue_h * metrics["jobs"], metrics["gpu_hours"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calibration", default="realistic", help="a world's name or file (default realistic)")
    ap.add_argument("--seeds", default="900000-900002", help="validation seeds A-B (default 900000-900002)")
    args = ap.parse_args()
    try:
        report(args.calibration, check_seeds("validation", seed_range(args.seeds)))
    except ConfigError as e:   # one line naming the bad value, not a traceback
        raise SystemExit(f"error: {e}") from None


def report(calibration: str, seeds: list[int]) -> None:
    """Print each seed's load and the pooled load of ``calibration`` over ``seeds``."""
    total_q = total_b = 0.0
    for seed in seeds:
        q, b = episode_load(calibration, seed)
        print(f"seed {seed}: queue_h {q:.2f} h over {b:.1f} busy GPU-hours, load {q / b:.4f}")
        total_q, total_b = total_q + q, total_b + b
    print(f"{calibration}: queue_load {total_q / total_b:.4f} waiting jobs per GPU (pooled)")


if __name__ == "__main__":
    main()
