"""``evalstop-gym shape TRACE --out FILE``: fit a trace's shape, a summary that may ship where the trace may not."""

from __future__ import annotations

import argparse

ORDER = 23


def add_parser(sub) -> None:
    from ..commands.common import LazyChoices

    p = sub.add_parser(
        "shape", help="fit the shape of a job trace (quantiles that replace it where it cannot be shipped)",
        description="Read every valid row of a job trace and write its shape (evalstop_gym.trace_shape): "
                    "quantiles of its submit times, its GPU demands, run times per demand band and tenant "
                    "shares, with the trace's SHA-256 and this command. A bench row or load_trace(..., 'shape') "
                    "then draws jobs from the shape. docs/traces.md says what a shape keeps and what it loses.")
    p.add_argument("trace", metavar="TRACE", help="the trace file (CSV, gzip'd or not)")
    p.add_argument("--format", choices=LazyChoices("evalstop_gym.traces", "TRACE_FORMATS"), default="philly",
                   metavar="FORMAT", help="trace layout: %(choices)s (default %(default)s)")
    p.add_argument("--out", required=True, metavar="FILE", help="where the shape goes (JSON)")
    p.add_argument("--licence", default="", metavar="TEXT", help="the trace's licence and source, recorded")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import json
    import os

    from ..traces import read_trace
    from ..trace_shape import file_sha256, fit_shape

    table = read_trace(args.trace, args.format, on_bad_row="skip")
    command = f"evalstop-gym shape {os.path.basename(args.trace)} --format {args.format} --out " \
              f"{os.path.basename(args.out)}" + (f" --licence {json.dumps(args.licence)}" if args.licence else "")
    shape = fit_shape(table, source=os.path.basename(args.trace), sha256=file_sha256(args.trace),
                      command=command, licence=args.licence)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(shape, f, indent=1)
        f.write("\n")
    bands = ", ".join(f"{b['min_gpus']}-{b['max_gpus'] or 'up'} GPUs: {b['jobs']}" for b in shape["bands"])
    print(f"wrote {args.out}: the shape of {shape['jobs']} jobs ({bands}; {len(shape['tenants'])} tenants)")
    return 0
