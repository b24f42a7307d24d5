"""``evalstop-gym curves``: generate a real overoptimization curve library, label curve logs, and
compare EvalStop's detection on logged curves with the calibrated model's."""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from ..api import DEFAULT_SCHEDULER
from .common import add_workload_flags, workload_kwargs

_EVALS = 10   # WorkloadConfig().evals_per_job, without importing the config at parser build time



def add_parser(sub) -> None:
    from ..curvelog import CURVE_FORMATS

    p = sub.add_parser("curves", help="training-curve logs: generate, label, compare",
                       description="Real training curves: generate a library with the tiny overoptimization "
                                   "generator, label curve logs, and run an E1-style comparison on them.")
    csub = p.add_subparsers(dest="curves_command", required=True, metavar="ACTION")

    g = csub.add_parser("generate", help="run the over-optimisation generator into a curve library",
                        description="Tune a tiny causal transformer language model against a learned reward "
                                    "model and by DPO over a grid of preference-data sizes, KL coefficients, "
                                    "learning rates and reward-model widths (CPU); write OUT/runs/<run>.csv as "
                                    "runs finish (a rerun skips finished runs), then OUT/curves.csv and "
                                    "OUT/runs.json. Backend torch (default, fast): a plain-torch RLOO / DPO "
                                    "loop. Backend trl: TRL's RewardTrainer, GRPOTrainer, RLOOTrainer and "
                                    "DPOTrainer on a Hugging Face GPT-2 built from a config (the live extra).")
    g.add_argument("--out", required=True, metavar="DIR", help="output directory")
    g.add_argument("--backend", choices=("torch", "trl"), default="torch",
                   help="generator: torch (plain-torch loop) or trl (TRL's trainers) (default %(default)s)")
    g.add_argument("--runs", type=int, default=48,
                   help="number of runs: grid point i %% G, seed i // G, G = 24 grid points (default %(default)s)")
    g.add_argument("--steps", type=int, default=None, metavar="N",
                   help="optimiser steps per run (default: the backend's, 160 torch, 120 trl; trl: a multiple "
                        "of its 15 evals)")
    g.add_argument("--eval-items", type=int, default=None, metavar="N",
                   help="held-out prompts of the public eval, its n (default: the backend's, 200 torch, 100 trl)")
    g.add_argument("--dim", type=int, default=None, metavar="D",
                   help="width of the policy model (default: the backend's, 80 trl: 106,560 parameters at 2 "
                        "blocks; the shipped TRL library was made at 32)")
    g.add_argument("--seed", type=int, default=0, help="first seed (default %(default)s)")
    g.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1),
                   help="worker processes, one torch thread each (default %(default)s)")
    g.add_argument("--format", choices=("csv", "jsonl"), default="csv", help="curve-log format (default csv)")
    g.add_argument("--evals", type=int, default=_EVALS, metavar="E",
                   help="checkpoint grid the labels are computed on (default %(default)s, the workload's "
                        "evals per job)")
    g.set_defaults(func=run_generate)

    lab = csub.add_parser("label", help="label each run of a curve log by the documented rule",
                          description="Print each run's hacking label and the counts. Runs that log a dense "
                                      "gold column are labelled from it on the E-checkpoint grid (peak-to-end "
                                      "drop of at least a share of the gain); others from their eval scores.")
    lab.add_argument("path", metavar="PATH", help="curve log: .csv, .jsonl, or a directory (TensorBoard too)")
    lab.add_argument("--evals", type=int, default=_EVALS, metavar="E",
                     help="checkpoint grid of the gold rule (default %(default)s)")
    lab.add_argument("--drop-share", type=float, default=None, metavar="F",
                     help="gold rule: share of the gain the drop must reach (default 0.25)")
    lab.add_argument("--noise-floor", type=float, default=0.0,
                     help="eval-score rule: eval noise the decline must clear besides the log's own "
                          "(default %(default)s)")
    lab.add_argument("--format", dest="curves_format", choices=CURVE_FORMATS, default="auto",
                     help="curve-log format (default: by extension, or TensorBoard for a folder of event files)")
    add_metric_flags(lab, "--metric", "--mode")
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
    c.add_argument("--drop-share", type=float, default=None, metavar="F",
                   help="gold labelling rule: share of the gain the drop must reach (default 0.25)")
    add_metric_flags(c, "--metric", "--mode")
    add_workload_flags(c)
    c.set_defaults(func=run_compare)


def add_metric_flags(p, metric_flag: str, mode_flag: str) -> None:
    """The metric and direction flags of a command that reads logs (:mod:`evalstop_gym.logs.metric`)."""
    p.add_argument(metric_flag, default=None, metavar="NAME",
                   help="the logged metric to use as the eval score (default: the run's own, else the curve "
                        "log's eval_score, else the eval loss, else its only eval metric)")
    p.add_argument(mode_flag, choices=("auto", "min", "max"), default="auto",
                   help="which way it improves (default %(default)s: the run's own, else by its name)")


def load_runs(path, curves_format: str = "auto", metric: str | None = None, mode: str = "auto",
              out=None) -> dict:
    """``{name: LoggedRun}`` of a log (:func:`evalstop_gym.logs.logged.read_runs`; a named ``curves_format``
    reads the curve-log format alone, :func:`~evalstop_gym.curvelog.read_curve_log`); each log refused is
    one line on ``out`` (default stderr), as is the metric and mode the runs are read on."""
    from ..config import UsageError
    from ..curvelog import read_curve_log
    from ..logs.logged import read_runs

    if curves_format != "auto":
        if metric is not None or mode != "auto":
            raise UsageError("choosing the metric or its direction needs the format auto (any log)")
        return read_curve_log(path, curves_format)
    skipped: list = []
    runs = read_runs(path, metric, mode, skipped)
    out = out or sys.stderr
    for e in skipped:
        print(f"skipped: {e}", file=out)
    used = sorted({(r.metric, r.mode) for r in runs.values()})
    print(f"{len(runs)} runs read on " + ", ".join(f"{m} ({d})" for m, d in used)
          + (f"; {len(skipped)} logs skipped" if skipped else ""), file=out)
    return runs


def _progress_bar(total: int):
    """A ``progress(done, total)`` callback: a tqdm bar on stderr, or a plain counter without tqdm."""
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm comes with the experiments extra
        def plain(done, total):
            print(f"\r{done}/{total} runs", end="", file=sys.stderr, flush=True)
        return plain, lambda: print(file=sys.stderr)
    bar = tqdm(total=total, unit="run", file=sys.stderr, dynamic_ncols=True)

    def update(done, _total):
        bar.update(done - bar.n)
    return update, bar.close


def run_generate(args: argparse.Namespace) -> int:
    from ..config import check_range
    from ..curvelog import MAX_EVALS, read_curve_log

    check_range("runs", args.runs, 1, integer=True)
    for name in ("steps", "eval_items", "dim"):
        if getattr(args, name) is not None:
            check_range(name, getattr(args, name), 1, integer=True)
    check_range("workers", args.workers, 1, integer=True)
    check_range("seed", args.seed, 0, 2**31 - 1, integer=True)
    check_range("evals", args.evals, 1, MAX_EVALS, integer=True)
    from ..files import prepare_out

    prepare_out(args.out)   # before any run: a path that cannot be a folder fails now, in one line
    from ..overopt import generate_library   # torch: without it the CLI names the extra to install

    if args.backend == "trl":
        import datasets, tokenizers, transformers, trl  # noqa: E401, F401 - the live extra; missing, the CLI names it

    overrides = {k: v for k, v in (("steps", args.steps), ("eval_items", args.eval_items),
                                                   ("dim", args.dim)) if v is not None}
    progress, close = _progress_bar(args.runs)
    try:
        index = generate_library(args.out, args.runs, seed=args.seed, workers=args.workers, fmt=args.format,
                                 backend_name=args.backend, progress=progress, **overrides)
    finally:
        close()
    runs = read_curve_log(os.path.join(args.out, index["curve_log"]))
    skipped = f", {index['skipped']} already there" if index["skipped"] else ""
    print(f"wrote {len(runs)} runs to {os.path.join(args.out, index['curve_log'])} in {index['wall_s']:.1f} s "
          f"with {index['workers']} workers{skipped}")
    print(f"hacking runs per setting (gold rule on {args.evals} checkpoints):")
    print(setting_table(index["runs"], runs, args.evals))
    return 0


def setting_table(settings: list[dict], runs: dict, evals: int, **label_options) -> str:
    """Hacking count, mean gold at start / peak / end, and mean final KL per (method, pairs, kl_coef)."""
    from ..curvelog import label_run, resample
    from ..report import format_table

    groups: dict[tuple, list] = {}
    for s in settings:
        run = runs[s["name"]]
        start, g = resample(run, "gold", evals)
        groups.setdefault((s["method"], s["pairs"], s["kl_coef"]), []).append(
            (label_run(run, evals=evals, **label_options).hacking, start, g.max(), g[-1], run.extra["kl"][-1]))
    rows = []
    for (method, pairs, kl), vals in sorted(groups.items()):
        v = np.array(vals, dtype=float)
        rows.append({"method": method, "pairs": pairs, "kl_coef": kl, "runs": len(vals),
                     "hacking": int(v[:, 0].sum()), "gold_start": v[:, 1].mean(), "gold_peak": v[:, 2].mean(),
                     "gold_end": v[:, 3].mean(), "kl_end": v[:, 4].mean()})
    return format_table(rows, ("method", "pairs", "kl_coef", "runs", "hacking", "gold_start", "gold_peak",
                               "gold_end", "kl_end"))


def _drop_share(args: argparse.Namespace) -> dict:
    """``{"drop_share": F}`` from ``--drop-share`` if given (checked), else ``{}`` (the rule's default)."""
    from ..config import check_range

    if args.drop_share is None:
        return {}
    check_range("drop_share", args.drop_share, 0.0, 1.0)
    return {"drop_share": args.drop_share}


NO_GOLD = "n/a (no gold)"


def run_label(args: argparse.Namespace) -> int:
    from ..config import check_range
    from ..curvelog import MAX_EVALS, eval_score_shape, has_gold, label_run
    from ..report import format_table

    check_range("evals", args.evals, 1, MAX_EVALS, integer=True)
    check_range("noise_floor", args.noise_floor, 0.0)
    options = {"evals": args.evals, **_drop_share(args)}
    runs = load_runs(args.path, args.curves_format, args.metric, args.mode)
    rows = []
    for name in sorted(runs):
        run = runs[name]
        gold = has_gold(run)
        lab = label_run(run, **options) if gold else eval_score_shape(run, noise_floor=args.noise_floor)
        sign = 1.0 if run.mode == "max" or gold else -1.0   # in the metric's own units
        _, s = run.series("gold" if gold else "eval_score")
        rows.append({"run": name, "metric": "gold" if gold else run.metric, "mode": "max" if gold else run.mode,
                     "hacking": lab.hacking if gold else NO_GOLD, "start": sign * float(s[0]),
                     "peak": sign * float(s.max()), "last": sign * float(s[-1]), "peak_progress": lab.peak_progress,
                     "drop": lab.drop, "threshold": lab.threshold})
    print(format_table(rows, ("run", "metric", "mode", "hacking", "start", "peak", "last", "peak_progress", "drop",
                              "threshold")))
    labelled = [r for r in rows if r["hacking"] != NO_GOLD]
    n_hack = sum(r["hacking"] for r in labelled)
    if labelled:
        print(f"{n_hack} of {len(labelled)} runs hacking ({n_hack / len(labelled):.0%}), by their gold")
    if len(labelled) < len(rows):
        print(f"{len(rows) - len(labelled)} runs without gold: runs hacking {NO_GOLD}, not labelled (a fall of "
              "the eval score may be noise or over-optimisation, only a gold column tells; drop and threshold "
              "describe the shape)")
    return 0


def library_noise(runs: dict) -> float:
    """Root-mean-square eval noise the logged runs carry themselves, measured against their gold (every run
    must log gold: :func:`~evalstop_gym.curvelog.has_all_gold`)."""
    from ..curvelog import eval_noise

    return float(np.sqrt(np.mean([eval_noise(r) ** 2 for r in runs.values()])))


LABEL_METRICS = ("precision", "recall", "fpr")


def compare(runs: dict, config, scheduler: str, k: int = 2, seeds: int = 5,
            stoppers: tuple[str, ...] = ("evalstop",), first_seed: int = 0, **label_options) -> list[dict]:
    """Rows (one per curve source and stopper) of mean and sd metrics over paired seeds
    ``first_seed .. first_seed + seeds - 1``.

    ``logged``: the RLHF jobs take curves and labels from ``runs`` (labels on
    the config's checkpoint grid). ``calibrated``: the calibrated model with
    ``hacking_fraction`` set to the logged runs' base rate, so precision is
    compared at equal base rates, and with the eval noise the logged jobs'
    detectors see (``config.noise`` combined with the logs' own eval noise).
    Runs without gold have no labels: then the logged arm's precision, recall
    and FPR are ``"n/a (no gold)"`` and the calibrated arm keeps ``config``'s
    hacking share and noise. ``label_options`` go to :func:`~evalstop_gym.curvelog.label_run` (e.g. ``drop_share``).
    """
    from evalstop_gym.baselines import make_policy

    from ..api import run_policy
    from ..curvelog import apply_curve_log, has_all_gold, label_run
    from ..workload import generate

    gold = has_all_gold(runs.values())
    if gold:
        rate = float(np.mean([label_run(r, evals=config.evals_per_job, **label_options).hacking
                              for r in runs.values()]))
        calibrated = config.replace(hacking_fraction=rate, noise=float(np.hypot(config.noise, library_noise(runs))))
    else:   # no labels to match: the calibrated arm at its own hacking share and noise
        rate, calibrated = None, config
    arms = {"logged": config, "calibrated": calibrated}
    rows = []
    for source, cfg in arms.items():
        for stopper in ("none", *stoppers):
            per_seed = []
            for seed in range(first_seed, first_seed + seeds):
                w = generate(cfg.replace(seed=seed))
                if source == "logged":
                    w = apply_curve_log(w, runs, seed=seed, **label_options)
                params = {"k": k} if stopper == "evalstop" else {}
                per_seed.append(run_policy(w, make_policy(scheduler, stopper, **params)))
            row = {"curves": source, "stopper": f"evalstop k={k}" if stopper == "evalstop" else stopper,
                   "hacking_rate": rate, "noise": cfg.noise}
            for key in ("precision", "recall", "fpr", "avg_jct_h", "compute_waste_gpu_h", "delivered_quality"):
                vals = [m[key] for m in per_seed if m[key] is not None]
                row[key] = float(np.mean(vals)) if vals else None
                row[key + "_sd"] = float(np.std(vals)) if vals else None
            if source == "logged" and not gold:
                for key in LABEL_METRICS:
                    row[key] = row[key + "_sd"] = NO_GOLD
            rows.append(row)
    return rows


def run_compare(args: argparse.Namespace) -> int:
    from ..config import ConfigError, WorkloadConfig, check_range
    from ..curvelog import has_all_gold
    from ..report import format_table

    check_range("seeds", args.seeds, 1, integer=True)
    runs = load_runs(args.curves, args.curves_format, args.metric, args.mode)
    cfg = WorkloadConfig(**workload_kwargs(args))
    scheduler = args.scheduler
    from evalstop_gym.baselines import STOPPERS

    stoppers = tuple(x.strip() for x in args.stoppers.split(",") if x.strip())
    for x in stoppers:
        if x not in STOPPERS or x == "none":
            raise ConfigError("stoppers", x, f"must be among {', '.join(t for t in STOPPERS if t != 'none')}")
    rows = compare(runs, cfg, scheduler, k=args.k, seeds=args.seeds, stoppers=stoppers, first_seed=args.seed,
                   **_drop_share(args))
    for r in rows:
        for key in ("precision", "recall", "fpr", "avg_jct_h"):
            if isinstance(r[key], float):
                r[key] = f"{r[key]:.3f} ± {r[key + '_sd']:.3f}"
    head = (f"{scheduler} base, {cfg.workload}, {cfg.jobs} jobs, {cfg.gpus} GPUs, noise {cfg.noise}, "
            f"{cfg.evals_per_job} evals/job, seeds {args.seed}..{args.seed + args.seeds - 1}; {len(runs)} logged runs")
    if has_all_gold(runs.values()):
        head += (f", {rows[0]['hacking_rate']:.0%} hacking by the labelling rule; the logs' own eval noise "
                 f"{library_noise(runs):.3f} (against their gold), calibrated arm at noise {rows[-1]['noise']:.3f}")
    else:
        head += (f"; not every run logs gold: the logged arm has no hacking labels, so its precision, recall and "
                 f"FPR are {NO_GOLD}; the calibrated arm at its own hacking share")
    print(head)
    print(format_table(rows, ("curves", "stopper", "precision", "recall", "fpr", "avg_jct_h",
                              "compute_waste_gpu_h", "delivered_quality")))
    return 0
