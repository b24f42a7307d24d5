"""``evalstop-gym bench``: score policies on a versioned suite (evalstop_gym.bench, docs/bench.md)."""

from __future__ import annotations

import argparse
import shlex
import sys

ORDER = 25


def add_parser(sub) -> None:
    p = sub.add_parser(
        "bench", help="score policies on the versioned benchmark suite, with paired CIs",
        description="Play each policy and the reference arms (SRTF-Est without a stopper; with EvalStop k=2; "
                    "with --tune or --tuned, the tuned best) on every row of the suite, on its fixed test seeds; "
                    "print the scorecard and write OUT/results.json and OUT/bench.md. Finished runs in "
                    "OUT/runs.jsonl are reused, so an interrupted bench resumes. With --leaderboard, instead "
                    "build the leaderboard from results files; with --leaderboard-run, regenerate it from "
                    "nothing (tune, score every tuned family and built-in pair, write the leaderboard).")
    p.add_argument("verify", nargs="*", metavar="verify RESULTS_JSON",
                   help="play the policies of a results file again from nothing and compare every cell (exit 1 "
                        "if any differs)")
    p.add_argument("--suite", default=None, metavar="NAME", help="suite version (default: the newest, v3)")
    p.add_argument("--policy", action="append", default=[], metavar="POLICY",
                   help="SCHEDULER+STOPPER[:k=v,...], STOPPER, SCHEDULER, module:Class, or a saved model folder; "
                        "repeat for several")
    p.add_argument("--out", default="bench-results", metavar="DIR", help="output folder (default %(default)s/)")
    p.add_argument("--workers", type=int, default=1, help="parallel workers (default %(default)s)")
    p.add_argument("--backend", default="local", metavar="NAME", help="local or ray (default %(default)s)")
    p.add_argument("--ray-address", default=None, metavar="HOST:PORT",
                   help="with --backend ray: an existing Ray cluster (default $RAY_ADDRESS, else a local Ray)")
    p.add_argument("--tune", action="store_true",
                   help="first tune every stopper family with the same budget on validation seeds (needs optuna)")
    p.add_argument("--per-scheduler", action="store_true",
                   help="with --tune or --leaderboard-run: tune each scheduler and stopper pair on its own, with the "
                        "whole budget (7 times the trials), instead of searching the scheduler with the parameters")
    p.add_argument("--budget", type=int, default=None, metavar="N", help="trials per family with --tune (default 100; a learned family's in "
                        "--leaderboard-run: 12, each a training run)")
    p.add_argument("--tuned", default=None, metavar="RESULTS_JSON",
                   help="take the tuned-best reference from an earlier `bench --tune` results file")
    p.add_argument("--trust", action="append", default=[], metavar="RESULTS_JSON",
                   help="let the --tuned file name module:Class policies not given with --policy (their modules are "
                        "imported: name only files you wrote); recorded in the results")
    p.add_argument("--leaderboard", nargs="+", default=None, metavar="RESULTS_JSON",
                   help="write the leaderboard of these comparable results files (to --leaderboard-out)")
    p.add_argument("--leaderboard-out", default=None, metavar="FILE",
                   help="where --leaderboard writes (default: prints it; an existing file is replaced only when "
                        "named here); with --leaderboard-run, a copy of OUTDIR/leaderboard.md")
    p.add_argument("--leaderboard-run", default=None, metavar="OUTDIR",
                   help="regenerate the leaderboard from nothing in OUTDIR, resumably: --tune, then every tuned "
                        "family and built-in pair, then OUTDIR/leaderboard.md (docs/bench.md)")
    p.add_argument("--learned", action="store_true",
                   help="with --leaderboard-run: also train the shipped learned recipes (or reuse them from "
                        "OUTDIR/learned/models) and score them (needs the rl extra)")
    p.add_argument("--in-process", action="store_true",
                   help="play module:Class policies and saved models beside the simulator instead of in their own "
                        "processes: faster, but such code can read what the simulator hides; the results say so "
                        "(docs/bench.md)")
    p.add_argument("--quiet", action="store_true", help="no progress bar, no scorecard on stdout")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..bench.suite import DEFAULT_SUITE
    from ..config import UsageError

    suite_name = args.suite or DEFAULT_SUITE
    if args.verify:
        return _verify(args)
    if args.learned and args.leaderboard_run is None:
        raise UsageError("--learned goes with --leaderboard-run")
    if args.leaderboard_run is not None:
        from ..bench.regenerate import regenerate

        clash = [flag for flag, given in (("--policy", args.policy), ("--tune", args.tune), ("--tuned", args.tuned),
                                          ("--trust", args.trust), ("--leaderboard", args.leaderboard is not None),
                                          ("--out", args.out != "bench-results")) if given]
        if clash:
            raise UsageError(f"--leaderboard-run chooses its own policies, tuning and folders: drop {', '.join(clash)}")
        if args.leaderboard_out == "-":
            raise UsageError("--leaderboard-run writes OUTDIR/leaderboard.md; --leaderboard-out names a copy, not -")
        regenerate(args.leaderboard_run, suite_name=suite_name, budget=args.budget, learned=args.learned,
                   backend=args.backend, workers=args.workers, ray_address=args.ray_address,
                   progress=not args.quiet, leaderboard_out=args.leaderboard_out, command=_typed(args),
                   per_scheduler=args.per_scheduler)
        return 0
    if args.leaderboard is not None:
        from ..bench.results import leaderboard

        if args.policy or args.trust:
            raise UsageError("--leaderboard builds from results files: give no --policy or --trust with it")
        from ..files import write_atomic

        text = leaderboard(args.leaderboard)
        target = args.leaderboard_out or "-"   # docs/ is replaced only when named
        if target == "-":
            print(text, end="")
        else:   # all or nothing: a full disk keeps the old page
            write_atomic(target, text, field="leaderboard-out")
            print(f"wrote {target}", file=sys.stderr)
        return 0
    if not args.policy:
        raise UsageError("name at least one --policy (or build a --leaderboard)")
    if args.trust and args.tuned is None:
        raise UsageError("--trust names the --tuned file whose modules may be imported: give --tuned too")
    from ..bench import run_bench

    run_bench(args.policy, suite_name=suite_name, out=args.out, backend=args.backend, workers=args.workers,
              ray_address=args.ray_address, progress=not args.quiet, tune=args.tune, tuned=args.tuned,
              budget=args.budget, command=_typed(args), trust=args.trust,
              echo=(lambda _t: None) if args.quiet else print, in_process=args.in_process,
              per_scheduler=args.per_scheduler)
    return 0


def _verify(args: argparse.Namespace) -> int:
    from ..bench.verify import verify
    from ..config import UsageError

    if args.verify[0] != "verify" or len(args.verify) != 2:
        raise UsageError(f"bench takes no positional arguments but `verify RESULTS_JSON`; got {' '.join(args.verify)}")
    clash = [flag for flag, given in (("--policy", args.policy), ("--tune", args.tune), ("--tuned", args.tuned),
                                      ("--leaderboard", args.leaderboard is not None), ("--suite", args.suite),
                                      ("--leaderboard-run", args.leaderboard_run), ("--in-process", args.in_process))
             if given]
    if clash:
        raise UsageError(f"verify replays what the results file says: drop {', '.join(clash)}")
    ok = verify(args.verify[1], out=None if args.out == "bench-results" else args.out, backend=args.backend,
                workers=args.workers, ray_address=args.ray_address, progress=not args.quiet)
    return 0 if ok else 1


def _typed(args: argparse.Namespace) -> str:
    """The command as typed (recorded in the results); called as a function, its main flags alone."""
    if sys.argv[1:2] == ["bench"]:
        typed = sys.argv[2:]
    elif args.leaderboard_run is not None:
        typed = ["--leaderboard-run", args.leaderboard_run, *(["--learned"] if args.learned else [])]
    else:
        typed = [a for p in args.policy for a in ("--policy", p)]
    return " ".join(["evalstop-gym bench", *map(shlex.quote, typed)])
