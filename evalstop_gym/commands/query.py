"""``evalstop-gym query "SQL"``: SQL over a results folder's ``runs.parquet`` with DuckDB (the ``query`` extra)."""

from __future__ import annotations

import argparse

ORDER = 22
DEFAULT_RUNS = "results/paper/runs.parquet"


def add_parser(sub) -> None:
    p = sub.add_parser(
        "query", help="run SQL over the runs of a results folder (runs.parquet) with DuckDB",
        description="Run one SQL statement with DuckDB; the table `runs` is the file given by --runs (one row "
                    "per run: its setup, the experiments that use it and its metrics; docs/reliability.md lists "
                    "the columns). Column names with a dot need double quotes: \"workload.noise\". Example: "
                    "SELECT stopper, round(avg(avg_jct_h), 2) AS avg_jct_h FROM runs WHERE "
                    "list_contains(experiments, 'E1') GROUP BY stopper ORDER BY avg_jct_h")
    p.add_argument("sql", metavar="SQL", help="the statement; `runs` names the table")
    p.add_argument("--runs", default=DEFAULT_RUNS, metavar="FILE",
                   help="a runs.parquet written by reproduce (default %(default)s)")
    p.add_argument("--csv", action="store_true", help="print CSV instead of an aligned table")
    p.set_defaults(func=run)


def query(sql: str, runs: str = DEFAULT_RUNS) -> tuple[list[str], list[tuple]]:
    """Column names and rows of ``sql`` run over ``runs`` (a ``runs.parquet``), which it calls ``runs``."""
    import os

    from ..config import ConfigError, UsageError
    from ..extras import missing_extra

    if not os.path.isfile(runs):
        raise ConfigError("runs", runs, "must be a runs.parquet file written by `evalstop-gym reproduce`")
    try:
        import duckdb
    except ModuleNotFoundError as e:
        raise missing_extra(e, "query") from None
    con = duckdb.connect()
    try:
        con.read_parquet(runs).create_view("runs")
    except duckdb.Error as e:
        con.close()
        raise ConfigError("runs", runs, f"is not a readable Parquet file ({_first_line(e)})") from None
    try:
        rel = con.sql(sql)
        if rel is None:    # a statement with no result (SET, CREATE ...)
            return [], []
        return list(rel.columns), rel.fetchall()
    except duckdb.Error as e:
        raise UsageError(f"{_first_line(e)} (in: {sql})") from None
    finally:
        con.close()


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def run(args: argparse.Namespace) -> int:
    import csv
    import sys

    from tabulate import tabulate

    columns, rows = query(args.sql, args.runs)
    if args.csv:
        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(columns)
        w.writerows(rows)
    elif columns:
        print(tabulate(rows, headers=columns, tablefmt="simple", disable_numparse=True, missingval="NULL"))
    return 0
