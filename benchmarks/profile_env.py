"""Where a single env's step spends its CPU time: an episode loop to sample, and the sampled stacks in parts.

``play`` steps ``gym.make(ENV)`` under seeded random actions that follow ``info["action_mask"]`` (as
``bench_env.py``'s agent), episode resets included, so that a sampling profiler can watch it::

    py-spy record -r 500 -f raw -o stacks.txt -- python benchmarks/profile_env.py --steps 150000
    python benchmarks/profile_env.py --summary stacks.txt

``--summary`` reads py-spy's raw output (one ``frame;frame;... count`` line per distinct stack) and
gives each part's share of the samples taken inside the env's ``step`` and ``reset`` (the agent's draws
are left out, and their share printed). A sample inside ``reset`` counts as the
episode's start whatever runs there (the first decision included); any other sample goes to the part
of the innermost frame that names one (:data:`PARTS`), else to the step's own code. A sampler sees
the code without slowing it call by call, as cProfile's per-call hooks do to the many short calls here.
"""

from __future__ import annotations

import argparse
import collections
import re

PLAY = "play"  # the function whose samples are counted
RESET = "SimEnv.reset"
# innermost frame's function (py-spy's "Class.method") -> part
PARTS = {
    "compute_metrics": "end of an episode: outcome and metrics",
    "Simulator.outcome": "end of an episode: outcome and metrics",
    "Simulator.advance": "simulator event loop (Simulator.advance)",
    "Simulator.stop": "Simulator.stop",
    "Scheduler.schedule": "base scheduler (schedule) and apply_plan",
    "apply_plan": "base scheduler (schedule) and apply_plan",
    "StopControlEnv._observe": "observation",
    "ClusterEnv._observe": "observation",
    "SimEnv._finish_step": "reward terms, info and mask (the rest of _finish_step)",
    "SimEnv._advance": "the reward's time and stop bookkeeping",
    "SimEnv._stop": "the reward's time and stop bookkeeping",
}
START = "once per episode: reset (workload, Simulator, first decision)"
OWN = "the rest of step (action check, the loop to the next checkpoint) and the wrappers"
_FRAME = re.compile(r"(\S+) \(")


def play(env_id: str, steps: int, seed: int = 0, **make_kw) -> int:
    """``steps`` steps of ``gym.make(env_id, **make_kw)`` under random masked actions, resetting at each
    episode's end; returns the episodes ended."""
    import gymnasium as gym

    import evalstop_gym  # noqa: F401  (registers the EvalStop ids)

    env = gym.make(env_id, **make_kw)
    ended = 0
    _, info = env.reset(seed=seed)
    env.action_space.seed(seed)
    sample = env.action_space.sample
    for _ in range(steps):
        mask = info.get("action_mask")
        _, _, terminated, truncated, info = env.step(sample(mask) if mask is not None else sample())
        if terminated or truncated:
            _, info = env.reset()
            ended += 1
    return ended


def summary(lines) -> tuple[dict[str, float], float]:
    """Each part's share of the samples inside the env's ``step`` and ``reset`` (called from :func:`play`),
    from py-spy's raw lines, largest first; and the share of :func:`play`'s samples outside them (the
    random agent's draws and the loop)."""
    counts: collections.Counter = collections.Counter()
    outside = 0
    for line in lines:
        stack, _, n = line.rstrip().rpartition(" ")
        names = [m.group(1) for m in map(_FRAME.match, stack.split(";")) if m]
        if PLAY not in names:
            continue
        inside = names[names.index(PLAY) + 1:]
        if not inside or not inside[0].endswith((".step", ".reset")):  # the outermost wrapper's step / reset
            outside += int(n)
            continue
        part = START if RESET in inside else next((PARTS[f] for f in reversed(inside) if f in PARTS), OWN)
        counts[part] += int(n)
    total = sum(counts.values())
    if not total:
        raise SystemExit(f"no sample inside {PLAY}(): is this py-spy's raw output (-f raw) of this script?")
    return {part: c / total for part, c in counts.most_common()}, outside / (total + outside)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env", default="EvalStop-StopControl-v0", help="a registered id")
    p.add_argument("--steps", type=int, default=150_000, help="steps to take (default 150000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--summary", metavar="RAW", help="py-spy raw output of a run of this script: print the parts")
    a = p.parse_args(argv)
    if a.summary:
        with open(a.summary, encoding="utf-8") as f:
            parts, outside = summary(f)
        print(f"shares of the samples inside the env's step and reset ({outside:.1%} of the loop's samples were "
              "outside them: the agent's draws and the loop)")
        for part, share in parts.items():
            print(f"{share:6.1%}  {part}")
        return
    if a.steps < 1:
        p.error(f"--steps {a.steps}: a count, at least 1")
    play(a.env, a.steps, a.seed)


if __name__ == "__main__":
    main()
