"""How many tuning trials a family needs: one family's study on a suite's validation seeds, its running best.

The joint search (the default: the scheduler searched with the stopper's parameters) or, with a scheduler
named, that scheduler and stopper pair alone (``bench --per-scheduler``). Prints the wall time and each
trial that improved the best (docs/bench.md, *Fair comparators*, where the tuning budget was chosen).

    python benchmarks/bench_tune_budget.py cusum 60                  # joint: trial 13 finds drift 0.3, threshold 1.0
    python benchmarks/bench_tune_budget.py cusum 24 srtf-progress    # per scheduler
"""

import argparse
import tempfile
import time
from pathlib import Path

from evalstop_gym.bench.suite import suite
from evalstop_gym.bench.tune import tune_families
from evalstop_gym.experiments.runner import ResultStore


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("family", help="a registered stopper")
    ap.add_argument("budget", type=int, help="trials")
    ap.add_argument("scheduler", nargs="?", default=None, help="tune this scheduler + the family alone")
    ap.add_argument("--suite", default="v2")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    rows = [r for r in suite(args.suite) if r.missing() is None]
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        out = tune_families(rows, ResultStore(Path(tmp) / "tune.jsonl"), budget=args.budget, families=[args.family],
                            schedulers=[args.scheduler] if args.scheduler else None,
                            per_scheduler=bool(args.scheduler), workers=args.workers, progress=False)
        wall = time.perf_counter() - t
    print(f"{args.family} over {args.scheduler or 'any scheduler'}: {args.budget} trials on {len(rows)} rows in "
          f"{wall:.0f} s (the reference arms included)")
    (family,) = out["families"].values()
    best = None
    for i, trial in enumerate(family["every_trial"], 1):
        if best is None or (trial["score"], trial["tie"]) < (best["score"], best["tie"]):
            best = trial
            print(f"  trial {i}: new best {trial['scheduler']} {trial['params']} score {trial['score']:.4f} "
                  f"feasible {trial['feasible']}")


if __name__ == "__main__":
    main()
