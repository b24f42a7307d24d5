"""Measure docs/mdp.md's reward-weight table: stop rules over FIFO, their mean JCT, credited score and return.

    PYTHONPATH=. python3 docs/reward_weights.py [--seeds 0-5] [--jobs 200] [--scheduler fifo] [--weights 100,50]

Plays every rule of the table through `PolicyAgent` on EvalStop-StopControl-v0 (the default workload,
`jobs` jobs, the env's default reward weights) on each test seed, as tests/test_envs_reward.py plays
them, and sums each episode's `reward_terms`. The table's columns are means over the seeds: the
`jct_h` term (mean JCT, hours, exactly), the `quality` term (the delivered score as credited: a fresh
eval of a stopped job's checkpoint, a completed job's final score) and the episode's return re-weighted
with each `--weights` value in place of the `quality` weight (the other weights the env's defaults;
the first value is the env's own weight, so that column is the return the env paid).

A second table says how faithful the public terms are to the hidden metrics they stand for, per rule:
the `quality` term against `delivered_quality` and the `waste_gpu_h` term against `compute_waste_gpu_h`
per job, as the relative gap of the means over the seeds and the largest relative gap of one episode.
"""

from __future__ import annotations

import argparse
import statistics

import gymnasium as gym

from evalstop_gym.baselines import make_policy  # importing the package registers the envs
from evalstop_gym.checks import ConfigError
from evalstop_gym.commands.common import seed_range
from evalstop_gym.envs.adapter import STOP_CONTROL_ID, PolicyAgent
from evalstop_gym.envs.base import DEFAULT_REWARD_WEIGHTS
from evalstop_gym.policy import Stopper
from evalstop_gym.seeds import check_seeds


class StopEverything(Stopper):
    """Stops every job at its first eval checkpoint (the rule the quality weight must make lose)."""

    rule_name = "stop-everything"

    def rule(self, job, cluster):
        return True


# (the table's row name, the policy over the base scheduler); every parameter the package's default
RULES = (
    ("stop every job at its first checkpoint", lambda base: StopEverything(make_policy(base))),
    ("never stop", lambda base: make_policy(base, "none")),
    ("StopAtProgress(0.65)", lambda base: make_policy(base, "stopat", p=0.65)),
    ("Keras-style patience", lambda base: make_policy(base, "patience")),
    ("EvalStop(k=2)", lambda base: make_policy(base, "evalstop", k=2)),
)


def episode(policy, scheduler: str, jobs: int, seed: int) -> tuple[dict[str, float], dict]:
    """The reward terms of one episode summed over its steps, and its hidden-truth metrics."""
    env = gym.make(STOP_CONTROL_ID, scheduler=scheduler, jobs=jobs)
    agent = PolicyAgent(policy, env)
    obs, _ = env.reset(seed=seed)
    agent.reset()
    terms = dict.fromkeys(DEFAULT_REWARD_WEIGHTS, 0.0)
    while True:
        obs, _, terminated, truncated, info = env.step(agent(obs))
        for k, v in info["reward_terms"].items():
            terms[k] += v
        if terminated:
            return terms, info["metrics"]
        if truncated:
            raise SystemExit(f"seed {seed}: the episode was truncated before every job ended")


def reweighted(terms: dict[str, float], quality_weight: float) -> float:
    """The episode's return under the env's default weights with ``quality_weight`` for the `quality` term."""
    weights = dict(DEFAULT_REWARD_WEIGHTS, quality=quality_weight)
    return sum(weights[k] * v for k, v in terms.items())


def gaps(public: list[float], hidden: list[float]) -> tuple[str, str]:
    """(relative gap of the means, largest relative gap of one episode), in percent of the hidden value;
    an episode whose hidden value is 0 counts only if its public value is not ("inf"), and "-" says every
    hidden value and every public one is 0 (nothing to compare: e.g. no waste when every job stops at once)."""
    def percent(p: float, h: float) -> float:
        return 0.0 if p == h else float("inf") if h == 0 else 100 * abs(p - h) / abs(h)

    if not any(public) and not any(hidden):
        return "-", "-"
    worst = max(percent(p, h) for p, h in zip(public, hidden))
    return f"{percent(statistics.mean(public), statistics.mean(hidden)):.2f}%", f"{worst:.2f}%"


def report(scheduler: str, jobs: int, seeds: list[int], weights: list[float]) -> None:
    """Print the reward-weight table and the public-against-hidden table of every rule over ``seeds``."""
    rows, faithful = [], []
    for name, make in RULES:
        runs = [episode(make(scheduler), scheduler, jobs, s) for s in seeds]
        terms = [t for t, _ in runs]
        returns = [statistics.mean(reweighted(t, w) for t in terms) for w in weights]
        rows.append(f"| {name} | {statistics.mean(t['jct_h'] for t in terms):.2f} | "
                    f"{statistics.mean(t['quality'] for t in terms):.3f} | "
                    + " | ".join(f"{r:.1f}" for r in returns) + " |")
        quality = gaps([t["quality"] for t in terms], [m["delivered_quality"] for _, m in runs])
        waste = gaps([t["waste_gpu_h"] for t in terms], [m["compute_waste_gpu_h"] / m["jobs"] for _, m in runs])
        faithful.append(f"| {name} | {' | '.join(quality)} | {' | '.join(waste)} |")
        print(f"({name}: done)", flush=True)
    print()
    print(f"| stop rule over {scheduler.upper()} | mean JCT (h) | delivered credited score | "
          + " | ".join(f"return, weight {w:g}" for w in weights) + " |")
    print("|---|---|---|" + "---|" * len(weights))
    print("\n".join(rows))
    print()
    print("| stop rule | `quality` vs `delivered_quality`, means | largest, one episode | "
          "`waste_gpu_h` vs `compute_waste_gpu_h` per job, means | largest, one episode |")
    print("|---|---:|---:|---:|---:|")
    print("\n".join(faithful))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="0-5", help="test seeds A-B (default 0-5)")
    ap.add_argument("--jobs", type=int, default=200, help="jobs per episode (default 200, the default workload's)")
    ap.add_argument("--scheduler", default="fifo", help="the env's base scheduler (default fifo)")
    ap.add_argument("--weights", default="100,50", help="quality weights of the return columns (default 100,50)")
    args = ap.parse_args()
    try:
        weights = [float(w) for w in args.weights.split(",")]
    except ValueError:
        raise SystemExit(f"error: --weights={args.weights!r} must be numbers, comma-separated") from None
    try:
        report(args.scheduler, args.jobs, check_seeds("test", seed_range(args.seeds)), weights)
    except ConfigError as e:   # one line naming the bad value, not a traceback
        raise SystemExit(f"error: {e}") from None


if __name__ == "__main__":
    main()
