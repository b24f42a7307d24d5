"""One env of this tree against the same env of an earlier commit, and CartPole-v1, in one process.

``bench_env.py`` gives each env's rate as a share of CartPole's; a change to an env
is judged by that share before and after it. Measured in two runs the two shares
also differ by what else ran on the machine in between; here both versions and
CartPole take turns in the same process, by ``bench_env``'s own method (CPU time,
short interleaved slices, the clock's cost taken off, min and median over repeats).

The earlier commit's ``evalstop_gym`` is exported with ``git archive`` into a
temporary folder and imported under another name (``evalstop_gym_at_rev``: its
absolute imports rewritten), so the two versions share nothing but the
libraries. Both envs are wrapped as ``gym.make`` wraps the registered one
(``PassiveEnvChecker``, ``OrderEnforcing``).

    python benchmarks/bench_env_against.py --rev COMMIT [--env EvalStop-StopControl-v0]
                                           [--seconds 2] [--repeat 5] [--slice 0.05]
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import subprocess
import sys
import tempfile

import gymnasium as gym
from gymnasium.wrappers import OrderEnforcing, PassiveEnvChecker

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_env  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RENAMED = "evalstop_gym_at_rev"


def export_package(rev: str, into: str) -> None:
    """``evalstop_gym`` at ``rev`` as the package :data:`RENAMED` under ``into``."""
    archive = subprocess.run(["git", "-C", REPO, "archive", rev, "evalstop_gym"], capture_output=True)
    if archive.returncode:
        sys.exit(f"--rev {rev}: git archive failed: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "x", "-C", into], input=archive.stdout, check=True)
    os.rename(os.path.join(into, "evalstop_gym"), os.path.join(into, RENAMED))
    for folder, _, files in os.walk(os.path.join(into, RENAMED)):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as f:
                    code = f.read()
                with open(path, "w", encoding="utf-8") as f:
                    f.write(code.replace("evalstop_gym", RENAMED))


def env_at_rev(env_id: str) -> gym.Env:
    """``env_id`` from the exported package (the class the id's entry point names today), wrapped as
    ``gym.make`` wraps it."""
    module, name = gym.spec(env_id).entry_point.replace("evalstop_gym", RENAMED).split(":")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        sys.exit(f"--env {env_id}: the earlier commit has no {module}:{name} ({e})")
    return OrderEnforcing(PassiveEnvChecker(cls()))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rev", required=True, help="the earlier commit (any git revision)")
    p.add_argument("--env", default="EvalStop-StopControl-v0", help="a registered EvalStop id")
    p.add_argument("--seconds", type=float, default=2.0, help="CPU seconds per env per repeat")
    p.add_argument("--repeat", type=int, default=5, help="repeats (ratios: their min and median)")
    p.add_argument("--slice", type=float, default=0.05, help="CPU seconds an env runs before the next one's turn")
    a = p.parse_args(argv)
    for name in ("seconds", "slice"):
        if not getattr(a, name) > 0:
            p.error(f"--{name} {getattr(a, name)}: CPU seconds, above 0")
    if a.repeat < 1:
        p.error(f"--repeat {a.repeat}: a count, at least 1")
    if not a.env.startswith("EvalStop-") or a.env not in gym.registry:
        p.error(f"--env {a.env}: one of {', '.join(i for i in gym.registry if i.startswith('EvalStop-'))}")
    folder = tempfile.mkdtemp(prefix="evalstop-rev-")
    try:
        export_package(a.rev, folder)
        sys.path.insert(0, folder)
        before, now = f"{a.env} at {a.rev}", f"{a.env} now"
        steppers = {bench_env.BASE: bench_env.EnvStepper(gym.make(bench_env.BASE)),
                    before: bench_env.EnvStepper(env_at_rev(a.env)),
                    now: bench_env.EnvStepper(gym.make(a.env))}
        print(f"CPU time of this process; {a.repeat} repeats of {a.seconds:g} CPU s per env in slices of "
              f"{a.slice:g} s, taking turns; load average {bench_env.load_average()}")
        try:
            table = bench_env.summarise(bench_env.interleave(steppers, a.seconds, a.repeat, a.slice))
        finally:
            bench_env.close_all(steppers)
        print(f"{'env':<48} {'steps/CPU s':>12} {'vs CartPole':>12} {'(min)':>8}")
        for label, s in table.items():
            print(f"{label:<48} {s.rate:>12.0f} {s.ratio_median:>11.1%} {s.ratio_min:>8.1%}")
        print(f"load average at the end: {bench_env.load_average()}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
