"""MLflow's file store (``mlruns/<experiment id>/<run id>/``): one run per run folder.

A run folder holds ``meta.yaml`` and ``metrics/``; each metric is a text file
``metrics/<name>`` (a name with ``/`` is a nested path) whose lines are
``<timestamp ms> <value> <step>``. The run is named by its ``tags/mlflow.runName``
file, else its folder. Eval metrics are the keys whose first word is ``val``,
``eval``, ``test`` ... (:func:`evalstop_gym.logs.tables.is_eval_key`); a run that logs none of them
is judged on a metric named with ``--metric``.
"""

from __future__ import annotations

import math
import os

from .record import LogError, RunLog, series_from_rows
from .tables import is_eval_key

MAX_METRIC_LINES = 5_000_000


def is_run_folder(d: str) -> bool:
    return os.path.isfile(os.path.join(d, "meta.yaml")) and os.path.isdir(os.path.join(d, "metrics"))


def read_run(folder: str) -> RunLog:
    from ..files import lines, open_text, walk

    metrics = os.path.join(folder, "metrics")
    rows: dict[float, dict[str, float]] = {}
    for d, files in walk(metrics, LogError, "MLflow metrics folder"):
        for f in files:
            path = os.path.join(d, f)
            key = os.path.relpath(path, metrics).replace(os.sep, "/")
            with open_text(path, LogError, "MLflow metric file") as fh:
                for i, text in enumerate(lines(fh, path, LogError, "MLflow metric file"), start=1):
                    if i > MAX_METRIC_LINES:
                        raise LogError(path, i, f"more than {MAX_METRIC_LINES} lines")
                    parts = text.split()
                    if not parts:
                        continue
                    if len(parts) not in (2, 3):
                        raise LogError(path, i, "expected '<timestamp> <value> <step>'")
                    try:
                        value = float(parts[1])
                        step = float(parts[2]) if len(parts) == 3 else float(i - 1)
                    except ValueError:
                        raise LogError(path, i, f"{text.strip()[:40]!r} is not '<timestamp> <value> <step>'") from None
                    if math.isfinite(value) and math.isfinite(step):
                        rows.setdefault(step, {})[key] = value
    name = os.path.basename(os.path.abspath(folder))
    tag = os.path.join(folder, "tags", "mlflow.runName")
    if os.path.isfile(tag):
        with open_text(tag, LogError, "MLflow tag") as fh:
            name = fh.read(200).strip() or name
    series = series_from_rows(rows)
    return RunLog(name=name, source=folder, fmt="mlflow", series=series,
                  evals=tuple(sorted(k for k in series if is_eval_key(k))))
