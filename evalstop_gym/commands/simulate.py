"""``evalstop-gym simulate``: one episode, metrics as a table or one JSON object."""

from __future__ import annotations

import argparse
import json

from .common import add_policy_flags, add_workload_flags, policy_kwargs, workload_kwargs

ORDER = 10


def add_parser(sub) -> None:
    p = sub.add_parser("simulate", help="run one episode and print its metrics",
                       description="Run one episode of a policy on a workload and print its metrics.")
    add_workload_flags(p)
    add_policy_flags(p)
    p.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..api import simulate
    from ..report import format_metrics

    metrics = simulate(args.scheduler, args.stopper, **workload_kwargs(args), **policy_kwargs(args))
    if args.json:
        print(json.dumps(metrics, sort_keys=True))
    else:
        print(format_metrics(metrics, title=f"{args.scheduler} + {args.stopper} on {args.workload}, "
                                            f"seed {args.seed}"))
    return 0
