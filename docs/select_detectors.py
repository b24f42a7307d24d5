"""Choose the hand-coded detectors' parameters on validation seeds, by rules fixed before tuning.

    PYTHONPATH=. python3 docs/select_detectors.py [--calibration NAME] [--seeds 20] [--out FILE]
    PYTHONPATH=. python3 docs/select_detectors.py --rule paper-noisy

Both rules share the setting: SRTF-Est base scheduler on ``rlhf-heavy``,
validation seeds only (:func:`evalstop_gym.seeds.check_seeds`; the script
refuses any other seed), and the same budget for every detector:
:data:`BUDGET` settings, the whole grid of :data:`SPACES` when it is that
small, else that many drawn from it without replacement by a generator seeded
with 0.

* ``defaults`` (:func:`select`), the rule that sets the shipped defaults: the
  selection world (``--calibration``, default
  :data:`evalstop_gym.seeds.SELECTION_CALIBRATION`); the best mean F1 among
  the settings whose mean per-seed waste cut against no stopper is at least
  EvalStop k=2's on the same seeds; when none is, the largest waste cut. Ties
  go to the higher waste cut, then to the earlier setting. It writes its
  result, with every setting's scores, the seeds, the world and the code's
  commit, to ``--out`` (default :data:`RESULT`, which
  ``tests/test_baselines_defaults.py`` holds equal to the defaults the
  detectors ship).
* ``paper-noisy`` (:func:`select_precise`): the paper world at eval noise
  0.10, the regime where k declines degrade; the largest mean recall among the
  settings with mean precision >= 0.95; when none has it, the highest
  precision. It recommends settings for that regime, does not change the
  defaults and writes a file only when ``--out`` is given.

It prints each detector's choice and the defaults the package ships, so a
reader sees whether they agree; docs/detectors.md quotes the result.
"""

from __future__ import annotations

import argparse
import inspect
import itertools
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import evalstop_gym
from evalstop_gym import WorkloadConfig, generate
from evalstop_gym.api import run_policy
from evalstop_gym.baselines import STOPPERS, make_policy
from evalstop_gym.checks import ConfigError, UsageError
from evalstop_gym.seeds import SELECTION_CALIBRATION, VALIDATION, check_seeds

BASE = "srtf-est"
WORKLOAD = "rlhf-heavy"
ANCHOR = ("evalstop", {"k": 2})
BUDGET = 32
RESULT = Path(__file__).resolve().parent / "detector_defaults.json"
SPACES: dict[str, dict[str, tuple[Any, ...]]] = {
    "patience": {"patience": (2, 3, 4, 5), "min_delta": (0.0, 0.005, 0.01, 0.02, 0.03, 0.05, 0.08, 0.1)},
    "cusum": {"threshold": (1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0), "drift": (0.0, 0.25, 0.5, 1.0)},
    "smoothed": {"window": (3, 4, 5, 6, 7, 8, 9, 10), "threshold": (0.0, 0.5, 1.0, 2.0)},
    "droptest": {"window": (1, 2), "z": (1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0), "min_drop": (0.0, 0.02, 0.04, 0.08)},
    "divergence": {"window": (1, 2), "z": (1.5, 2.0, 2.5, 3.0, 4.0), "min_drop": (0.0, 0.04, 0.08),
                   "fast_z": (1.0, 1.5, 2.0), "fast_min_drop": (0.0, 0.02, 0.04), "proxy_z": (1.0, 2.0, 3.0),
                   "lag": (1, 2)},
}


def candidates(space: dict[str, tuple[Any, ...]], budget: int = BUDGET) -> list[dict[str, Any]]:
    """The settings a detector is tried at: the whole grid if it fits the budget, else a seeded sample of it."""
    grid = [dict(zip(space, values)) for values in itertools.product(*space.values())]
    if len(grid) <= budget:
        return grid
    picks = np.random.default_rng(0).choice(len(grid), size=budget, replace=False)
    return [grid[i] for i in sorted(picks)]


def score(workloads, baseline_waste, stopper: str, params: dict[str, Any]) -> dict[str, float]:
    """Mean F1, precision, recall (undefined counts as 0) and per-seed waste cut (a fraction) over ``workloads``."""
    rows = []
    for w, base in zip(workloads, baseline_waste):
        m = run_policy(w, make_policy(BASE, stopper, **params))
        rows.append({k: m[k] or 0.0 for k in ("f1", "precision", "recall")}
                    | {"waste_cut": 1.0 - m["compute_waste_gpu_h"] / base})
    return {k: float(np.mean([r[k] for r in rows])) for k in rows[0]}


def select(scored: list[tuple[dict[str, Any], dict[str, float]]], floor: float):
    """The ``defaults`` rule over ``(params, scores)`` rows, with EvalStop's waste cut ``floor``."""
    feasible = [r for r in scored if r[1]["waste_cut"] >= floor]
    if not feasible:
        return max(scored, key=lambda r: r[1]["waste_cut"])
    best = max(r[1]["f1"] for r in feasible)
    return max((r for r in feasible if r[1]["f1"] == best), key=lambda r: r[1]["waste_cut"])  # first of equals


def select_precise(scored: list[tuple[dict[str, Any], dict[str, float]]], precision: float = 0.95):
    """The ``paper-noisy`` rule: the largest recall with precision >= ``precision``, else the best precision."""
    feasible = [r for r in scored if r[1]["precision"] >= precision]
    if not feasible:
        return max(scored, key=lambda r: r[1]["precision"])
    return max(feasible, key=lambda r: r[1]["recall"])


def shipped(stopper: str) -> dict[str, Any]:
    """The defaults the package ships for the parameters :data:`SPACES` searches."""
    sig = inspect.signature(STOPPERS[stopper].__init__)
    return {p: sig.parameters[p].default for p in SPACES[stopper]}


def world(rule: str, calibration: str | None) -> WorkloadConfig:
    """The workload a rule tunes on; only ``defaults`` takes a calibration (the selection world by default)."""
    if rule == "paper-noisy":
        if calibration is not None:
            raise UsageError(f"--calibration {calibration}: the paper-noisy rule's world is fixed "
                             "(paper, noise 0.10); --calibration applies to --rule defaults")
        return WorkloadConfig(calibration="paper", workload=WORKLOAD, noise=0.10)
    return WorkloadConfig(calibration=calibration or SELECTION_CALIBRATION, workload=WORKLOAD)


RULES = {"defaults": select, "paper-noisy": select_precise}


def code_version() -> dict[str, Any]:
    """The package version and the checkout's commit (``dirty``: uncommitted changes), if it is a git checkout."""
    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str | None:
        try:
            return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return None

    status = git("status", "--porcelain", "--untracked-files=no")
    return {"package": evalstop_gym.__version__, "commit": git("rev-parse", "HEAD"),
            "dirty": None if status is None else bool(status)}


def _scores(sc: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 6) for k, v in sc.items()}


def run(rule: str, cfg: WorkloadConfig, seeds: list[int]) -> dict[str, Any]:
    """Play every detector's candidates on ``seeds`` of ``cfg``; the rule's choice and every setting's scores."""
    start, code = time.process_time(), code_version()   # the code that runs, before anything can change it
    workloads = [generate(cfg.replace(seed=s)) for s in seeds]
    waste = [run_policy(w, make_policy(BASE))["compute_waste_gpu_h"] for w in workloads]
    anchor = score(workloads, waste, *ANCHOR)
    detectors = {}
    for stopper, space in SPACES.items():
        scored = [(p, score(workloads, waste, stopper, p)) for p in candidates(space)]
        params, sc = select(scored, anchor["waste_cut"]) if rule == "defaults" else select_precise(scored)
        detectors[stopper] = {"chosen": params, "scores": _scores(sc),
                              "settings": [{"params": p, "scores": _scores(s)} for p, s in scored]}
    return {"rule": rule, "calibration": cfg.calibration, "noise": cfg.noise, "workload": cfg.workload,
            "base_scheduler": BASE, "seeds": {"first": seeds[0], "last": seeds[-1], "count": len(seeds)},
            "budget": BUDGET, "anchor": {"stopper": ANCHOR[0], "params": ANCHOR[1], "scores": _scores(anchor)},
            "detectors": detectors, "code": code, "cpu_seconds": round(time.process_time() - start, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rule", choices=sorted(RULES), default="defaults")
    ap.add_argument("--calibration", help=f"the world of --rule defaults (default {SELECTION_CALIBRATION}, "
                                          "the selection world of evalstop_gym.seeds)")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=VALIDATION.first)
    ap.add_argument("--out", help=f"write the result here (default for --rule defaults: {RESULT.name} in docs/)")
    args = ap.parse_args(argv)
    seeds = check_seeds("validation", range(args.first_seed, args.first_seed + args.seeds))
    if not seeds:
        raise UsageError(f"--seeds {args.seeds}: at least one seed is needed")
    res = run(args.rule, world(args.rule, args.calibration), seeds)
    a = res["anchor"]["scores"]
    print(f"rule {args.rule}, {res['calibration']} world, validation seeds {seeds[0]}-{seeds[-1]}: evalstop k=2 "
          + ", ".join(f"{k} {v:.3f}" for k, v in a.items()))
    for stopper, d in res["detectors"].items():
        ships = shipped(stopper)
        print(f"{stopper:10s} chosen {d['chosen']}: " + ", ".join(f"{k} {v:.3f}" for k, v in d["scores"].items())
              + ("" if d["chosen"] == ships else f"   (shipped defaults: {ships})"))
    out = args.out or (RESULT if args.rule == "defaults" else None)
    if out:
        Path(out).write_text(json.dumps(res, indent=1) + "\n")
        print(f"wrote {out} ({res['cpu_seconds']} CPU s)")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (ConfigError, UsageError) as e:   # one line naming the bad value, not a traceback
        sys.exit(f"select_detectors: {e}")
