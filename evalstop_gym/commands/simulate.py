"""``evalstop-gym simulate``: one episode, metrics as a table or one JSON object.

With ``--trace`` the jobs' arrivals, run times and GPU demands come from a
real cluster trace (:mod:`evalstop_gym.traces`); with ``--curves`` the RLHF
jobs' curves and labels come from a training-curve log
(:mod:`evalstop_gym.curvelog`). A one-line summary of what the replay read,
skipped and filtered goes to stderr, so ``--json`` output stays one object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from .common import LazyChoices, add_policy_flags, add_workload_flags, policy_kwargs, workload_kwargs

ORDER = 10


def add_parser(sub) -> None:
    traces, curvelog = "evalstop_gym.traces", "evalstop_gym.curvelog"  # imported only when used
    p = sub.add_parser("simulate", help="run one episode and print its metrics",
                       description="Run one episode of a policy on a workload and print its metrics.")
    add_workload_flags(p)
    p.add_argument("--estimate-error", type=float, default=None, metavar="SIGMA",
                   help="sigma of the log-normal error of users' length estimates, generated or replayed "
                        "(--trace) jobs; 0: exact estimates, so srtf-est is SRTF (default 0.5)")
    add_policy_flags(p)
    from evalstop_gym.baselines.ties import DEFAULT_TIE, TIE_RULES

    p.add_argument("--tie", choices=TIE_RULES, default=DEFAULT_TIE,
                   help="the base scheduler's order among jobs of equal key: running (running jobs first, then by "
                        "last queue entry) or arrival (by arrival, as Tiresias' simulator); default %(default)s "
                        "(docs/parity.md)")
    t = p.add_argument_group("trace replay (docs/traces.md)")
    t.add_argument("--trace", metavar="PATH", default=None,
                   help="replay a job trace (CSV); --jobs is then not used, see --trace-jobs")
    t.add_argument("--trace-format", choices=LazyChoices(traces, "TRACE_FORMATS"), default=None, metavar="FORMAT",
                   help="trace layout: %(choices)s (default philly)")
    t.add_argument("--on-bad-row", choices=LazyChoices(traces, "BAD_ROW_MODES"), default=None, metavar="MODE",
                   help="a bad trace row is an error (default) or is skipped and counted: %(choices)s")
    t.add_argument("--trace-jobs", type=int, default=None, metavar="N",
                   help="replay the first N jobs of the window (default: all)")
    t.add_argument("--trace-sample", action="store_true",
                   help="with --trace-jobs: a seeded random sample of N jobs instead of the first N")
    t.add_argument("--trace-window", default=None, metavar="START:END",
                   help="hours since the trace's first submit, e.g. 0:168 (either side may be empty)")
    t.add_argument("--trace-rescale", choices=LazyChoices(traces, "RESCALE_MODES"), default=None, metavar="MODE",
                   help="fit the trace to the cluster: scale arrival times to --load on --gpus (arrivals, "
                        "default), size the cluster for --load at recorded times (cluster), or neither (none)")
    t.add_argument("--trace-gpu-scale", default=None, metavar="X|fit",
                   help="multiply GPU demands by X (rounded half up, >= 1), or 'fit' the largest to --gpus "
                        "(default 1)")
    t.add_argument("--trace-min-duration", type=float, default=None, metavar="SECONDS",
                   help="filter out (and count) jobs that ran less than this (default 1)")
    c = p.add_argument_group("curve replay (docs/traces.md)")
    c.add_argument("--curves", metavar="PATH", default=None,
                   help="RLHF jobs take curves and hacking labels from this curve log "
                        "(.csv, .jsonl, or a directory of them or of TensorBoard event files)")
    c.add_argument("--curves-format", choices=LazyChoices(curvelog, "CURVE_FORMATS"), default=None,
                   metavar="FORMAT", help="%(choices)s (default auto)")
    c.add_argument("--curves-metric", default=None, metavar="NAME",
                   help="the logged metric the jobs replay (default: each run's own, else eval_score, else the "
                        "eval loss, else its only eval metric)")
    c.add_argument("--curves-mode", choices=("auto", "min", "max"), default=None,
                   help="which way that metric improves (default auto: the run's own, else by its name)")
    p.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    p.set_defaults(func=run)


# flags that only mean something beside another: (dest, flag, the flag it needs, default)
_DEPENDENT_FLAGS = (("trace_format", "--trace-format", "trace", "philly"),
                    ("on_bad_row", "--on-bad-row", "trace", "error"),
                    ("trace_jobs", "--trace-jobs", "trace", None),
                    ("trace_sample", "--trace-sample", "trace", False),
                    ("trace_window", "--trace-window", "trace", None),
                    ("trace_rescale", "--trace-rescale", "trace", "arrivals"),
                    ("trace_gpu_scale", "--trace-gpu-scale", "trace", "1"),
                    ("trace_min_duration", "--trace-min-duration", "trace", 1.0),
                    ("curves_format", "--curves-format", "curves", "auto"),
                    ("curves_metric", "--curves-metric", "curves", None),
                    ("curves_mode", "--curves-mode", "curves", "auto"))


def check_dependent_flags(args: argparse.Namespace) -> None:
    """Refuse a flag given without the flag it modifies (it would do nothing); fill in its default."""
    from ..config import UsageError

    for dest, flag, needs, default in _DEPENDENT_FLAGS:
        given = getattr(args, dest)
        if given is not None and given is not False and not getattr(args, needs):   # 0 is a value given
            raise UsageError(f"{flag} does nothing without --{needs}")
        if given is None:
            setattr(args, dest, default)
    if args.trace_sample and args.trace_jobs is None:
        raise UsageError("--trace-sample does nothing without --trace-jobs")


def gpu_scale_arg(text: str) -> float | str:
    from ..config import ConfigError

    if text == "fit":
        return "fit"
    try:
        return float(text)
    except ValueError:
        raise ConfigError("trace_gpu_scale", text, "must be a number > 0 or 'fit'") from None


def build_workload(args: argparse.Namespace):
    """The episode's workload: generated, or replayed from ``--trace``; curves from ``--curves``; its
    description; and whether its hacking labels are measured (False: runs from ``--curves`` without gold)."""
    from ..config import WorkloadConfig
    from ..workload import generate

    if args.trace:
        from ..traces import read_trace, replay_trace, trace_config

        cfg = trace_config(**workload_kwargs(args))
    else:
        cfg = WorkloadConfig(**workload_kwargs(args))
    what = cfg.workload
    if args.trace:

        table = read_trace(args.trace, args.trace_format, on_bad_row=args.on_bad_row,
                           min_duration_s=args.trace_min_duration)
        w, report = replay_trace(table, cfg, jobs=args.trace_jobs, window=args.trace_window,
                                 sample=args.trace_sample, rescale=args.trace_rescale,
                                 gpu_scale=gpu_scale_arg(args.trace_gpu_scale), on_bad_row=args.on_bad_row)
        print(report.summary(), file=sys.stderr)
        what = f"trace {os.path.basename(args.trace)} ({cfg.workload} mix)"
    else:
        w = generate(cfg)
    if args.curves:
        from ..curvelog import apply_curve_log, has_all_gold
        from .curves import NO_GOLD, load_runs

        runs = load_runs(args.curves, args.curves_format, args.curves_metric, args.curves_mode)
        w = apply_curve_log(w, runs, seed=cfg.seed)
        labelled = has_all_gold(runs.values())
        labels = (f"{int(w.hacking.sum())} hacking jobs by the gold rule" if labelled else
                  f"not every run logs gold: no hacking labels, detection figures {NO_GOLD}")
        print(f"curves: {len(runs)} logged runs from {args.curves} on the RLHF jobs ({labels})", file=sys.stderr)
        return w, what + ", logged curves", labelled
    return w, what, True


# the metrics that count hacking jobs: unmeasurable when the replayed runs carry no gold
DETECTION_METRICS = ("precision", "recall", "fpr", "f1", "detection_delay_evals", "true_positives",
                     "false_positives", "false_negatives")


def without_labels(metrics: dict) -> dict:
    """``metrics`` with the detection figures "n/a (no gold)" (the replayed runs do not all log gold)."""
    from .curves import NO_GOLD

    return {**metrics, **{k: NO_GOLD for k in DETECTION_METRICS if k in metrics}}


def run(args: argparse.Namespace) -> int:
    check_dependent_flags(args)

    from evalstop_gym.baselines import make_policy

    policy = make_policy(args.scheduler, args.stopper, tie=args.tie, **policy_kwargs(args))
    if args.trace or args.curves:
        from ..api import run_policy

        w, what, labelled = build_workload(args)
        metrics = run_policy(w, policy)
        if not labelled:
            metrics = without_labels(metrics)
    else:
        from ..api import simulate

        what = args.workload
        metrics = simulate(policy, **workload_kwargs(args))
    if args.json:
        print(json.dumps(metrics, sort_keys=True, allow_nan=False))
    else:
        from ..report import format_metrics

        print(format_metrics(metrics, title=f"{args.scheduler} + {args.stopper} on {what}, seed {args.seed}"))
    return 0
