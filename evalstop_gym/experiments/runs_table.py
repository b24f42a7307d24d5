"""``runs.parquet``: every finished run of a results folder as one row, under a declared schema.

The checksummed JSONL (:class:`~evalstop_gym.experiments.runner.ResultStore`) stays the record that
runs append to; this table is a snapshot of it for pandas, DuckDB and SQL. Its columns are fixed
(:data:`COLUMNS`, :func:`schema`), not read off the first row, so a column that the first run lacks
(a cluster on a flat pool's row) is still there, null where a run has no value:

* ids: ``run_id``, ``code``, ``checksum``;
* ``experiments``: the experiments of the folder that use the run (a list: ``E1`` and ``E2`` share
  runs), so ``WHERE list_contains(experiments, 'E1')`` selects a table's runs;
* the policy: ``scheduler``, ``stopper``, ``params`` (JSON text);
* the workload: ``workload.<field>`` for every scalar field of
  :class:`~evalstop_gym.config.WorkloadConfig`, ``workload.cluster`` (its description, null on a flat
  pool) and the whole world it was drawn from, ``workload.curves.<field>`` and
  ``workload.world.<field>`` (a range as JSON text, ``[lo, hi]``): E8's peak ranges and E10's
  misspecified worlds are told apart here;
* every metric of :data:`~evalstop_gym.metrics.METRIC_KEYS` under its own name,
  ``utilization_by_type`` (JSON text: GPU type to utilization, on a cluster with GPU types) and
  ``job_jct_h`` / ``job_stopped`` (per-job lists, in job order: what paired per-job gains need).

:func:`table_rows` rebuilds an experiment's rows from this file alone, matching each run by these
columns, not by its run id.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..config import CurveModel, LatentModel, WorkloadConfig, WorldModel
from ..metrics import METRIC_KEYS
from .runner import JOBS_KEY, RunSpec, _refuse_constant, record_problem

# column kinds: the pyarrow type of each is in _ARROW
TEXT, INT, FLOAT, TEXTS, FLOATS, INTS = "text", "int", "float", "list<text>", "list<float>", "list<int>"
_COUNTS = ("jobs", "jobs_stopped", "true_positives", "false_positives", "false_negatives", "preemptions")


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        raise TypeError("no boolean fields are expected in a workload")
    return INT if isinstance(value, int) else FLOAT if isinstance(value, float) else TEXT


def _model_columns(prefix: str, models: Sequence[Any]) -> list[tuple[str, str]]:
    """``prefix.<field>`` of each model class's fields: numbers as numbers, anything else (a range, None) as
    JSON text; a field two classes type differently is text."""
    kinds: dict[str, str] = {}
    for model in models:
        for f in dataclasses.fields(model):
            kind = _kind(getattr(model(), f.name))
            kinds[f.name] = kind if kinds.get(f.name, kind) == kind else TEXT
    return [(f"{prefix}.{name}", kind) for name, kind in kinds.items()]


def _workload_columns() -> list[tuple[str, str]]:
    base = WorkloadConfig()
    scalar = [(f"workload.{f.name}", _kind(getattr(base, f.name))) for f in dataclasses.fields(WorkloadConfig)
              if f.name not in ("curves", "world") and isinstance(getattr(base, f.name), (int, float, str))]
    return [*scalar, ("workload.cluster", TEXT), *_model_columns("workload.curves", (LatentModel, CurveModel)),
            *_model_columns("workload.world", (WorldModel,))]


#: every column of ``runs.parquet`` in order, with its kind
COLUMNS: tuple[tuple[str, str], ...] = (
    ("run_id", TEXT), ("code", TEXT), ("checksum", TEXT), ("experiments", TEXTS),
    ("scheduler", TEXT), ("stopper", TEXT), ("params", TEXT),
    *_workload_columns(),
    *((m, INT if m in _COUNTS else FLOAT) for m in METRIC_KEYS),
    ("utilization_by_type", TEXT), ("job_jct_h", FLOATS), ("job_stopped", INTS),
)
_KINDS = dict(COLUMNS)
SPEC_COLUMNS = tuple(name for name, _ in COLUMNS if name in ("scheduler", "stopper", "params")
                     or name.startswith("workload."))   # what tells one run's setup from another's
PER_TYPE = "utilization_"   # metrics named utilization_<GPU type> go to utilization_by_type


def schema():
    """The declared pyarrow schema of ``runs.parquet`` (every column nullable)."""
    import pyarrow as pa

    arrow = {TEXT: pa.string(), INT: pa.int64(), FLOAT: pa.float64(), TEXTS: pa.list_(pa.string()),
             FLOATS: pa.list_(pa.float64()), INTS: pa.list_(pa.int64())}
    return pa.schema([(name, arrow[kind]) for name, kind in COLUMNS])


def _json(v: Any) -> Any:
    return json.dumps(v, sort_keys=True) if isinstance(v, (dict, list, tuple)) else v


def spec_row(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A run's described spec (:meth:`RunSpec.describe`) as the table's setup columns."""
    row = {"scheduler": spec.get("scheduler"), "stopper": spec.get("stopper"),
           "params": json.dumps(spec.get("params", {}), sort_keys=True)}
    for k, v in spec.get("workload", {}).items():
        name = f"workload.{k}"
        # a field two world models type differently (a number in one, a range in the other) is a text column
        row[name] = json.dumps(v) if _KINDS.get(name) == TEXT and v is not None and not isinstance(v, str) \
            else _json(v)
    return row


def table_row(rec: Mapping[str, Any], experiments: Sequence[str] = ()) -> dict[str, Any]:
    """A checked JSONL record as one row of :data:`COLUMNS` (absent values: None)."""
    metrics = rec["metrics"]
    row = dict.fromkeys(name for name, _ in COLUMNS)
    row.update(run_id=rec["run_id"], code=rec.get("code"), checksum=rec.get("checksum"),
               experiments=list(experiments))
    row.update(spec_row(rec.get("spec", {})))
    row.update((m, metrics.get(m)) for m in METRIC_KEYS)
    per_type = {k[len(PER_TYPE):]: v for k, v in metrics.items() if k.startswith(PER_TYPE) and k not in METRIC_KEYS}
    row["utilization_by_type"] = json.dumps(per_type, sort_keys=True) if per_type else None
    if JOBS_KEY in metrics:
        row["job_jct_h"], row["job_stopped"] = metrics[JOBS_KEY]["jct_h"], metrics[JOBS_KEY]["stopped"]
    unknown = set(row) - {name for name, _ in COLUMNS}
    if unknown:   # a workload field the schema does not declare: a new config field must be added to COLUMNS
        raise ValueError(f"runs.parquet: undeclared columns {sorted(unknown)}")
    return row


def row_metrics(row: Mapping[str, Any]) -> dict[str, Any]:
    """A table row's metrics as a run's record holds them (the inverse of :func:`table_row`)."""
    metrics = {m: row[m] for m in METRIC_KEYS}
    for k, v in json.loads(row["utilization_by_type"] or "{}").items():
        metrics[PER_TYPE + k] = v
    if row["job_jct_h"] is not None:
        metrics[JOBS_KEY] = {"jct_h": row["job_jct_h"], "stopped": row["job_stopped"]}
    return metrics


def described(spec: RunSpec) -> dict[str, Any]:
    """``spec.describe()`` as its JSONL record holds it (plain JSON values: lists, not tuples)."""
    return json.loads(json.dumps(spec.describe()))


def export_parquet(jsonl: str | os.PathLike, parquet: str | os.PathLike | None = None, *,
                   experiments: Mapping[str, Iterable[RunSpec]] | None = None) -> Path:
    """Write the checksummed records of ``jsonl`` as a Parquet table (default: beside it, ``.parquet``).

    ``experiments`` maps an experiment's name to the specs of its runs: it fills the ``experiments``
    column, and a run among them gets its setup columns from its spec (so records written before a
    column was added still fill it). The table is written to a temporary file and renamed over the old
    one, so a kill at any moment leaves the previous table or the new one, never a part. Records that
    fail their checks are left out, as a resume leaves them out. Needs pyarrow (the ``experiments``
    extra).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    member: dict[str, list[str]] = {}
    setups: dict[str, RunSpec] = {}
    for name, specs in (experiments or {}).items():
        for spec in specs:
            names = member.setdefault(spec.run_id, [])
            if name not in names:
                names.append(name)
            setups.setdefault(spec.run_id, spec)
    src = Path(jsonl)
    dst = src.with_suffix(".parquet") if parquet is None else Path(parquet)
    rows = []
    with open(src, "rb") as f:
        for line in f:
            try:
                rec = json.loads(line, parse_constant=_refuse_constant)
            except ValueError:
                continue       # a partial last line or a bad record: ResultStore reports those
            if record_problem(rec) is None:
                rid = rec["run_id"]
                if rid in setups:
                    rec = {**rec, "spec": described(setups[rid])}
                rows.append(table_row(rec, member.get(rid, ())))
    tmp = dst.with_name(dst.name + ".tmp")
    pq.write_table(pa.Table.from_pylist(rows, schema=schema()), tmp)
    os.replace(tmp, dst)
    return dst


def _key(row: Mapping[str, Any]) -> tuple:
    return tuple(row.get(c) for c in SPEC_COLUMNS)


def _rebuilt(parquet: str | os.PathLike, name: str, base: WorkloadConfig | None = None, seeds: int = 10,
             first_seed: int = 0, base_scheduler: str | None = None, detectors: Sequence[str] | None = None):
    import pyarrow.parquet as pq

    from ..config import UsageError
    from .spec import build_suite
    from .tables import aggregate

    base = base or WorkloadConfig()
    by_key: dict[tuple, list[dict[str, Any]]] = {}
    for row in pq.read_table(parquet).to_pylist():
        by_key.setdefault(_key(row), []).append(row)
    (exp,) = build_suite([name], base_scheduler=base_scheduler, detectors=detectors, workload=base)
    seed_list = list(range(first_seed, first_seed + seeds))
    results = {}
    for point in exp.points:
        for seed in seed_list:
            spec = RunSpec.of(point, base, seed)
            found = by_key.get(_key(spec_row(described(spec))), [])
            if len(found) != 1:
                raise UsageError(f"{parquet}: {len(found)} rows for {name}'s {point.arm!r} "
                                 f"(x={point.x!r}) on seed {seed}; expected exactly one")
            results[spec.run_id] = row_metrics(found[0])
    return exp, aggregate(exp, results, base, seed_list)


def table_rows(parquet: str | os.PathLike, name: str, **suite: Any) -> list[dict[str, Any]]:
    """Experiment ``name``'s aggregated rows rebuilt from ``runs.parquet`` alone. ``suite``: what was given to
    ``reproduce`` (``base``, ``seeds``, ``first_seed``, ``base_scheduler``, ``detectors``). Each run is found by
    its setup columns (:data:`SPEC_COLUMNS`), not its run id; a run that is missing, or that two rows match, is
    a :class:`~evalstop_gym.config.UsageError`."""
    return _rebuilt(parquet, name, **suite)[1]


def markdown_from_parquet(parquet: str | os.PathLike, name: str, **suite: Any) -> str:
    """Experiment ``name``'s Markdown table rebuilt from ``runs.parquet`` alone (:func:`table_rows`)."""
    from .tables import markdown_table

    return markdown_table(*_rebuilt(parquet, name, **suite))
