"""``evalstop-gym reproduce``: the paper's experiment suite (E1-E10) over N seeds."""

from __future__ import annotations

import argparse
import sys

from .common import MAX_SEEDS, add_workload_flags, seed_count, workload_kwargs

ORDER = 20


def add_parser(sub) -> None:
    from ..experiments.spec import EXPERIMENTS

    listing = "; ".join(f"{name}: {title}" for name, (title, _) in EXPERIMENTS.items())
    p = sub.add_parser(
        "reproduce", help="run the experiment suite E1-E10 and write tables and plots",
        description="Run the paper's experiments over N seeds (seeds SEED..SEED+N-1) on the workload "
                    "below (each experiment overrides the variable it sweeps); print each table and write "
                    "OUT/<E>.md, .csv, .png and OUT/summary.md (which keeps the experiments of earlier runs "
                    "into OUT). Finished runs in OUT/runs.jsonl are reused, so an interrupted run resumes. "
                    "OUT holds one world: a folder holding another workload, calibration or seed range is "
                    f"refused unless --force. Experiments: {listing}.")
    p.add_argument("--experiments", default="all", metavar="LIST",
                   help="comma-separated experiment names, or 'all' (default %(default)s)")
    p.add_argument("--seeds", type=int, default=10,
                   help=f"seeds per point (default %(default)s, at most {MAX_SEEDS})")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="output folder (default results/CALIBRATION/, or results/CALIBRATION-SCALE/ with --scale)")
    p.add_argument("--force", action="store_true",
                   help="replace the tables of another world in --out instead of refusing")
    p.add_argument("--backend", default="local", metavar="NAME",
                   help="local (process pool) or ray (a local Ray) (default %(default)s)")
    p.add_argument("--workers", type=int, default=None, help="parallel workers (default: CPU count)")
    p.add_argument("--ray-address", default=None, metavar="HOST:PORT",
                   help="with --backend ray: run on this existing Ray cluster (default $RAY_ADDRESS, "
                        "else start a local Ray)")
    p.add_argument("--base-scheduler", default=None, metavar="NAME",
                   help="base scheduler of E1 and the sweeps (default srtf-est, the paper's base)")
    p.add_argument("--detectors", default=None, metavar="LIST",
                   help="comma-separated detectors to compare with EvalStop (default: every registered "
                        "stopper other than none, evalstop, stopat, lossplateau)")
    p.add_argument("--max-runs", type=int, default=None, metavar="N",
                   help="stop after N new runs; run again to resume (default: run all)")
    p.add_argument("--model", default=None, metavar="PATH",
                   help="a model saved by `evalstop-gym train` (folder or model.zip): adds a learned row to "
                        "E1 and E3 (needs the rl extra)")
    p.add_argument("--scale", default="default", metavar="NAME",
                   help="size of the base workload: default (--jobs, --gpus) or large (5,000 jobs on "
                        "1,024 GPUs, replacing --jobs and --gpus; about 1,600 runs with 10 seeds; docs/scale.md)")
    p.add_argument("--strict", action="store_true",
                   help="exit 1 if a claim differs from the paper in a way the docs do not explain (the verdict "
                        "block at the end lists them)")
    p.add_argument("--no-progress", "--quiet", dest="no_progress", action="store_true",
                   help="no progress bar (also off when stderr is not a terminal)")
    add_workload_flags(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..config import ConfigError, UsageError, WorkloadConfig
    from ..experiments import parse_names, reproduce
    from ..experiments.suite import SCALES, default_out

    if args.scale not in SCALES:
        raise ConfigError("scale", args.scale, f"must be one of {', '.join(SCALES)}")
    wl = {**workload_kwargs(args), **SCALES[args.scale]}
    first_seed = wl.pop("seed")
    detectors = args.detectors and [d.strip() for d in args.detectors.split(",") if d.strip()]
    base = WorkloadConfig(**wl)
    out = default_out(base, args.scale) if args.out is None else args.out
    try:
        result = reproduce(parse_names(args.experiments), seeds=seed_count(args.seeds), first_seed=first_seed,
                           out=out, base=base, backend=args.backend, workers=args.workers,
                           base_scheduler=args.base_scheduler, detectors=detectors, max_runs=args.max_runs,
                           progress=not args.no_progress, model=args.model, ray_address=args.ray_address,
                           force=args.force)
    except OSError as e:   # writing tables or plots (a full disk): finished runs are on disk already
        raise UsageError(f"cannot write to {e.filename or out} ({e.strerror or e}); finished runs are kept "
                         f"in {out}/runs.jsonl: fix that and run the same command again") from None
    except KeyboardInterrupt:
        print(f"\ninterrupted: finished runs are kept in {out}/runs.jsonl; run the same command again "
              "to resume", file=sys.stderr)
        return 130
    if args.strict and result.unexpected:
        print(f"reproduce --strict: {result.unexpected} claims differ unexpectedly (listed above)", file=sys.stderr)
        return 1
    return 0
