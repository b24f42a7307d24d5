"""Measure docs/multiagent.md's weights table: every tenant's rule, the summed reward terms and returns.

    PYTHONPATH=. python3 docs/tenant_weights.py [--seeds 0-5] [--jobs 200] [--scheduler srtf-est]

Plays the tenants env (`evalstop_tenants_v0`, the default workload and four tenants, `jobs` jobs,
the env's default reward weights, no platform stopper) on each test seed with one rule in every
tenant, asked only when the tenant has a checkpoint to decide (as `rules.play` asks it), and sums each
step's `reward_terms` over tenants and the episode. The table's columns are means over the seeds of
those sums (`jct_h`: mean JCT, hours; `quality`: the delivered score as credited; `gpu_h`: GPU-hours
per job) and of the sum of the tenants' returns.

Below the table: the GPU-hours per job that stopping every job at its first checkpoint saves against
never stopping, and the `gpu_h` weight at which the two rules' returns are equal (the other weights the
env's defaults): a weight below it (more negative) makes stopping everything the better of the two.
"""

from __future__ import annotations

import argparse
import statistics

from evalstop_gym.checks import ConfigError
from evalstop_gym.commands.common import seed_range
from evalstop_gym.multiagent import tenants_v0
from evalstop_gym.multiagent.rules import EvalStopRule, never_stop
from evalstop_gym.multiagent.tenants import CONTINUE, DEFAULT_REWARD_WEIGHTS, STOP
from evalstop_gym.seeds import check_seeds


def stop_first(obs) -> int:
    """Stops every job at its first checkpoint: the tenant is asked only at a checkpoint, and always stops."""
    return STOP


RULES = (
    ("stop every job at its first checkpoint", stop_first),
    ("never stop", never_stop),
    ("EvalStop(k=4)", EvalStopRule(4)),
    ("EvalStop(k=2)", EvalStopRule(2)),
)


def episode(rule, scheduler: str, jobs: int, seed: int) -> tuple[dict[str, float], float]:
    """The reward terms of one episode summed over tenants and steps, and the sum of the tenants' returns."""
    env = tenants_v0.parallel_env(scheduler=scheduler, jobs=jobs)
    obs, infos = env.reset(seed=seed)
    terms, total = dict.fromkeys(DEFAULT_REWARD_WEIGHTS, 0.0), 0.0
    while env.agents:
        actions = {a: rule(obs[a]) if infos[a]["action_mask"][STOP] else CONTINUE for a in env.agents}
        obs, rewards, _, truncations, infos = env.step(actions)
        if any(truncations.values()):
            raise SystemExit(f"seed {seed}: the episode was truncated before every job ended")
        total += sum(rewards.values())
        for info in infos.values():
            for k, v in info["reward_terms"].items():
                terms[k] += v
    return terms, total


def report(scheduler: str, jobs: int, seeds: list[int]) -> None:
    """Print the weights table over ``seeds`` and the `gpu_h` weight at which stopping everything ties never
    stopping."""
    means = {}
    for name, rule in RULES:
        runs = [episode(rule, scheduler, jobs, s) for s in seeds]
        means[name] = {k: statistics.mean(t[k] for t, _ in runs) for k in DEFAULT_REWARD_WEIGHTS}
        means[name]["return"] = statistics.mean(r for _, r in runs)
    print("| every tenant's rule | `jct_h` | `quality` | `gpu_h` | sum of tenant returns |")
    print("|---|---|---|---|---|")
    for name, m in means.items():
        print(f"| {name} | {m['jct_h']:.2f} | {m['quality']:.3f} | {m['gpu_h']:.1f} | {m['return']:.1f} |")
    stop, never = means[RULES[0][0]], means[RULES[1][0]]

    def without_gpu_h(m):
        return sum(w * m[k] for k, w in DEFAULT_REWARD_WEIGHTS.items() if k != "gpu_h")

    saved = never["gpu_h"] - stop["gpu_h"]
    tie = -(without_gpu_h(never) - without_gpu_h(stop)) / saved
    print(f"\nstopping every job at its first checkpoint saves {saved:.1f} GPU-hours per job against never "
          f"stopping; the returns are equal at a gpu_h weight of {tie:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="0-5", help="test seeds A-B (default 0-5)")
    ap.add_argument("--jobs", type=int, default=200, help="jobs per episode (default 200, the default workload's)")
    ap.add_argument("--scheduler", default="srtf-est", help="the platform's base scheduler (default srtf-est)")
    args = ap.parse_args()
    try:
        report(args.scheduler, args.jobs, check_seeds("test", seed_range(args.seeds)))
    except ConfigError as e:   # one line naming the bad value, not a traceback
        raise SystemExit(f"error: {e}") from None


if __name__ == "__main__":
    main()
