"""Per-seed F1 and waste cut of every detector in the worlds of E10, and paired comparisons between two runs.

    PYTHONPATH=. python3 docs/detector_pairs.py measure OUT.json [--seeds 20] [--first-seed 0]
    PYTHONPATH=. python3 docs/detector_pairs.py compare BEFORE.json AFTER.json

``measure`` plays E10's worlds (:func:`evalstop_gym.experiments.spec.misspecified`
on the realistic calibration, SRTF-Est base, held-out test seeds) with EvalStop
k=2 and every detector at its defaults, and writes each run's F1, FPR and waste
cut against no stopper on the same seed. ``compare`` pairs two such files seed
by seed (the same workloads, e.g. the detectors before and after a change, run
from two checkouts) and prints, per world and detector, the paired difference
of F1 and of waste cut (percentage points) with its 95% t-interval, and within
AFTER each detector's F1 and waste cut against EvalStop k=2's
(``experiments/stats.paired_difference``). docs/detectors.md shows the output
for the commits before and after the defaults were re-chosen on validation
seeds of the selection world.
"""

from __future__ import annotations

import argparse
import json
import sys

from evalstop_gym import WorkloadConfig, generate
from evalstop_gym.agents.seeds import check_test_seeds
from evalstop_gym.api import run_policy
from evalstop_gym.baselines import make_policy
from evalstop_gym.experiments.spec import ANCHOR_STOPPERS, Registry, misspecified
from evalstop_gym.experiments.stats import paired_difference

BASE = "srtf-est"


def measure(seeds: range) -> dict:
    """``{world: {arm: {"f1": [...], "fpr": [...], "waste_cut": [...]}}}``, lists in seed order."""
    arms = ["evalstop", *Registry.current().detectors]
    cfg = WorkloadConfig(calibration="realistic")
    out: dict = {}
    for label, changes in misspecified(cfg):
        rows = out[label] = {a: {"f1": [], "fpr": [], "waste_cut": []} for a in arms}
        for s in seeds:
            w = generate(cfg.replace(seed=s, **changes))
            waste = run_policy(w, make_policy(BASE))["compute_waste_gpu_h"]
            for a in arms:
                m = run_policy(w, make_policy(BASE, a, **({"k": 2} if a == "evalstop" else {})))
                rows[a]["f1"].append(m["f1"] or 0.0)
                rows[a]["fpr"].append(m["fpr"])
                rows[a]["waste_cut"].append(100.0 * (1.0 - m["compute_waste_gpu_h"] / waste))
    return out


def _cell(d, fmt: str = "+.3f") -> str:
    return f"{d.diff:{fmt}} [{d.ci_lo:{fmt}}, {d.ci_hi:{fmt}}]" if d.ci_lo is not None else f"{d.diff:{fmt}}"


def _mean(xs) -> float:
    return sum(xs) / len(xs)


def compare(before: dict, after: dict) -> str:
    lines = ["| world | detector | F1 before -> after | F1 change [95% CI] | waste cut %, before -> after | "
             "waste cut change, points [95% CI] | after vs EvalStop k=2: F1 [95% CI] | waste cut, points [95% CI] |",
             "|---|---|---|---|---|---|---|---|"]
    for world, arms in after.items():
        for arm, new in arms.items():
            if arm in ANCHOR_STOPPERS or arm not in before.get(world, {}):
                continue
            old, anchor = before[world][arm], arms["evalstop"]
            f1 = paired_difference(old["f1"], new["f1"])
            cut = paired_difference(old["waste_cut"], new["waste_cut"])
            lines.append(f"| {world} | {arm} | {_mean(old['f1']):.3f} -> {_mean(new['f1']):.3f} | {_cell(f1)} | "
                         f"{_mean(old['waste_cut']):.1f} -> {_mean(new['waste_cut']):.1f} | {_cell(cut, '+.1f')} | "
                         f"{_cell(paired_difference(anchor['f1'], new['f1']))} | "
                         f"{_cell(paired_difference(anchor['waste_cut'], new['waste_cut']), '+.1f')} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    m.add_argument("out")
    m.add_argument("--seeds", type=int, default=20)
    m.add_argument("--first-seed", type=int, default=0)
    c = sub.add_parser("compare")
    c.add_argument("before")
    c.add_argument("after")
    args = ap.parse_args(argv)
    if args.cmd == "measure":
        check_test_seeds(args.first_seed, args.seeds)
        with open(args.out, "w") as f:
            json.dump(measure(range(args.first_seed, args.first_seed + args.seeds)), f)
    else:
        with open(args.before) as f, open(args.after) as g:
            print(compare(json.load(f), json.load(g)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
