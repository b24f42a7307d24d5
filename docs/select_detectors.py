"""Choose the hand-coded detectors' default parameters on validation seeds, by a rule fixed before tuning.

    PYTHONPATH=. python3 docs/select_detectors.py [--seeds 20] [--first-seed 900000] [--csv FILE]

The rule (:func:`select`), the same for every detector:

* world: the realistic calibration, ``rlhf-heavy`` workload, SRTF-Est base
  scheduler, validation seeds only (:mod:`evalstop_gym.agents.seeds`; the
  script refuses test seeds);
* budget: :data:`BUDGET` settings per detector, the whole grid of
  :data:`SPACES` when it is that small, else that many drawn from it without
  replacement by a generator seeded with 0;
* score: mean F1 over the seeds, and the mean per-seed waste cut against no
  stopper on the same seeds;
* choice: the best mean F1 among the settings whose waste cut is at least
  EvalStop k=2's on the same seeds; when none is, the largest waste cut.
  Ties go to the higher waste cut, then to the earlier setting.

It prints each detector's choice and the defaults the package ships, so a
reader sees whether they agree; docs/detectors.md records the run.
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


def score(workloads, baseline_waste, stopper: str, params: dict[str, Any]) -> tuple[float, float]:
    """Mean F1 and mean per-seed waste cut (a fraction) of ``stopper(params)`` over ``workloads``."""
    f1, cut = [], []
    for w, base in zip(workloads, baseline_waste):
        m = run_policy(w, make_policy(BASE, stopper, **params))
        f1.append(m["f1"] or 0.0)
        cut.append(1.0 - m["compute_waste_gpu_h"] / base)
    return float(np.mean(f1)), float(np.mean(cut))


def select(scored: list[tuple[dict[str, Any], float, float]], floor: float) -> tuple[dict[str, Any], float, float]:
    """The rule of the module docstring over ``(params, f1, waste_cut)`` rows, with EvalStop's waste cut ``floor``."""
    feasible = [r for r in scored if r[2] >= floor]
    if not feasible:
        return max(scored, key=lambda r: r[2])
    best = max(r[1] for r in feasible)
    return max((r for r in feasible if r[1] == best), key=lambda r: r[2])   # max keeps the first of equals


def defaults(stopper: str) -> dict[str, Any]:
    import inspect

    sig = inspect.signature(STOPPERS[stopper].__init__)
    return {p: sig.parameters[p].default for p in SPACES[stopper]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=VALIDATION_FIRST)
    ap.add_argument("--csv", help="write every setting's score here")
    args = ap.parse_args(argv)
    check_validation_seeds(args.first_seed, args.seeds)
    cfg = WorkloadConfig(calibration="realistic", workload="rlhf-heavy")
    workloads = [generate(cfg.replace(seed=s)) for s in range(args.first_seed, args.first_seed + args.seeds)]
    waste = [run_policy(w, make_policy(BASE))["compute_waste_gpu_h"] for w in workloads]
    f1_k2, floor = score(workloads, waste, *ANCHOR)
    print(f"validation seeds {args.first_seed}-{args.first_seed + args.seeds - 1}: evalstop k=2 F1 {f1_k2:.3f}, "
          f"waste cut {floor:.1%} (the floor)")
    rows = []
    for stopper, space in SPACES.items():
        scored = [(p, *score(workloads, waste, stopper, p)) for p in candidates(space)]
        rows += [(stopper, p, f, c) for p, f, c in scored]
        params, f1, cut = select(scored, floor)
        shipped = defaults(stopper)
        print(f"{stopper:10s} chosen {params}: F1 {f1:.3f}, waste cut {cut:.1%}"
              + ("" if params == shipped else f"   (shipped defaults differ: {shipped})"))
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("stopper,params,f1,waste_cut\n")
            for stopper, p, f1, cut in rows:
                f.write(f"{stopper},\"{p}\",{f1:.4f},{cut:.4f}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
