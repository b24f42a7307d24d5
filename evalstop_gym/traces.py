"""Replay of real GPU-cluster job traces as a :class:`~evalstop_gym.workload.Workload`.

A trace gives each job its submit time, run time and GPU demand; everything a
trace cannot know comes from the :class:`~evalstop_gym.config.WorkloadConfig`
and its one seeded generator: the job type (a documented rule, below), the
hacking label of RLHF runs, their hidden curves (the calibrated model of
:mod:`evalstop_gym.curves`) and the user's noisy length estimate.

Layouts (``format``), each a job-level CSV with a header row:

* ``philly``: the Philly summary derived by the Pollux authors,
  ``timestamp,duration,num_gpus,gpu_time,cluster`` (tenant: ``cluster``);
* ``helios``: SenseTime Helios ``cluster_log.csv``, ``job_id,user,vc,gpu_num,
  cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue``
  (tenant: ``vc``);
* ``acme``: Shanghai AI Lab Acme ``trace_seren.csv`` / ``trace_kalos.csv``,
  ``job_id,user,node_num,gpu_num,cpu_num,type,state,submit_time,...,duration,
  queue,gpu_time`` (tenant: ``user``; ``type`` orders the job-type rule).

Only the submit time, ``duration`` (seconds), GPU count, tenant and (Acme)
type columns are read; other columns may be absent. Times are
``YYYY-MM-DD HH:MM:SS`` with an optional UTC offset (naive times are read as
UTC) or plain seconds. Jobs of every final state are replayed: failed and
cancelled jobs held their GPUs too.

Job types: each job's size is its GPU-hours (GPUs x run time). Jobs are sorted
by (tier, GPU-hours) and cut at the cumulative fractions of the config's type
mix: the smallest become LoRA, the next DPO, the largest RLHF, so the replay
keeps the preset's mix. The tier is 0 for Philly and Helios; for Acme it comes
from ``type``: Debug and Eval 0, SFT and Other 1, Pretrain and MLLM 2.

Rescaling (``rescale``) fits the trace to the simulated cluster:
``"arrivals"`` (default) keeps ``config.gpus`` and stretches or compresses the
submit times by one factor so the offered load is ``config.load``;
``"cluster"`` keeps the recorded submit times and sizes the cluster to
``ceil(GPU-hours / (span * load))`` GPUs (at least the largest demand);
``"none"`` keeps both. GPU demands are multiplied by ``gpu_scale`` (rounded
half up, so 5 x 0.5 gives 3; at least 1) before any check; ``gpu_scale="fit"``
shrinks them just enough for the largest to fit ``config.gpus`` (with
``rescale="cluster"`` it is 1).

Bad rows (missing values, unparsable or absurd times and numbers, negative or
absurd durations, GPU counts outside [0, 1e6], a repeated ``job_id``, bytes
that are not UTF-8, demands above the cluster) raise :class:`TraceError`
naming the file, line and problem, unless ``on_bad_row="skip"``, which drops
them and counts them per problem in the :class:`TraceReport`. A missing
column, an empty file, a file that is not a regular file, an over-long line
and submit times spanning more than ``MAX_HOURS`` are always errors; gzip'd
files are read as they are (:mod:`evalstop_gym.files`). Rows that are valid
but not replayed are counted as *filtered*: CPU-only jobs (0 GPUs), jobs
shorter than ``min_duration_s`` (and always than 1 ms, the simulator's time
resolution), and jobs outside the window or the selection.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import warnings
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone

import numpy as np

from .config import JOB_TYPES, MAX_EVAL_CELLS, MAX_GPUS, ConfigError, WorkloadConfig, check_range
from .files import DataFileError, csv_rows, has_bad_bytes, open_text
from . import trace_cache
from .timebase import MAX_HOURS
from .workload import Workload, hidden_truth

BAD_ROW_MODES = ("error", "skip")
RESCALE_MODES = ("arrivals", "cluster", "none")


class TraceError(DataFileError):
    """Bad trace input (a missing column, an unparsable time, a negative duration, ...)."""

    field_name = "trace"


class TraceWarning(UserWarning):
    """Rows of a trace were skipped (``on_bad_row="skip"``); the message gives the counts."""


@dataclass(frozen=True)
class TraceLayout:
    """Column names of one trace layout (``kind``: the job-type column, if any)."""

    name: str
    submit: str
    duration: str
    gpus: str
    tenant: str
    kind: str | None = None
    tiers: dict[str, int] = field(default_factory=dict)
    job_id: str | None = None     # checked for repeats when the file has this column
    nodes: str | None = None      # recorded node count of each job, read when the file has this column


LAYOUTS: dict[str, TraceLayout] = {
    "philly": TraceLayout("philly", submit="timestamp", duration="duration", gpus="num_gpus", tenant="cluster"),
    "helios": TraceLayout("helios", submit="submit_time", duration="duration", gpus="gpu_num", tenant="vc",
                          job_id="job_id", nodes="node_num"),
    "acme": TraceLayout("acme", submit="submit_time", duration="duration", gpus="gpu_num", tenant="user",
                        kind="type", tiers={"Debug": 0, "Eval": 0, "SFT": 1, "Other": 1,
                                            "Pretrain": 2, "MLLM": 2}, job_id="job_id", nodes="node_num"),
}
TRACE_FORMATS = tuple(LAYOUTS)
SHAPE = "shape"   # load_trace's format for a trace's shape (evalstop_gym.trace_shape), not a file layout
ACME_UNKNOWN_TIER = 1
MAX_ABS_TIME_S = 1e11        # |timestamp| in seconds (about 3,000 years from 1970)
MAX_TRACE_ROWS = 10_000_000  # rows of one trace file
MAX_GPU_SCALE = 1e6
MIN_RUN_S = 0.001            # the simulator's time resolution: shorter runs are filtered, whatever min_duration_s


@dataclass
class TraceReport:
    """What happened to the rows of a trace: read, skipped (bad) and filtered (valid, not replayed)."""

    path: str
    format: str
    rows: int = 0
    skipped: Counter = field(default_factory=Counter)
    first_bad_line: dict[str, int] = field(default_factory=dict)
    filtered: Counter = field(default_factory=Counter)
    notes: Counter = field(default_factory=Counter)
    jobs: int = 0
    total_gpus: int | None = None
    time_factor: float | None = None
    gpu_scale: float | None = None

    def skip(self, problem_kind: str, line: int) -> None:
        self.skipped[problem_kind] += 1
        self.first_bad_line.setdefault(problem_kind, line)

    def summary(self) -> str:
        """One line: rows read, jobs replayed, and every skip and filter count."""
        name = os.path.basename(self.path)
        parts = [f"trace {name} ({self.format}): {self.rows} rows, {self.jobs} jobs replayed"]
        if self.total_gpus is not None:
            parts.append(f"on {self.total_gpus} GPUs")
        if self.time_factor is not None and self.time_factor != 1.0:
            parts.append(f"arrival times x{self.time_factor:.4g}")
        if self.gpu_scale is not None and self.gpu_scale != 1.0:
            parts.append(f"GPU demands x{self.gpu_scale:.4g}")
        text = ", ".join(parts)
        if self.skipped:
            text += "; skipped {} bad rows: {}".format(sum(self.skipped.values()), ", ".join(
                f"{n} {k} (first at line {self.first_bad_line[k]})" for k, n in sorted(self.skipped.items())))
        if self.filtered:
            text += "; filtered: " + ", ".join(f"{n} {k}" for k, n in sorted(self.filtered.items()))
        if self.notes:
            text += "; notes: " + ", ".join(f"{n} rows with {k}" for k, n in sorted(self.notes.items()))
        return text


@dataclass
class TraceTable:
    """Valid rows of a trace, sorted by submit time (stable), as arrays.

    ``submit_s`` is seconds since the epoch (UTC), ``duration_s`` seconds,
    ``gpus`` GPUs as recorded, ``tenant`` an index into ``tenant_names`` (in order
    of first appearance), ``tier`` the job-type tier, ``line`` the source line.
    """

    submit_s: np.ndarray
    duration_s: np.ndarray
    gpus: np.ndarray
    tenant: np.ndarray
    tenant_names: list[str]
    tier: np.ndarray
    line: np.ndarray
    report: TraceReport
    nodes: np.ndarray | None = None  # recorded nodes per job (0: not recorded); None: no such column

    @property
    def n(self) -> int:
        return int(self.submit_s.shape[0])

    def subset(self, idx: np.ndarray) -> "TraceTable":
        """The rows at ``idx`` (same report object)."""
        return TraceTable(self.submit_s[idx], self.duration_s[idx], self.gpus[idx], self.tenant[idx],
                          self.tenant_names, self.tier[idx], self.line[idx], self.report,
                          None if self.nodes is None else self.nodes[idx])


def _check_choice(name: str, value, allowed) -> None:
    if value not in allowed:
        raise ConfigError(name, value, f"must be one of {', '.join(map(str, allowed))}")


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def parse_time(text: str) -> float:
    """Seconds since the epoch of a trace time: ``YYYY-MM-DD HH:MM:SS[+HH:MM]`` (naive = UTC) or seconds."""
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        if not (math.isfinite(seconds) and abs(seconds) <= MAX_ABS_TIME_S):
            raise ValueError(f"not a finite time within {MAX_ABS_TIME_S:g} s of 1970: {text!r}")
        return seconds
    t = datetime.fromisoformat(text.strip())
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return (t - _EPOCH).total_seconds()


def read_trace(path, format: str = "philly", *, on_bad_row: str = "error", min_duration_s: float = 1.0,
               max_duration_h: float = 24 * 365, cache: bool = True) -> TraceTable:
    """Read and check every row of a trace file (see the module docstring for layouts and rules).

    ``max_duration_h``: a longer run time is an absurd value (a bad row).
    ``min_duration_s``: shorter valid runs (e.g. jobs cancelled at once) are filtered.
    The file must be a regular file (gzip'd or not) of UTF-8 text
    (:mod:`evalstop_gym.files`); rows holding other bytes are bad rows.
    ``cache``: reuse the table parsed by an earlier call with the same file and
    arguments (:mod:`evalstop_gym.trace_cache`; never stale).
    """
    if cache:
        options = {k: v for k, v in locals().items() if k not in ("path", "cache")}  # every argument
        from . import files

        entry = trace_cache.cached(path, options, (__file__, files.__file__),
                                   lambda: table_entry(read_trace(path, **options, cache=False)))
        return table_from_entry(*entry, path=os.fspath(path))
    _check_choice("trace_format", format, TRACE_FORMATS)
    _check_choice("on_bad_row", on_bad_row, BAD_ROW_MODES)
    check_range("trace_min_duration", min_duration_s, 0.0, MAX_HOURS * 3600)
    check_range("max_duration_h", max_duration_h, 0.0, MAX_HOURS, lo_open=True)
    layout = LAYOUTS[format]
    path = os.fspath(path)
    report = TraceReport(path=path, format=format)
    with open_text(path, TraceError, "trace") as f:
        rows = csv_rows(f, path, TraceError, "trace")
        # the header is the first row that is not blank (blank lines before it are skipped, as after it)
        head_line, header = next(((n, r) for n, r in rows if any(c.strip() for c in r)), (None, None))
        if header is None:
            raise TraceError(path, None, "the file is empty (a header row and at least one job are needed)")
        if has_bad_bytes("".join(header)):
            raise TraceError(path, head_line, "the header is not UTF-8 text (is this a CSV trace?)")
        header = [h.strip() for h in header]
        needed = [layout.submit, layout.duration, layout.gpus, layout.tenant] + ([layout.kind] if layout.kind else [])
        missing = [c for c in needed if c not in header]
        if missing:
            shown = ", ".join(header)
            raise TraceError(path, head_line, f"missing column(s) {', '.join(missing)} for the {format} layout "
                                      f"(header has: {shown if len(shown) <= 200 else shown[:200] + '...'})")
        ci = {c: header.index(c) for c in needed}
        i_submit, i_dur, i_gpus, i_ten = ci[layout.submit], ci[layout.duration], ci[layout.gpus], ci[layout.tenant]
        i_kind = ci.get(layout.kind)
        i_id = header.index(layout.job_id) if layout.job_id in header else None
        i_nodes = header.index(layout.nodes) if layout.nodes in header else None
        width = max([*ci.values(), i_id or 0]) + 1
        nodes: list[int] = []
        max_dur_s = max_duration_h * 3600.0
        submit, dur, gpus, tenant, tier, lines = [], [], [], [], [], []
        tenants: dict[str, int] = {}
        id_line: dict[str, int] = {}

        def bad(kind: str, line: int, detail: str) -> None:
            if on_bad_row == "error":
                raise TraceError(path, line, f"{detail} (use on_bad_row='skip' / --on-bad-row skip to drop "
                                             "bad rows and count them)")
            report.skip(kind, line)

        for line, row in rows:
            if not row or (len(row) == 1 and not row[0].strip()):
                continue  # blank line
            report.rows += 1
            if report.rows > MAX_TRACE_ROWS:
                raise TraceError(path, line, f"more than {MAX_TRACE_ROWS} rows: cut the trace into windows first")
            if len(row) < width:
                bad("short row", line, f"only {len(row)} fields, the {format} layout needs {width}")
                continue
            if has_bad_bytes("".join(row)):
                bad("not UTF-8", line, "the row holds bytes that are not UTF-8 text")
                continue
            s_text, d_text, g_text = row[i_submit].strip(), row[i_dur].strip(), row[i_gpus].strip()
            empty = [c for c, v in ((layout.submit, s_text), (layout.duration, d_text), (layout.gpus, g_text))
                     if not v]
            if empty:
                bad("missing value", line, f"empty {', '.join(empty)}")
                continue
            try:
                t = parse_time(s_text)
            except ValueError:
                bad("unparsable timestamp", line, f"{layout.submit}={s_text[:40]!r} is not a time "
                                                  "(YYYY-MM-DD HH:MM:SS[+HH:MM] or seconds, within "
                                                  f"{MAX_ABS_TIME_S:g} s of 1970)")
                continue
            try:
                d = float(d_text)
            except ValueError:
                bad("unparsable duration", line, f"{layout.duration}={d_text[:40]!r} is not a number of seconds")
                continue
            if not math.isfinite(d) or d < 0:
                bad("negative duration" if d < 0 else "absurd duration", line,
                    f"{layout.duration}={d_text[:40]} seconds: a run time must be finite and >= 0")
                continue
            if d > max_dur_s:
                bad("absurd duration", line, f"{layout.duration}={d_text[:40]} seconds is {d / 3600:.3g} h, "
                                             f"more than max_duration_h={max_duration_h:g}")
                continue
            try:
                g_float = float(g_text)
            except ValueError:
                g_float = math.nan
            if not (math.isfinite(g_float) and g_float == int(g_float) and 0 <= g_float <= MAX_GPUS):
                bad("bad GPU count", line, f"{layout.gpus}={g_text[:40]!r} must be a whole number >= 0 (at most {MAX_GPUS})")
                continue
            if i_id is not None:
                job_id = row[i_id].strip()
                if job_id and job_id in id_line:
                    bad("duplicate job_id", line, f"{layout.job_id}={job_id[:40]!r} repeats line {id_line[job_id]}")
                    continue
                id_line.setdefault(job_id, line)
            g = int(g_float)
            if g == 0:
                report.filtered["CPU-only jobs (0 GPUs)"] += 1
                continue
            if d < max(min_duration_s, MIN_RUN_S):
                report.filtered[f"jobs shorter than {max(min_duration_s, MIN_RUN_S):g} s"] += 1
                continue
            key = row[i_ten].strip()
            submit.append(t)
            dur.append(d)
            gpus.append(g)
            tenant.append(tenants.setdefault(key, len(tenants)))
            if i_kind is not None:
                kind = row[i_kind].strip()
                if kind not in layout.tiers:
                    report.notes[f"unknown {layout.kind} {kind[:40]!r} (kept, tier {ACME_UNKNOWN_TIER})"] += 1
                tier.append(layout.tiers.get(kind, ACME_UNKNOWN_TIER))
            else:
                tier.append(0)
            lines.append(line)
            if i_nodes is not None:  # optional: unreadable counts are noted, not fatal
                n_text = row[i_nodes].strip() if len(row) > i_nodes else ""
                # ASCII digits only ("²".isdigit() is true), and no more nodes than a cluster may have GPUs
                ok = n_text.isascii() and n_text.isdigit() and len(n_text) <= 7 and 1 <= int(n_text) <= MAX_GPUS
                nodes.append(int(n_text) if ok else 0)
                if not nodes[-1]:
                    report.notes[f"no usable {layout.nodes} (kept, replayed as consolidated)"] += 1
    if report.rows == 0:
        raise TraceError(path, None, "the file has a header but no job rows")
    order = np.argsort(np.asarray(submit, dtype=float), kind="stable")
    table = TraceTable(submit_s=np.asarray(submit, dtype=float)[order],
                       duration_s=np.asarray(dur, dtype=float)[order],
                       gpus=np.asarray(gpus, dtype=np.int64)[order],
                       tenant=np.asarray(tenant, dtype=np.int64)[order], tenant_names=list(tenants),
                       tier=np.asarray(tier, dtype=np.int64)[order], line=np.asarray(lines, dtype=np.int64)[order],
                       report=report, nodes=np.asarray(nodes, dtype=np.int64)[order] if i_nodes is not None else None)
    if table.n == 0:
        raise TraceError(path, None, f"no replayable job among {report.rows} rows ({report.summary()})")
    span_h = (table.submit_s[-1] - table.submit_s[0]) / 3600.0
    if span_h > MAX_HOURS:
        raise TraceError(path, int(table.line[-1]), f"submit times span {span_h:.3g} h (from line "
                                                    f"{int(table.line[0])} to this one), more than {MAX_HOURS:g} h: "
                                                    "an absurd timestamp?")
    return table


def table_entry(table: TraceTable) -> trace_cache.Entry:
    """Every field of ``table`` as named arrays and a JSON record (what the trace cache stores)."""
    arrays, meta = {}, {}
    for f in dataclasses.fields(table):
        value = getattr(table, f.name)
        if isinstance(value, np.ndarray):
            arrays[f.name] = value
        elif f.name == "report":
            meta["report"] = {r.name: getattr(value, r.name) for r in dataclasses.fields(value)}
        elif value is not None:
            meta[f.name] = value
    return arrays, meta


def table_from_entry(arrays: dict, meta: dict, path: str) -> TraceTable:
    """The :class:`TraceTable` of :func:`table_entry`'s output, its report naming ``path``."""
    fields = {f.name: f for f in dataclasses.fields(TraceReport)}
    report = TraceReport(**{k: Counter(v) if fields[k].default_factory is Counter else v
                            for k, v in meta["report"].items()})
    report.path = path
    other = {k: v for k, v in meta.items() if k != "report"}
    return TraceTable(**arrays, **other, report=report)


def parse_window(text: str) -> tuple[float | None, float | None]:
    """``"START:END"`` in hours since the trace's first submit; either side may be empty."""
    if ":" not in text:
        raise ConfigError("trace_window", text, "must be START:END in hours since the first submit, "
                                                "e.g. 0:168 (either side may be empty)")
    a, b = text.split(":", 1)
    try:
        lo = float(a) if a.strip() else None
        hi = float(b) if b.strip() else None
    except ValueError:
        raise ConfigError("trace_window", text, "START and END must be numbers of hours") from None
    if any(v is not None and not math.isfinite(v) for v in (lo, hi)):
        raise ConfigError("trace_window", text, "START and END must be finite numbers of hours")
    return lo, hi


def assign_job_types(gpu_hours: np.ndarray, tier: np.ndarray, mix) -> np.ndarray:
    """Job-type index per job: sort by (tier, GPU-hours, trace order), cut at the mix's cumulative fractions."""
    n = gpu_hours.shape[0]
    order = np.lexsort((np.arange(n), gpu_hours, tier))
    cuts = np.rint(np.cumsum([mix.get(t, 0.0) for t in JOB_TYPES]) * n).astype(int)
    cuts[-1] = n
    job_type = np.empty(n, dtype=np.int64)
    lo = 0
    for i, hi in enumerate(cuts):
        job_type[order[lo:hi]] = i
        lo = hi
    return job_type


def replay_trace(table: TraceTable, config: WorkloadConfig | None = None, *, jobs: int | None = None,
                 window: tuple[float | None, float | None] | str | None = None, sample: bool = False,
                 rescale: str = "arrivals", gpu_scale: float | str = 1.0,
                 on_bad_row: str = "error") -> tuple[Workload, TraceReport]:
    """Build a :class:`Workload` from the valid rows of a trace; also return the report.

    ``window``: hours since the trace's first submit, ``(start, end)`` or
    ``"START:END"``. ``jobs``: replay only the first ``jobs`` jobs of the
    window, or a seeded uniform sample of them when ``sample`` is true.
    ``rescale`` and ``gpu_scale``: see the module docstring. Demands above the
    cluster are bad rows (``on_bad_row``). All draws come from
    ``np.random.default_rng(config.seed)``. ``config.jobs`` is not used.
    The returned report is the table's, plus this replay's skips and filters.
    """
    cfg = config or WorkloadConfig()
    _check_choice("on_bad_row", on_bad_row, BAD_ROW_MODES)
    _check_choice("trace_rescale", rescale, RESCALE_MODES)
    report = copy.deepcopy(table.report)
    rng = np.random.default_rng(cfg.seed)
    path = report.path

    # 1. time window, hours since the first valid submit
    if isinstance(window, str):
        window = parse_window(window)
    elif window is not None:
        ok = isinstance(window, (tuple, list)) and len(window) == 2 and all(
            v is None or (isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
                          and math.isfinite(v)) for v in window)
        if not ok:
            raise ConfigError("trace_window", window, "must be (START, END) in hours since the first submit, "
                                                      "each a finite number or None, or 'START:END'")
    t0 = table.submit_s[0]
    rel_h = (table.submit_s - t0) / 3600.0
    keep = np.ones(table.n, dtype=bool)
    if window is not None:
        lo, hi = window
        if lo is not None and hi is not None and not hi > lo:
            raise ConfigError("trace_window", f"{lo}:{hi}", "END must be greater than START")
        if lo is not None:
            keep &= rel_h >= lo
        if hi is not None:
            keep &= rel_h < hi
        report.filtered["jobs outside the window"] += int(np.sum(~keep))
        if not keep.any():
            raise ConfigError("trace_window", f"{lo}:{hi}", f"no job of {path} falls in this window "
                                                             f"(the trace spans {rel_h[-1]:.1f} h)")
    t = table.subset(np.flatnonzero(keep))

    # 2. GPU demands, scaled; demands above the cluster are bad rows
    if gpu_scale == "fit":
        scale = min(1.0, cfg.gpus / float(t.gpus.max())) if rescale != "cluster" else 1.0
    else:
        if isinstance(gpu_scale, str):
            raise ConfigError("trace_gpu_scale", gpu_scale, "must be a number > 0 or 'fit'")
        scale = float(gpu_scale)
        if not (math.isfinite(scale) and 0 < scale <= MAX_GPU_SCALE):
            raise ConfigError("trace_gpu_scale", gpu_scale, f"must be a number in (0, {MAX_GPU_SCALE:g}] or 'fit'")
    scaled = np.maximum(1.0, np.floor(t.gpus * scale + 0.5))
    if scaled.max() > MAX_GPUS:
        i = int(np.argmax(scaled))
        raise ConfigError("trace_gpu_scale", gpu_scale, f"makes the job of {path}, line {int(t.line[i])} demand "
                                                        f"{scaled[i]:.3g} GPUs, more than {MAX_GPUS}")
    gpus = scaled.astype(np.int64) if scale != 1.0 else t.gpus.copy()
    report.gpu_scale = scale
    if rescale != "cluster":
        big = gpus > cfg.gpus
        if big.any():
            i = int(np.flatnonzero(big)[0])
            if on_bad_row == "error":
                scaled = f" ({int(t.gpus[i])} recorded, x{scale:g})" if scale != 1.0 else ""
                raise TraceError(path, int(t.line[i]),
                                 f"the job demands {int(gpus[i])} GPUs{scaled}, more than the cluster's "
                                 f"gpus={cfg.gpus} ({int(big.sum())} such jobs); use more GPUs, "
                                 "--trace-gpu-scale, --trace-rescale cluster, or --on-bad-row skip")
            for line in t.line[big]:
                report.skip("demand exceeds the cluster", int(line))
            ok = np.flatnonzero(~big)
            if ok.size == 0:
                raise TraceError(path, None, f"every job demands more than the cluster's gpus={cfg.gpus}")
            t, gpus = t.subset(ok), gpus[ok]

    # 3. selection: the first N jobs, or a seeded sample of N
    if jobs is not None:
        if isinstance(jobs, bool) or not isinstance(jobs, (int, np.integer)) or jobs < 1:
            raise ConfigError("trace_jobs", jobs, "must be an integer >= 1")
        if jobs < t.n:
            idx = np.sort(rng.choice(t.n, size=jobs, replace=False)) if sample else np.arange(jobs)
            report.filtered["jobs not selected (trace_jobs)"] += t.n - jobs
            t, gpus = t.subset(idx), gpus[idx]
    n = t.n
    if n * cfg.evals_per_job > MAX_EVAL_CELLS:
        raise ConfigError("trace_jobs", n, f"times evals_per_job={cfg.evals_per_job} must be <= {MAX_EVAL_CELLS}: "
                                           "replay fewer jobs (--trace-jobs, --trace-window)")

    # 4. arrivals and cluster size
    length_h = t.duration_s / 3600.0
    submit_h = (t.submit_s - t.submit_s[0]) / 3600.0
    gpu_hours = float(np.sum(gpus * length_h))
    span_h = float(submit_h[-1])
    total_gpus, factor = cfg.gpus, 1.0
    if rescale == "arrivals" and span_h > 0:
        factor = gpu_hours / (cfg.gpus * cfg.load * span_h)
        submit_h = submit_h * factor
    elif rescale == "cluster":
        period_h = span_h if span_h > 0 else float(length_h.max())  # one instant: the longest run
        need = gpu_hours / (period_h * cfg.load)
        if need > MAX_GPUS:
            raise ConfigError("load", cfg.load, f"too low for {path} with rescale='cluster': it needs {need:.3g} "
                                                f"GPUs, more than {MAX_GPUS}")
        total_gpus = max(int(math.ceil(need)), int(gpus.max()))
    cluster = cfg.cluster
    if cluster is not None and rescale == "cluster":  # whole nodes of the spec's size
        cluster = resize_cluster(cluster, total_gpus)
        total_gpus = cluster.total_gpus
    if submit_h[-1] + length_h.max() > MAX_HOURS:
        raise ConfigError("load" if rescale == "arrivals" else "trace_rescale",
                          cfg.load if rescale == "arrivals" else rescale,
                          f"the replay of {path} would span {submit_h[-1] + length_h.max():.3g} h, more than "
                          f"{MAX_HOURS:g} h" + (": raise the load" if rescale == "arrivals" else ""))
    report.time_factor, report.total_gpus, report.jobs = factor, total_gpus, n

    # 5. types, labels, hidden curves and estimates (one seeded generator)
    job_type = assign_job_types(gpus * length_h, t.tier, cfg.type_mix)
    if cluster is not None and t.nodes is not None:
        length_h = consolidated_length(length_h, t, job_type, cluster, report)
    truth = hidden_truth(cfg, rng, job_type, gpus, length_h)
    est = length_h * np.exp(cfg.estimate_error * rng.standard_normal(n))
    w = Workload(submit_h=submit_h, gpus=gpus, est_length_h=est, job_type=job_type,
                 tenant=t.tenant.copy(), total_gpus=total_gpus, cluster=cluster, **truth)
    w.validate()
    return w, report


def consolidated_length(length_h: np.ndarray, t: TraceTable, job_type: np.ndarray, spec,
                        report: TraceReport) -> np.ndarray:
    """Recorded run times as work at full speed, using the trace's recorded node counts.

    A job the trace records on more nodes than its GPUs need on the spec's
    nodes ran spread, so slowed by the spec's spread penalty: its work at full
    speed is its recorded run time times that penalty. On the cluster it may
    then run consolidated (faster than recorded) or spread again.
    """
    need = -(-t.gpus // spec.gpus_per_node)
    spread = t.nodes > need
    if not spread.any():
        return length_h
    factor = np.array([float(spec.penalty(name)) for name in JOB_TYPES])[job_type]
    report.notes["runs recorded spread over nodes (work = run time x spread penalty)"] += int(spread.sum())
    return np.where(spread, length_h * factor, length_h)


def resize_cluster(spec, gpus: int):
    """``spec`` with enough whole nodes for ``gpus`` GPUs (nodes of one GPU type only)."""
    if len(spec.gpu_types) > 1:
        raise ConfigError("trace_rescale", "cluster", f"sizes clusters of one GPU type only; "
                                                      f"{spec.describe()} has several")
    nodes = -(-gpus // spec.gpus_per_node)
    return dataclasses.replace(spec, nodes=nodes, node_types=spec.node_types[:1] * nodes if spec.node_types else ())


def trace_config(**fields) -> WorkloadConfig:
    """A :class:`WorkloadConfig` for trace replay: its job-type demand and length
    models are not used (the trace gives those), so any ``gpus >= 1`` is valid."""
    one_gpu = {t: dataclasses.replace(m, gpu_choices=(1,), gpu_probs=(1.0,))
               for t, m in WorkloadConfig().job_types.items()}
    fields.setdefault("job_types", one_gpu)
    return WorkloadConfig(**fields)


def load_trace(path, format: str = "philly", config: WorkloadConfig | None = None, *, on_bad_row: str = "error",
               min_duration_s: float = 1.0, max_duration_h: float = 24 * 365, **options) -> Workload:
    """Read a trace file and build its workload in one call.

    ``options`` go to :func:`replay_trace` (``jobs, window, sample, rescale,
    gpu_scale``). Skipped rows raise a :class:`TraceWarning` with their counts.

    ``format="shape"``: ``path`` is a trace's shape (:mod:`evalstop_gym.trace_shape`), and ``jobs`` jobs
    are drawn from it (seeded by ``config.seed``) in place of the trace's rows; ``gpu_scale="fit"`` shrinks
    demands for the trace's largest, as a replay of the trace's own rows does.

    >>> w = load_trace("philly.csv", "philly", WorkloadConfig(gpus=256), jobs=1000)  # doctest: +SKIP
    """
    if format == SHAPE:
        from .trace_shape import read_shape, sample_jobs

        jobs = options.get("jobs")
        if isinstance(jobs, bool) or not isinstance(jobs, (int, np.integer)) or jobs < 1:
            raise ConfigError("trace_jobs", jobs, "must be an integer >= 1: a shape replays the jobs drawn from it")
        shape, cfg = read_shape(path), config or WorkloadConfig()
        d = sample_jobs(shape, int(jobs), cfg.seed)
        table = TraceTable(d.submit_s, d.duration_s, d.gpus, d.tenant, [f"tenant-{i}" for i in range(d.tenants)],
                           np.zeros(d.gpus.size, dtype=np.int64), np.arange(1, d.gpus.size + 1, dtype=np.int64),
                           TraceReport(path=os.fspath(path), format=SHAPE, rows=int(d.gpus.size)))
        if options.get("gpu_scale") == "fit" and options.get("rescale", "arrivals") != "cluster":
            # as for the trace's own rows: shrunk for the trace's largest demand, not the draw's
            options["gpu_scale"] = min(1.0, cfg.gpus / max(int(c) for c in shape["gpus"]))
    else:
        table = read_trace(path, format, on_bad_row=on_bad_row, min_duration_s=min_duration_s,
                           max_duration_h=max_duration_h)
    w, report = replay_trace(table, config, on_bad_row=on_bad_row, **options)
    if report.skipped:
        warnings.warn(report.summary(), TraceWarning, stacklevel=2)
    return w
