"""``evalstop-gym curves``: generate a real overoptimization curve library, label curve logs, and
compare EvalStop's detection on logged curves with the calibrated model's."""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from ..api import DEFAULT_SCHEDULER
from .common import add_workload_flags, workload_kwargs

ORDER = 40


def add_parser(sub) -> None:
    from ..curvelog import CURVE_FORMATS

    p = sub.add_parser("curves", help="training-curve logs: generate, label, compare",
                       description="Real training curves: generate a library with the tiny overoptimization "
                                   "generator, label curve logs, and run an E1-style comparison on them.")
    csub = p.add_subparsers(dest="curves_command", required=True, metavar="ACTION")

    g = csub.add_parser("generate", help="run the overoptimization generator into a curve library",
                        description="Run the tiny RLHF generator (torch, CPU) over a grid of preference-data "
                                    "sizes and KL penalties; write OUT/curves.csv and OUT/runs.json.")
    g.add_argument("--out", required=True, metavar="DIR", help="output directory")
    g.add_argument("--runs", type=int, default=48, help="number of runs (default %(default)s)")
    g.add_argument("--steps", type=int, default=400, help="policy-gradient steps per run (default %(default)s)")
    g.add_argument("--seed", type=int, default=0, help="first seed (default %(default)s)")
    g.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1),
                   help="worker processes (default %(default)s)")
    g.add_argument("--format", choices=("csv", "jsonl"), default="csv", help="curve-log format (default csv)")
    g.set_defaults(func=run_generate)

    lab = csub.add_parser("label", help="label each run of a curve log by the documented rule",
                          description="Print each run's hacking label (peak followed by a decline larger "
                                      "than the noise) and the counts.")
    lab.add_argument("path", metavar="PATH", help="curve log: .csv, .jsonl, or a directory (TensorBoard too)")
    lab.add_argument("--noise-floor", type=float, default=0.0,
                     help="eval noise the decline must clear besides the log's own (default %(default)s)")
    lab.add_argument("--format", dest="curves_format", choices=CURVE_FORMATS, default="auto",
                     help="curve-log format (default: by extension, or TensorBoard for a folder of event files)")
    lab.set_defaults(func=run_label)

    c = csub.add_parser("compare", help="E1-style: no stopper vs EvalStop on logged and on calibrated curves",
                        description="Run a base scheduler with no stopper and with EvalStop(k) on a workload "
                                    "whose RLHF curves come from a curve log, and on the calibrated model at "
                                    "the same hacking base rate; print detection and JCT over seeds.")
    c.add_argument("--curves", required=True, metavar="PATH", help="curve log (.csv, .jsonl or directory)")
    c.add_argument("--curves-format", choices=CURVE_FORMATS, default="auto", help="(default %(default)s)")
    c.add_argument("--scheduler", default=DEFAULT_SCHEDULER, metavar="NAME",
                   help="base scheduler (default %(default)s)")
    c.add_argument("--k", type=int, default=2, help="EvalStop's consecutive declines (default %(default)s)")
    c.add_argument("--stoppers", default="evalstop", metavar="A,B",
                   help="stoppers to compare with no stopper, each with its defaults except evalstop's --k "
                        "(default %(default)s; e.g. evalstop,patience,cusum,smoothed)")
    c.add_argument("--seeds", type=int, default=5,
                   help="seeds SEED..SEED+N-1 (--seed), paired across arms (default %(default)s)")
    add_workload_flags(c)
    c.set_defaults(func=run_compare)


def run_generate(args: argparse.Namespace) -> int:
    from ..config import check_range
    from ..curvelog import label_run, read_curve_log

    check_range("runs", args.runs, 1, integer=True)
    check_range("steps", args.steps, 1, integer=True)
    check_range("workers", args.workers, 1, integer=True)
    check_range("seed", args.seed, 0, 2**31 - 1, integer=True)
    from ..files import prepare_out

    prepare_out(args.out)   # before any run: a path that cannot be a folder fails now, in one line
    from ..overopt import generate_library   # torch: without it the CLI names the extra to install

    def progress(done, total):
        print(f"\r{done}/{total} runs", end="", file=sys.stderr, flush=True)

    index = generate_library(args.out, args.runs, seed=args.seed, workers=args.workers, fmt=args.format,
                             progress=progress, steps=args.steps)
    print(file=sys.stderr)
    from ..config import WorkloadConfig

    runs = read_curve_log(os.path.join(args.out, index["curve_log"]))
    floor = WorkloadConfig().noise
    labels = {name: label_run(r, noise_floor=floor) for name, r in runs.items()}
    print(f"wrote {len(runs)} runs to {os.path.join(args.out, index['curve_log'])} in {index['wall_s']:.1f} s "
          f"with {args.workers} workers")
    print(f"hacking runs per setting (labelling rule, noise floor {floor}):")
    print(_setting_table(index["runs"], labels))
    return 0


def _setting_table(settings: list[dict], labels: dict) -> str:
    """Hacking count per (pairs, kl_coef) setting."""
    from ..report import format_table

    groups: dict[tuple, list] = {}
    for s in settings:
        groups.setdefault((s["pairs"], s["kl_coef"]), []).append(labels[s["name"]].hacking)
    rows = [{"pairs": p, "kl_coef": k, "runs": len(h), "hacking": int(sum(h))} for (p, k), h in sorted(groups.items())]
    return format_table(rows, ("pairs", "kl_coef", "runs", "hacking"))


def run_label(args: argparse.Namespace) -> int:
    from ..config import check_range
    from ..curvelog import label_run, read_curve_log
    from ..report import format_table

    check_range("noise_floor", args.noise_floor, 0.0)
    runs = read_curve_log(args.path, args.curves_format)
    rows = []
    for name in sorted(runs):
        lab = label_run(runs[name], noise_floor=args.noise_floor)
        _, s = runs[name].series("eval_score")
        rows.append({"run": name, "hacking": lab.hacking, "start": float(s[0]), "peak": float(s.max()),
                     "last": float(s[-1]), "peak_progress": lab.peak_progress, "drop": lab.drop,
                     "threshold": lab.threshold})
    print(format_table(rows, ("run", "hacking", "start", "peak", "last", "peak_progress", "drop", "threshold")))
    n_hack = sum(r["hacking"] for r in rows)
    print(f"{n_hack} of {len(rows)} runs hacking ({n_hack / len(rows):.0%})")
    return 0


def compare(runs: dict, config, scheduler: str, k: int = 2, seeds: int = 5,
            stoppers: tuple[str, ...] = ("evalstop",), first_seed: int = 0) -> list[dict]:
    """Rows (one per curve source and stopper) of mean and sd metrics over paired seeds
    ``first_seed .. first_seed + seeds - 1``.

    ``logged``: the RLHF jobs take curves and labels from ``runs``. ``calibrated``:
    the calibrated model with ``hacking_fraction`` set to the logged runs' base
    rate (labelled at the config's noise), so precision is compared at equal
    base rates.
    """
    from baselines import make_policy

    from ..api import run_policy
    from ..curvelog import apply_curve_log, label_run
    from ..workload import generate

    rate = float(np.mean([label_run(r, noise_floor=config.noise).hacking for r in runs.values()]))
    arms = {"logged": config, "calibrated": config.replace(hacking_fraction=rate)}
    rows = []
    for source, cfg in arms.items():
        for stopper in ("none", *stoppers):
            per_seed = []
            for seed in range(first_seed, first_seed + seeds):
                w = generate(cfg.replace(seed=seed))
                if source == "logged":
                    w = apply_curve_log(w, runs, seed=seed)
                params = {"k": k} if stopper == "evalstop" else {}
                per_seed.append(run_policy(w, make_policy(scheduler, stopper, **params)))
            row = {"curves": source, "stopper": f"evalstop k={k}" if stopper == "evalstop" else stopper,
                   "hacking_rate": rate}
            for key in ("precision", "recall", "fpr", "avg_jct_h", "compute_waste_gpu_h", "delivered_quality"):
                vals = [m[key] for m in per_seed if m[key] is not None]
                row[key] = float(np.mean(vals)) if vals else None
                row[key + "_sd"] = float(np.std(vals)) if vals else None
            rows.append(row)
    return rows


def run_compare(args: argparse.Namespace) -> int:
    from ..config import ConfigError, WorkloadConfig, check_range
    from ..curvelog import read_curve_log
    from ..report import format_table

    check_range("seeds", args.seeds, 1, integer=True)
    runs = read_curve_log(args.curves, args.curves_format)
    cfg = WorkloadConfig(**workload_kwargs(args))
    scheduler = args.scheduler
    from baselines import STOPPERS

    stoppers = tuple(x.strip() for x in args.stoppers.split(",") if x.strip())
    for x in stoppers:
        if x not in STOPPERS or x == "none":
            raise ConfigError("stoppers", x, f"must be among {', '.join(t for t in STOPPERS if t != 'none')}")
    rows = compare(runs, cfg, scheduler, k=args.k, seeds=args.seeds, stoppers=stoppers, first_seed=args.seed)
    for r in rows:
        for key in ("precision", "recall", "fpr", "avg_jct_h"):
            if r[key] is not None:
                r[key] = f"{r[key]:.3f} ± {r[key + '_sd']:.3f}"
    print(f"{scheduler} base, {cfg.workload}, {cfg.jobs} jobs, {cfg.gpus} GPUs, noise {cfg.noise}, "
          f"{cfg.evals_per_job} evals/job, seeds {args.seed}..{args.seed + args.seeds - 1}; {len(runs)} logged runs, "
          f"{rows[0]['hacking_rate']:.0%} hacking by the labelling rule")
    print(format_table(rows, ("curves", "stopper", "precision", "recall", "fpr", "avg_jct_h",
                              "compute_waste_gpu_h", "delivered_quality")))
    return 0
