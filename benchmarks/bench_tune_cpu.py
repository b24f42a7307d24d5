"""CPU per tuning trial: the Python path drawing every workload for every run, against the compiled path
drawing each validation workload once, as a ratio within one run; and what that buys the tuner's budget.

``bench --tune`` plays, for every family and trial, every playable row of the suite on its validation seeds.
This runs the same tuner (:func:`evalstop_gym.bench.tune.tune_families`, every family, one process, a fresh
store each time) twice per repeat, interleaved:

* ``before``: ``EVALSTOP_COMPILED=0`` (the Python simulator on every row) and every run draws its workload
  afresh (the tuner before workloads were kept per process, but without the compiled flat-pool rows it
  already had: an upper bound on that tuner's CPU, not its measure);
* ``after``: the compiled path where it applies, and each validation workload drawn once per process.

Each prints its CPU seconds for the reference arms (played once per tuning) and per trial (the rest over
``budget x families`` trials), the min over ``--repeat``. Both tunings must be identical trial by trial
(same parameters, same scores): the speed changes nothing the tuner sees. Then the budget a family can
have in the CPU that ``--old-budget`` trials took before: ``(refs_before + old x F x trial_before -
refs_after) / (F x trial_after)``. CPU time (``time.process_time``) reads the same under load.

With ``--new-budget N`` it then plays both whole tunings, ``before`` at ``--old-budget`` and ``after`` at
``N`` (the sampler's own cost grows with a study's history, which the per-trial figure at a small budget
leaves out), and prints their CPU and every family's best trial under each: what the budget changes.

Both arms here are today's code. The whole ``bench --tune`` command of an earlier commit against today's,
each at the budget it ships, workers included, is ``benchmarks/bench_cli_cpu.py``'s to measure.

    python benchmarks/bench_tune_cpu.py [--budget 3] [--repeat 2] [--suite v3] [--old-budget 16] [--new-budget 100]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # this checkout's code

from evalstop_gym.bench import play as bench_play  # noqa: E402
from evalstop_gym.bench import tune  # noqa: E402
from evalstop_gym.bench.suite import suite  # noqa: E402
from evalstop_gym.compiled import ENV  # noqa: E402
from evalstop_gym.experiments.runner import ResultStore  # noqa: E402


def setup(mode: str) -> None:
    """Switch this process to ``mode`` ("before" / "after"), with an empty workload cache."""
    bench_play._workloads.clear()
    if mode == "before":
        os.environ[ENV] = "0"
        bench_play.BenchSpec.workload = bench_play.BenchSpec.draw_workload
    else:
        os.environ.pop(ENV, None)
        bench_play.BenchSpec.workload = CACHED


CACHED = bench_play.BenchSpec.workload


def measure(mode: str, rows, budget: int) -> tuple[float, float, dict]:
    """``(CPU s of the reference arms, CPU s of the whole tuning, the tuning)`` in ``mode``."""
    kw = dict(backend="local", workers=1, ray_address=None, progress=False)
    with tempfile.TemporaryDirectory() as tmp:
        setup(mode)
        t = time.process_time()
        tune._references(tune.validation_rows(rows), ResultStore(Path(tmp) / "refs.jsonl"), kw)
        refs = time.process_time() - t
    with tempfile.TemporaryDirectory() as tmp:
        setup(mode)
        t = time.process_time()
        out = tune.tune_families(rows, ResultStore(Path(tmp) / "tune.jsonl"), budget=budget, workers=1,
                                 progress=False)
        total = time.process_time() - t
    return refs, total, out


def trials(out: dict) -> dict:
    return {k: [(t["label"], t["score"]) for t in f["every_trial"]] for k, f in out["families"].items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=int, default=3, help="trials per family in each measured tuning")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--suite", default="v3")
    ap.add_argument("--old-budget", type=int, default=16, help="the budget whose CPU the new one may use")
    ap.add_argument("--new-budget", type=int, default=None, help="then tune whole at both budgets and compare")
    args = ap.parse_args()
    rows = [r for r in suite(args.suite) if r.missing() is None]
    measure("after", rows[:1], 1)   # the kernel loaded (or compiled) and optuna imported before any timing
    best: dict[str, tuple[float, float]] = {}
    tunings: dict[str, dict] = {}
    for _ in range(args.repeat):
        for mode in ("before", "after"):
            refs, total, out = measure(mode, rows, args.budget)
            tunings[mode] = trials(out)
            r0, t0 = best.get(mode, (float("inf"), float("inf")))
            best[mode] = (min(r0, refs), min(t0, total))
    n_fam = len(tunings["after"])
    assert tunings["before"] == tunings["after"], "the two paths tuned differently"
    print(f"suite {args.suite}: {len(rows)} rows x {tune.VALIDATION_SEEDS} validation seeds, {n_fam} families x "
          f"{args.budget} trials, 1 process; CPU s, min of {args.repeat} (identical tunings on both paths)")
    per = {}
    for mode, (refs, total) in best.items():
        per[mode] = (refs, (total - refs) / (n_fam * args.budget))
        print(f"  {mode:6s}  reference arms {refs:6.2f}   per trial {per[mode][1]:6.3f}")
    (rb, tb), (ra, ta) = per["before"], per["after"]
    print(f"  ratio before/after: per trial {tb / ta:.1f}x, reference arms {rb / ra:.1f}x")
    fits = int((rb + args.old_budget * n_fam * tb - ra) // (n_fam * ta))
    print(f"  budget in the CPU of {args.old_budget} trials a family before: {fits} trials a family")
    if args.new_budget is not None:
        compare_budgets(rows, args.old_budget, args.new_budget)


def compare_budgets(rows, old: int, new: int) -> None:
    """Whole tunings: ``before`` at ``old`` trials a family, ``after`` at ``new``; their CPU and bests."""
    _, cpu_old, out_old = measure("before", rows, old)
    _, cpu_new, out_new = measure("after", rows, new)
    print(f"whole tunings, CPU s: before at {old} trials a family {cpu_old:.1f}, after at {new} {cpu_new:.1f} "
          f"({cpu_new / cpu_old:.2f} of it)")
    for fam in out_old["families"]:
        a, b = out_old["families"][fam], out_new["families"][fam]
        print(f"  {fam}: at {old} {a['label']} ({a['score']:.4f}); at {new} {b['label']} ({b['score']:.4f})")
    print(f"  tuned best: {out_old['best']['label']} ({out_old['best']['score']:.4f}) -> "
          f"{out_new['best']['label']} ({out_new['best']['score']:.4f})")


if __name__ == "__main__":
    main()
