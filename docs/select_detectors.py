"""Choose the hand-coded detectors' parameters on validation seeds, by rules fixed before tuning.

    PYTHONPATH=. python3 docs/select_detectors.py [--rule defaults|paper-noisy] [--seeds 20] [--csv FILE]

Both rules share the setting: SRTF-Est base scheduler on ``rlhf-heavy``,
validation seeds only (:mod:`evalstop_gym.agents.seeds`; the script refuses
test seeds), and the same budget for every detector: :data:`BUDGET` settings,
the whole grid of :data:`SPACES` when it is that small, else that many drawn
from it without replacement by a generator seeded with 0.

* ``defaults`` (:func:`select`), the rule that set the shipped defaults: the
  realistic world; the best mean F1 among the settings whose mean per-seed
  waste cut against no stopper is at least EvalStop k=2's on the same seeds;
  when none is, the largest waste cut. Ties go to the higher waste cut, then
  to the earlier setting.
* ``paper-noisy`` (:func:`select_precise`): the paper world at eval noise
  0.10, the regime where k declines degrade; the largest mean recall among the
  settings with mean precision >= 0.95; when none has it, the highest
  precision. It recommends settings for that regime and does not change the
  defaults.

It prints each detector's choice and the defaults the package ships, so a
reader sees whether they agree; docs/detectors.md records the runs.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from typing import Any

import numpy as np

from evalstop_gym import WorkloadConfig, generate
from evalstop_gym.agents.seeds import VALIDATION_FIRST, check_validation_seeds
from evalstop_gym.api import run_policy
from evalstop_gym.baselines import STOPPERS, make_policy

BASE = "srtf-est"
ANCHOR = ("evalstop", {"k": 2})
BUDGET = 32
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


RULES = {"defaults": WorkloadConfig(calibration="realistic", workload="rlhf-heavy"),
         "paper-noisy": WorkloadConfig(calibration="paper", workload="rlhf-heavy", noise=0.10)}


def defaults(stopper: str) -> dict[str, Any]:
    import inspect

    sig = inspect.signature(STOPPERS[stopper].__init__)
    return {p: sig.parameters[p].default for p in SPACES[stopper]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rule", choices=sorted(RULES), default="defaults")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=VALIDATION_FIRST)
    ap.add_argument("--csv", help="write every setting's scores here")
    args = ap.parse_args(argv)
    check_validation_seeds(args.first_seed, args.seeds)
    cfg = RULES[args.rule]
    workloads = [generate(cfg.replace(seed=s)) for s in range(args.first_seed, args.first_seed + args.seeds)]
    waste = [run_policy(w, make_policy(BASE))["compute_waste_gpu_h"] for w in workloads]
    anchor = score(workloads, waste, *ANCHOR)
    print(f"rule {args.rule}, validation seeds {args.first_seed}-{args.first_seed + args.seeds - 1}: evalstop k=2 "
          + ", ".join(f"{k} {v:.3f}" for k, v in anchor.items()))
    rows = []
    for stopper, space in SPACES.items():
        scored = [(p, score(workloads, waste, stopper, p)) for p in candidates(space)]
        rows += [(stopper, p, sc) for p, sc in scored]
        params, sc = select(scored, anchor["waste_cut"]) if args.rule == "defaults" else select_precise(scored)
        shipped = defaults(stopper)
        print(f"{stopper:10s} chosen {params}: " + ", ".join(f"{k} {v:.3f}" for k, v in sc.items())
              + ("" if params == shipped else f"   (shipped defaults: {shipped})"))
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("stopper,params,f1,precision,recall,waste_cut\n")
            for stopper, p, sc in rows:
                f.write(f"{stopper},\"{p}\"," + ",".join(f"{sc[k]:.4f}" for k in ("f1", "precision", "recall",
                                                                                  "waste_cut")) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
