"""Tables of logged values, one row per logged step: CSV and JSONL files.

======================================  =========================  ===========================================
file                                    step column                eval metrics
======================================  =========================  ===========================================
the project's curve log (``job``,       ``step``                   ``eval_score``; one run per ``job``
``step``, ``eval_score`` columns;                                  (:mod:`evalstop_gym.curvelog`)
:mod:`evalstop_gym.curvelog`)
Lightning ``CSVLogger`` ``metrics.csv``  ``step``                   keys whose first word is ``val``,
                                                                   ``valid``, ``validation``, ``eval``,
                                                                   ``test`` or ``dev`` (``val_loss``,
                                                                   ``val/acc``)
Ray Tune ``progress.csv`` /              ``training_iteration``     every reported metric (Tune's own
``result.json`` (JSON lines)                                       bookkeeping columns and ``config/*`` not)
W&B history CSV export                   ``_step``                  as Lightning's
any other CSV / JSONL                    ``step``, ``global_step``,  as Lightning's
                                         ``trainer/global_step``,
                                         ``_step`` or ``epoch``
======================================  =========================  ===========================================

Rows of one step merge (Lightning writes its train and its validation values
on separate rows of the same step); a blank cell, ``null``, ``nan`` or a
non-numeric cell is "not logged". One file is one run, named by the folder
holding it (Lightning's ``version_N``, a Tune trial's folder) for the fixed
file names, else by the file name.
"""

from __future__ import annotations

import math
import os

from ..direction import words
from .record import LogError, RunLog, series_from_rows

STEP_COLUMNS = ("step", "global_step", "trainer/global_step", "_step", "Step", "training_iteration", "epoch")
EVAL_WORDS = ("eval", "val", "valid", "validation", "test", "dev")
TUNE_BOOKKEEPING = ("training_iteration", "time_this_iter_s", "time_total_s", "timestamp", "done", "trial_id",
                    "date", "pid", "hostname", "node_ip", "time_since_restore", "iterations_since_restore",
                    "timesteps_since_restore", "timesteps_total", "episodes_total", "experiment_id",
                    "experiment_tag", "should_checkpoint", "checkpoint_dir_name", "episode_reward_max")
MAX_COLUMNS = 10_000


def is_eval_key(key: str) -> bool:
    """Whether a logged key names an evaluation (its first word is one of :data:`EVAL_WORDS`)."""
    ws = words(key)
    return bool(ws) and ws[0] in EVAL_WORDS


def _float(v) -> float:
    if isinstance(v, bool) or v is None:
        return math.nan
    try:
        x = float(v)
    except (TypeError, ValueError, OverflowError):
        return math.nan
    return x if math.isfinite(x) else math.nan


def _records(path: str):
    """``(line, {column: raw value})`` of a CSV (header row) or JSONL file."""
    from ..curvelog import json_objects
    from ..files import csv_rows, open_text

    stem = path[:-3] if path.endswith(".gz") else path
    with open_text(path, LogError, "log") as f:
        if stem.endswith(".csv"):
            rows = csv_rows(f, path, LogError, "log")
            _, header = next(rows, (None, None))
            if not header or not any(h.strip() for h in header):
                raise LogError(path, None, "the file is empty (a header row and value rows are needed)")
            if len(header) > MAX_COLUMNS:
                raise LogError(path, 1, f"{len(header)} columns, more than {MAX_COLUMNS}")
            header = [h.strip() for h in header]
            for line, row in rows:
                if row and any(c.strip() for c in row):
                    if len(row) != len(header):
                        raise LogError(path, line, f"{len(row)} fields, the header has {len(header)}")
                    yield line, dict(zip(header, row))
            return
        for i, record in json_objects(f, path, LogError):
            yield i, _flatten(record)


def _flatten(record: dict, prefix: str = "") -> dict:
    """Nested objects (Tune's ``config``, W&B's summaries) as ``a/b`` keys."""
    out = {}
    for k, v in record.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}/"))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _kind(path: str, columns: set[str]) -> str:
    base = os.path.basename(path)
    if {"job", "step", "eval_score"} <= columns:
        return "curvelog"
    if base in ("progress.csv", "result.json") or "training_iteration" in columns:
        return "tune"
    if base == "metrics.csv":
        return "lightning"
    if "_step" in columns:
        return "wandb"
    return "table"


def read_table(path: str) -> list[RunLog]:
    """The run(s) of one CSV / JSONL log (module docstring)."""
    stem = path[:-3] if path.endswith(".gz") else path
    if not stem.endswith((".csv", ".jsonl")) and os.path.basename(path) != "result.json":
        raise LogError(path, None, "unknown curve-log type: name it .csv or .jsonl (.gz allowed), "
                                   "trainer_state.json or result.json, give a folder (mlruns/, TensorBoard), or "
                                   "give its format (--format / --curves-format csv|jsonl|tensorboard)")
    records = list(_records(path))
    if not records:
        raise LogError(path, None, "no rows")
    columns = set().union(*(r.keys() for _, r in records))
    kind = _kind(path, columns)
    if kind == "curvelog":
        return _curvelog_runs(path)
    step_col = next((c for c in STEP_COLUMNS if c in columns), None)
    if step_col is None:
        shown = ", ".join(sorted(columns))
        raise LogError(path, 1, f"no step column ({', '.join(STEP_COLUMNS)}); columns: "
                                f"{shown if len(shown) <= 200 else shown[:200] + '...'}")
    rows: dict[float, dict[str, float]] = {}
    for line, r in records:
        step = _float(r.get(step_col))
        if math.isnan(step):
            continue
        values = {k: _float(v) for k, v in r.items() if k not in STEP_COLUMNS and not k.startswith("config/")}
        rows.setdefault(step, {}).update({k: v for k, v in values.items() if not math.isnan(v)})
    series = series_from_rows(rows)
    if kind == "tune":
        evals = [k for k in series if k not in TUNE_BOOKKEEPING]
    else:
        evals = [k for k in series if is_eval_key(k)]
    return [RunLog(name=_name(path), source=path, fmt=kind, series=series, evals=tuple(sorted(evals)))]


def _name(path: str) -> str:
    base = os.path.basename(path)
    if base in ("metrics.csv", "progress.csv", "result.json"):
        return os.path.basename(os.path.dirname(os.path.abspath(path))) or base
    for ext in (".csv.gz", ".jsonl.gz", ".csv", ".jsonl"):
        if base.endswith(ext):
            return base[:-len(ext)]
    return base


def _curvelog_runs(path: str) -> list[RunLog]:
    """The project's curve log, read by :func:`evalstop_gym.curvelog.read_curve_log` (its checks and
    rules), one :class:`RunLog` per ``job``."""
    from ..curvelog import CurveLogError, read_curve_log

    try:
        logged = read_curve_log(path)
    except CurveLogError as e:
        raise LogError(e.path, e.line, e.problem) from None
    out = []
    for name, run in logged.items():
        cols = {"eval_score": run.eval_score, "train_loss": run.train_loss, "proxy_reward": run.proxy_reward,
                **run.extra}
        rows: dict[float, dict[str, float]] = {}
        for c, v in cols.items():
            for s, x in zip(run.step, v):
                rows.setdefault(float(s), {})[c] = float(x)
        out.append(RunLog(name=name, source=path, fmt="curvelog", series=series_from_rows(rows),
                          evals=("eval_score",)))
    return out
