"""Measure the episode lengths and window sizes docs/mdp.md quotes (termination, the window, rendering).

    PYTHONPATH=. python3 docs/episode_lengths.py [--seeds 0-0] [--jobs 200] [--slots 32] [--agent-seed 0]

Plays default-workload episodes (`jobs` jobs, the env's defaults otherwise) on each test seed and prints:

* EvalStop-Cluster-v0 under three agents: SRTF-Est + EvalStop(k=2) through `PolicyAgent` (a hand-coded
  scheduler), a uniformly random agent drawing among the valid actions (`action_space.sample(mask)`)
  and one drawing among all actions (its masked-out draws are the penalized no-ops); for each, steps
  (and per job), simulated instants (distinct `time_h` of the steps), invalid actions and the mean
  number of jobs the window shows (its `present` slots) per step. The random agents' draws come from
  `action_space.seed(agent seed + workload seed)`.
* EvalStop-StopControl-v0 under SRTF-Est + EvalStop(k=2): steps (one per eval checkpoint).
* Every registered scheduler x stopper through `PolicyAgent` on Cluster-v0: the most jobs active at once
  (running + waiting, at any step, over the seeds), played with a window as large as the episode so
  that every policy plays to the end (`PolicyAgent` refuses a plan that names a job outside the window,
  and the window's size changes nothing else), and which policies a window of `--slots` slots cannot
  hold: those with more active jobs at some step than it has slots.
"""

from __future__ import annotations

import argparse
import statistics

import gymnasium as gym

from evalstop_gym import WorkloadConfig
from evalstop_gym.baselines import SCHEDULERS, STOPPERS, make_policy  # importing the package registers the envs
from evalstop_gym.checks import ConfigError
from evalstop_gym.config import check_range
from evalstop_gym.commands.common import seed_range
from evalstop_gym.envs.adapter import CLUSTER_ID, STOP_CONTROL_ID, PolicyAgent
from evalstop_gym.seeds import check_seeds

HAND_CODED = ("srtf-est", "evalstop")


def play(env, obs, act) -> dict:
    """The rest of an episode of ``env`` from ``obs`` (its reset's) with ``act(obs) -> action``: step counts and
    window sizes."""
    steps = invalid = shown = most_active = 0
    instants = set()
    while True:
        cluster = env.unwrapped.cluster
        most_active = max(most_active, len(cluster.running) + len(cluster.waiting))
        if hasattr(env.unwrapped, "slot_action"):   # Cluster-v0: a window of slots
            shown += len(env.unwrapped.window)
        obs, _, terminated, truncated, info = env.step(act(obs))
        steps += 1
        invalid += bool(info["invalid_action"])
        instants.add(info["time_h"])
        if terminated or truncated:
            break
    if truncated:
        raise SystemExit(f"the episode was truncated after {steps} steps: {info['truncation']}")
    return {"steps": steps, "instants": len(instants), "invalid": invalid, "shown": shown / steps,
            "most_active": most_active}


def hand_coded(env_id: str, scheduler: str, stopper: str, seed: int, **kwargs) -> dict:
    env = gym.make(env_id, **kwargs)
    agent = PolicyAgent(make_policy(scheduler, stopper), env)
    obs, _ = env.reset(seed=seed)
    agent.reset()
    return play(env, obs, agent)


def random_agent(seed: int, agent_seed: int, masked: bool, **kwargs) -> dict:
    env = gym.make(CLUSTER_ID, **kwargs)
    obs, _ = env.reset(seed=seed)
    env.action_space.seed(agent_seed + seed)
    if masked:
        return play(env, obs, lambda obs: int(env.action_space.sample(env.unwrapped.action_masks())))
    return play(env, obs, lambda obs: int(env.action_space.sample()))


def describe(name: str, runs: list[dict], jobs: int) -> str:
    steps = statistics.mean(r["steps"] for r in runs)
    invalid = sum(r["invalid"] for r in runs) / sum(r["steps"] for r in runs)
    return (f"| {name} | {steps:,.0f} | {steps / jobs:.1f} | {statistics.mean(r['instants'] for r in runs):,.0f} | "
            f"{100 * invalid:.1f}% | {statistics.mean(r['shown'] for r in runs):.2f} |")


def report(seeds: list[int], jobs: int, slots: int, agent_seed: int) -> None:
    """Print the episode-length table and the window table over ``seeds``."""
    kw = {"jobs": jobs}
    print(f"EvalStop-Cluster-v0, {jobs} jobs, seeds {seeds[0]}-{seeds[-1]} (means over seeds):\n")
    print("| agent | steps | steps per job | instants | invalid | jobs shown per step |")
    print("|---|---:|---:|---:|---:|---:|")
    print(describe("SRTF-Est + EvalStop(k=2)", [hand_coded(CLUSTER_ID, *HAND_CODED, s, **kw) for s in seeds], jobs))
    print(describe("random, masked", [random_agent(s, agent_seed, True, **kw) for s in seeds], jobs))
    print(describe("random, unmasked", [random_agent(s, agent_seed, False, **kw) for s in seeds], jobs), flush=True)
    stop = [hand_coded(STOP_CONTROL_ID, *HAND_CODED, s, **kw) for s in seeds]
    print(f"\nEvalStop-StopControl-v0 under SRTF-Est + EvalStop(k=2): "
          f"{statistics.mean(r['steps'] for r in stop):,.0f} steps (mean over seeds)\n")
    most = {(sch, st): max(hand_coded(CLUSTER_ID, sch, st, s, slots=jobs, **kw)["most_active"] for s in seeds)
            for sch in SCHEDULERS for st in STOPPERS}
    print("Most jobs active at once on Cluster-v0 (running + waiting), every scheduler x stopper:\n")
    print("| scheduler | " + " | ".join(STOPPERS) + " |")
    print("|---|" + "---:|" * len(STOPPERS))
    for sch in SCHEDULERS:
        print(f"| {sch} | " + " | ".join(str(most[sch, st]) for st in STOPPERS) + " |")
    top = max(most.values())
    over = [f"{sch} + {st} ({n})" for (sch, st), n in most.items() if n > slots]
    print(f"\nthe most: {top} ({', '.join(f'{a} + {b}' for (a, b), n in most.items() if n == top)}); "
          f"more active jobs than {slots} slots: {', '.join(over) or 'none'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="0-0", help="test seeds A-B (default 0-0)")
    ap.add_argument("--jobs", type=int, default=200, help="jobs per episode (default 200, the default workload's)")
    ap.add_argument("--slots", type=int, default=32,
                    help="the window the policies must fit in (default 32, Cluster-v0's)")
    ap.add_argument("--agent-seed", type=int, default=0, help="the random agents' draws (default 0)")
    args = ap.parse_args()
    try:
        seeds = check_seeds("test", seed_range(args.seeds))
        WorkloadConfig(jobs=args.jobs)           # refuses a bad job count before any table is printed
        check_range("slots", args.slots, 1, integer=True)
        check_range("agent_seed", args.agent_seed, 0, integer=True)   # action_space.seed takes seeds >= 0
        report(seeds, args.jobs, args.slots, args.agent_seed)
    except ConfigError as e:   # one line naming the bad value, not a traceback
        raise SystemExit(f"error: {e}") from None


if __name__ == "__main__":
    main()
