"""Replay of logged training curves: read per-job curve logs, label them, and put them in a workload.

Curve-log format (one row per logged step of one run):

======================  ========  ===================================================
column                  required  meaning
======================  ========  ===================================================
``job``                 yes       run name (rows of one run may be interleaved)
``step``                yes       training step (a number; need not start at 0)
``eval_score``          yes       downstream eval score at that step; may be blank on
                                  steps without an eval (at least 2 per run)
``train_loss``          no        training loss; blank where not logged
``proxy_reward``        no        proxy (reward-model) reward; blank where not logged
anything else           no        kept as ``extra`` (e.g. ``kl``, ``gold``), not used
======================  ========  ===================================================

CSV files have a header row with these column names; JSONL files hold one
JSON object per line with these keys (``null`` or a missing key = blank). A
step logged twice keeps its last values (resumed runs). A TensorBoard log
directory (TRL, OpenRLHF and ``torch.utils.tensorboard`` write these) is read
with :func:`read_tensorboard`: each directory holding event files is one run.
A transformers / TRL ``trainer_state.json`` from any trainer is read by
:func:`evalstop_gym.logs.logged.read_runs` (:mod:`evalstop_gym.logs.trainer_state`:
its own metric and direction, the latest state of an output folder).

The project's own trainer states (``curves generate --backend trl`` writes
``eval_score``, ``eval_gold``, ``eval_kl``, ``eval_items`` at each eval) are also
read as dicts by :func:`state_runs`: ``log_history`` is a list of dicts, each
with a ``step``; an entry with a key starting ``eval_`` is an eval, its
``eval_score`` the score and every other numeric ``eval_X`` the extra column
``X`` (``eval_gold`` -> ``gold``, ``eval_kl`` -> ``kl``), except ``eval_items``
(the eval's n), kept under that name. Any other entry is a training log:
``loss`` is ``train_loss``, the first key among :data:`PROXY_KEYS` is
``proxy_reward`` (GRPO / RLOO ``reward``, DPO ``rewards/margins``) and every
other numeric key ``Y`` becomes ``train_Y`` (GRPO's ``kl`` -> ``train_kl``).
The end-of-training summary (the entry with ``train_runtime``) is skipped.
Entries of one step merge into one row.

A file named ``<run>.trainer_state.json`` (as ``curves generate --backend
trl`` keeps them) holds run ``<run>``; a ``trainer_state.json`` is named by the
folder holding it (its parent's name for a ``checkpoint-N`` folder); or pass
``name``.

Replay onto a workload (:func:`apply_curve_log`): a run is stretched onto the
job's eval checkpoints, progress ``x`` in ``[0, 1]`` mapping to
``first step + x * (last step - first step)``; checkpoint ``i`` of ``E`` reads
the linear interpolation at ``x = i / E`` and the starting score is the first
logged eval. The logged eval score becomes the job's true score ("gold"); the
simulator adds the workload's eval noise to it as for every job (use
``noise=0`` to replay noisy logged evals as they are). A log with a ``gold``
column is replayed with that as the true score and the logged eval score as
the observed one (its difference from gold, the eval's real sampling error,
goes into ``Curves.eval_offset``); the workload's eval noise adds on top, so
``noise=0`` shows detectors exactly the logged evals. Loss and proxy curves
that a run does not log keep the calibrated model's.

Labelling (:func:`label_run`). A log with a ``gold`` column (the hidden,
dense true score the over-optimisation generator writes beside its noisy
``eval_score``) is labelled from its gold and proxy reward alone, on the
detectors' checkpoint grid (:func:`label_gold`): resample both at the start
and at the ``E`` checkpoints (as replay does; the proxy's start is unknown
unless the log holds a proxy at its first step, which a trainer's log does not)
and apply the rule worlds label
with (:func:`evalstop_gym.label.overoptimised`): gold falls after its peak by
at least a quarter of its gain, 0.03, twice its own noise and twice its own
wander over the fall's span, while the proxy rises beyond its noise over the
same stretch. A run that logs no proxy is never hacking. The eval noise never
enters, so labels do not move with the noise detectors see.

A log without ``gold`` is never labelled (:func:`label_run` returns None): a
drop of the eval score after a peak may be over-optimisation or the eval's own
noise, and only a true score can tell (a run that later beats its best is the
one verdict a log alone supports: ``evalstop-gym replay``'s false stop). Its
shape is described, not labelled, by :func:`eval_score_shape`: smooth the eval
scores with a centred moving average over ``smooth_frac`` of the run's evals
(default 10%; windows shrink at the ends); take the noise ``s`` as the larger
of the log's own noise, estimated from its second differences (``1.4826 *
median |second difference| / sqrt(6)``, blind to local linear trends), and
``noise_floor``; ``drop`` is the smoothed fall from the peak to the last eval
and ``threshold`` ``max(k_sigma * s, rel_drop * range)`` (defaults 2 and 0.1;
``range`` is the smoothed curve's max minus min): a drop above it is larger
than the noise and than a tenth of the run's own movement.

Any other log (a Trainer's state from elsewhere, Lightning, Ray Tune, MLflow,
W&B) is read by :func:`evalstop_gym.logs.logged.read_runs`, on a chosen metric.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
from dataclasses import dataclass, field

import numpy as np

from .config import JOB_TYPES, ConfigError, check_range
from .curves import Curves
from .files import DataFileError, atomic_open, csv_rows, has_bad_bytes, lines, open_binary, open_text, walk
from .label import GOLD_DROP_SHARE, GOLD_MIN_DROP, overoptimised
from .workload import Workload

CURVE_COLUMNS = ("job", "step", "eval_score", "train_loss", "proxy_reward")
REQUIRED_COLUMNS = ("job", "step", "eval_score")
CURVE_FORMATS = ("auto", "csv", "jsonl", "tensorboard")
MAX_ABS_VALUE = 1e12   # |step| and |logged value|: beyond it a value is absurd (and sums could overflow)
MAX_CURVE_ROWS = 5_000_000   # rows of one curve log (about 2.5 GB once held per run and step)
MAX_EVALS = 1_000_000        # checkpoints a run is resampled onto (8 MB per curve; a workload takes <= 1000)
MAX_TB_RECORD_BYTES = 16 * 2**20   # one TensorBoard event record (a scalar event is under 100 bytes)
MAX_TB_FILE_BYTES = 2**30          # one TensorBoard event file

# TensorBoard tags tried in order for each curve (TRL, OpenRLHF and plain names)
TB_TAGS = {
    "eval_score": ("eval_score", "eval/score", "eval/gold", "eval/reward", "eval/accuracy", "gold"),
    "train_loss": ("train_loss", "train/loss", "loss", "train/policy_loss", "ppo/loss/total",
                   "loss/policy_avg"),
    "proxy_reward": ("proxy_reward", "train/reward", "objective/scores", "env/reward_mean",
                     "objective/rlhf_reward", "reward"),
}


class CurveLogError(DataFileError):
    """Bad curve-log input: names the file, the line (when one is to blame) and the problem."""

    field_name = "curves"


@dataclass(frozen=True)
class LoggedRun:
    """One logged run. ``step`` ascending and unique; curves are NaN where not logged."""

    name: str
    step: np.ndarray
    eval_score: np.ndarray
    train_loss: np.ndarray
    proxy_reward: np.ndarray
    extra: dict[str, np.ndarray] = field(default_factory=dict)
    metric: str = "eval_score"   # the logged metric eval_score holds (evalstop_gym.logs.logged.read_runs)
    mode: str = "max"            # "min": eval_score is that metric negated

    def series(self, column: str) -> tuple[np.ndarray, np.ndarray]:
        """``(steps, values)`` where ``column`` was logged."""
        v = getattr(self, column) if column in CURVE_COLUMNS else self.extra[column]
        ok = np.isfinite(v)
        return self.step[ok], v[ok]


@dataclass(frozen=True)
class RunLabel:
    """Outcome of :func:`label_run` (scores in the log's units, steps in its steps)."""

    hacking: bool
    peak_step: float
    peak_progress: float   # fraction of the run (0..1) at the smoothed peak
    drop: float            # smoothed peak minus smoothed last eval
    threshold: float       # the drop needed to call it hacking
    noise: float           # eval-score rule: the noise estimate used; gold rule: the evals' own noise (not used)


# -- reading -------------------------------------------------------------------------

def _number(text, path, line, column) -> float:
    """A logged value; blank (``""``, JSON ``null``) is NaN, "not logged". A written ``nan`` is an error:
    a run that logged NaN diverged, which is not the same as an eval that was not run."""
    if text is None or (isinstance(text, str) and not text.strip()):
        return math.nan
    if isinstance(text, bool):
        raise CurveLogError(path, line, f"{column}={text!r} is not a number")
    try:
        v = float(text)
    except (TypeError, ValueError, OverflowError):
        raise CurveLogError(path, line, f"{column}={_short(text)} is not a number") from None
    if math.isnan(v):
        raise CurveLogError(path, line, f"{column}={_short(text)} is not a number (leave it blank where "
                                        "nothing was logged)")
    if math.isinf(v) or abs(v) > MAX_ABS_VALUE:
        raise CurveLogError(path, line, f"{column}={_short(text)} is not a finite number within "
                                        f"+-{MAX_ABS_VALUE:g}")
    return v


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class _Collector:
    """Accumulates rows per run, then builds :class:`LoggedRun` objects."""

    def __init__(self, path):
        self.path = path
        self.rows: dict[str, dict[float, dict[str, float]]] = {}
        self.first_line: dict[str, int] = {}
        self.count = 0

    def add(self, record: dict, line: int) -> None:
        path = self.path
        missing = [c for c in REQUIRED_COLUMNS if c not in record]
        if missing:
            raise CurveLogError(path, line, f"missing {', '.join(missing)} (required: {', '.join(REQUIRED_COLUMNS)})")
        job = record["job"]
        if not isinstance(job, str):   # JSON 1 and "1" would be one run
            raise CurveLogError(path, line, f"job={_short(job)} must be a string (a run name)")
        if not job.strip():
            raise CurveLogError(path, line, "empty job name")
        job = job.strip()
        if has_bad_bytes(job):
            raise CurveLogError(path, line, "the job name is not valid Unicode text")
        step = _number(record["step"], path, line, "step")
        if math.isnan(step):
            raise CurveLogError(path, line, "empty step")
        values = {}
        for k, v in record.items():
            if k in ("job", "step"):
                continue
            if k in CURVE_COLUMNS:
                values[k] = _number(v, path, line, k)
            else:
                try:
                    values[k] = _number(v, path, line, k)
                except CurveLogError:
                    continue  # a non-numeric extra column (a note, a tag) is not ours to judge
        self.rows.setdefault(job, {})[step] = values   # a repeated step keeps its last values
        self.first_line.setdefault(job, line)
        self.count += 1
        if self.count > MAX_CURVE_ROWS:
            raise CurveLogError(path, line, f"more than {MAX_CURVE_ROWS} curve rows: split the log")

    def runs(self) -> dict[str, LoggedRun]:
        if not self.rows:
            raise CurveLogError(self.path, None, "no curve rows (the file is empty)")
        out = {}
        for job, by_step in self.rows.items():
            steps = np.array(sorted(by_step))
            cols = {c for vals in by_step.values() for c in vals}

            def column(c):
                return np.array([by_step[s].get(c, math.nan) for s in steps], dtype=float)

            run = LoggedRun(name=job, step=steps, eval_score=column("eval_score"), train_loss=column("train_loss"),
                            proxy_reward=column("proxy_reward"),
                            extra={c: column(c) for c in sorted(cols) if c not in CURVE_COLUMNS})
            if np.sum(np.isfinite(run.eval_score)) < 2:
                raise CurveLogError(self.path, self.first_line[job],
                                    f"run {job!r} has {int(np.sum(np.isfinite(run.eval_score)))} eval scores; "
                                    "at least 2 are needed")
            out[job] = run
        return out


def read_csv_log(path) -> dict[str, LoggedRun]:
    """Runs of a CSV curve log (header row with the curve-log columns)."""
    path = os.fspath(path)
    col = _Collector(path)
    with open_text(path, CurveLogError, "curve log") as f:
        rows = csv_rows(f, path, CurveLogError, "curve log")
        _, header = next(rows, (None, None))
        if header is None or not any(h.strip() for h in header):
            raise CurveLogError(path, None, "the file is empty (a header row and curve rows are needed)")
        header = [h.strip() for h in header]
        missing = [c for c in REQUIRED_COLUMNS if c not in header]
        if missing:
            shown = ", ".join(header)
            raise CurveLogError(path, 1, f"missing column(s) {', '.join(missing)} "
                                         f"(header has: {shown if len(shown) <= 200 else shown[:200] + '...'})")
        for line, row in rows:
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            if len(row) != len(header):
                raise CurveLogError(path, line, f"{len(row)} fields, the header has {len(header)}")
            if has_bad_bytes("".join(row)):
                raise CurveLogError(path, line, "the row holds bytes that are not UTF-8 text")
            col.add(dict(zip(header, row)), line)
    return col.runs()


def read_jsonl_log(path) -> dict[str, LoggedRun]:
    """Runs of a JSONL curve log (one JSON object per line)."""
    path = os.fspath(path)
    col = _Collector(path)
    with open_text(path, CurveLogError, "curve log") as f:
        for i, record in json_objects(f, path, CurveLogError):
            col.add(record, i)
    return col.runs()


def json_objects(f, path: str, error: type):
    """``(line number, object)`` of a JSON-lines text stream; blank lines skipped, anything else that is not
    one JSON object a line raises ``error`` naming the line."""
    for i, text in enumerate(lines(f, path, error, "log"), start=1):
        if not text.strip():
            continue
        if has_bad_bytes(text):
            raise error(path, i, "the line holds bytes that are not UTF-8 text")
        try:
            record = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as e:
            raise error(path, i, f"not valid JSON ({getattr(e, 'msg', 'nested too deeply')})") from None
        if not isinstance(record, dict):
            raise error(path, i, "each line must be a JSON object")
        yield i, record


def _event_dirs(root: str) -> list[str]:
    """Folders under ``root`` holding event files, found by a bounded walk (:func:`evalstop_gym.files.walk`)."""
    return sorted(d for d, files in walk(root, CurveLogError, "log directory") if any("tfevents" in f for f in files))


def read_tensorboard(logdir, tags: dict[str, tuple[str, ...] | str] | None = None) -> dict[str, LoggedRun]:
    """Runs of a TensorBoard log directory (needs the ``tensorboard`` package).

    Every directory under ``logdir`` holding ``*tfevents*`` files is one run,
    named by its path relative to ``logdir`` (``"."`` for ``logdir`` itself).
    ``tags`` maps ``eval_score``, ``train_loss``, ``proxy_reward`` to a tag name
    or to candidate names tried in order (default :data:`TB_TAGS`). Scalars
    written by TF2 summaries (stored as tensors) are read too.
    """
    try:
        from tensorboard.util import tensor_util
    except ImportError:  # pragma: no cover - depends on the environment
        raise ConfigError("curves", os.fspath(logdir), "reading TensorBoard logs needs the tensorboard package "
                                                       "(pip install tensorboard)") from None
    root = os.fspath(logdir)
    if not os.path.isdir(root):
        raise CurveLogError(root, None, "not a directory of TensorBoard event files")
    want = dict(TB_TAGS)
    for k, v in (tags or {}).items():
        if k not in TB_TAGS:
            raise ConfigError("tags", k, f"must be among {', '.join(TB_TAGS)}")
        want[k] = (v,) if isinstance(v, str) else tuple(v)
    runs = {}
    for d in _event_dirs(root):
        acc = accumulate(d, CurveLogError)
        available = acc.Tags()
        scalars, tensors = set(available.get("scalars", ())), set(available.get("tensors", ()))
        by_step: dict[float, dict[str, float]] = {}
        for column, candidates in want.items():
            tag = next((t for t in candidates if t in scalars or t in tensors), None)
            if tag is None:
                continue
            if tag in scalars:
                events = [(e.step, e.value) for e in acc.Scalars(tag)]
            else:
                events = [(e.step, float(tensor_util.make_ndarray(e.tensor_proto))) for e in acc.Tensors(tag)]
            for step, value in events:
                value = float(value)
                if math.isinf(value) or abs(value) > MAX_ABS_VALUE:
                    raise CurveLogError(d, None, f"tag {tag!r} at step {step} holds {value!r}, not a finite "
                                                 f"number within +-{MAX_ABS_VALUE:g}")
                if math.isnan(value):
                    continue   # not logged
                by_step.setdefault(float(step), {})[column] = value
        name = os.path.relpath(d, root)
        if sum("eval_score" in v for v in by_step.values()) < 2:
            raise CurveLogError(d, None, f"run {name!r}: fewer than 2 eval scores under tags "
                                         f"{', '.join(want['eval_score'])} (tags found: "
                                         f"{', '.join(sorted(scalars | tensors)) or 'none'})")
        steps = np.array(sorted(by_step))
        cols = {c: np.array([by_step[s].get(c, math.nan) for s in steps]) for c in TB_TAGS}
        runs[name] = LoggedRun(name=name, step=steps, **cols)
    if not runs:
        raise CurveLogError(root, None, "no TensorBoard event files (*tfevents*) found")
    return runs


def accumulate(folder: str, error: type):
    """A loaded ``EventAccumulator`` of one folder's event files, each file's framing checked first;
    problems raise ``error`` (one line)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    try:
        for f in sorted(os.listdir(folder)):
            if "tfevents" in f:
                check_event_file(os.path.join(folder, f))
    except CurveLogError as e:
        raise error(e.path, e.line, e.problem) from None
    acc = EventAccumulator(folder, size_guidance={"scalars": 0, "tensors": 0})
    try:
        acc.Reload()
    except Exception as e:   # a record with valid checksums but an unparsable event
        raise error(folder, None, f"unreadable TensorBoard events ({type(e).__name__}: {e})") from None
    return acc


def check_event_file(path: str) -> int:
    """Number of records of a TensorBoard event file whose TFRecord framing is intact.

    Each record is a length, the masked CRC-32C of the length, the data and the
    masked CRC-32C of the data; a file cut short (a writer killed mid-record) or
    a flipped byte fails a check. TensorBoard's own loader stops silently at the
    first such record, which drops every later point; this raises
    :class:`CurveLogError` instead. The file must be a regular file of at most
    :data:`MAX_TB_FILE_BYTES` (a dangling link or a device is refused), and a
    record may claim at most :data:`MAX_TB_RECORD_BYTES` (a huge length is
    refused before anything is allocated for it).
    """
    import struct

    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    n = 0

    def damaged(what: str) -> CurveLogError:
        return CurveLogError(path, None, f"record {n + 1} {what}: the event file is damaged or still "
                                         f"being written; {n} records before it are intact")

    with open_binary(path, CurveLogError, "TensorBoard event file") as f:
        if os.fstat(f.fileno()).st_size > MAX_TB_FILE_BYTES:
            raise CurveLogError(path, None, f"is larger than {MAX_TB_FILE_BYTES} bytes: not an event file of "
                                            "scalars")
        while True:
            header = f.read(12)
            if not header:
                return n
            if len(header) < 12:
                raise damaged("is cut short (truncated)")
            (length,), (crc,) = struct.unpack("<Q", header[:8]), struct.unpack("<I", header[8:])
            if masked_crc32c(header[:8]) != crc:
                raise damaged("is corrupt (failed its CRC check)")
            if length > MAX_TB_RECORD_BYTES:
                raise damaged(f"claims {length} bytes, more than {MAX_TB_RECORD_BYTES}")
            data, footer = f.read(length), f.read(4)
            if len(data) < length or len(footer) < 4:
                raise damaged("is cut short (truncated)")
            if masked_crc32c(data) != struct.unpack("<I", footer)[0]:
                raise damaged("is corrupt (failed its CRC check)")
            n += 1


# transformers / TRL trainer_state.json (module docstring)

PROXY_KEYS = ("reward", "rewards/margins", "objective/scores")


def is_trainer_state(path) -> bool:
    """Whether ``path`` names a Trainer state file (``trainer_state.json``, or ``<run>.trainer_state.json``)."""
    return os.path.basename(os.fspath(path)).endswith("trainer_state.json")


def _run_name(path: str) -> str:
    prefix = os.path.basename(path)[:-len("trainer_state.json")].rstrip("._-")
    if prefix:
        return prefix
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.basename(folder).startswith("checkpoint-"):
        folder = os.path.dirname(folder)
    return os.path.basename(folder) or "run"


def _numeric(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def state_records(state: dict, name: str, where: str = "trainer state") -> list[dict]:
    """Curve-log records (``job``, ``step`` and columns) of a Trainer state's ``log_history``, one per step
    (a step's entries merged, later keys winning), in order of each step's first entry."""

    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise CurveLogError(where, None, "no log_history list (is this a transformers trainer_state.json?)")
    by_step: dict = {}
    for i, entry in enumerate(history):
        if not isinstance(entry, dict) or "step" not in entry:
            raise CurveLogError(where, None, f"log_history[{i}] is not an object with a 'step'")
        if "train_runtime" in entry:
            continue
        row = {"job": name, "step": entry["step"]}
        values = {k: v for k, v in entry.items() if k != "step" and _numeric(v)}
        if any(k.startswith("eval_") for k in values):
            if "eval_score" in values:
                row["eval_score"] = values.pop("eval_score")
            for k, v in values.items():
                row[k if k == "eval_items" else k[len("eval_"):] if k.startswith("eval_") else k] = v
        else:
            if "loss" in values:
                row["train_loss"] = values.pop("loss")
            proxy = next((k for k in PROXY_KEYS if k in values), None)
            if proxy is not None:
                row["proxy_reward"] = values.pop(proxy)
            row.update({"train_" + k: v for k, v in values.items() if k != "epoch"})
        by_step.setdefault(_step_key(row["step"]), {}).update(row)
    return list(by_step.values())


def _step_key(step):
    return step if _numeric(step) else str(step)


def state_runs(state: dict, name: str, where: str = "trainer state") -> dict:
    """``{name: LoggedRun}`` of a Trainer state (a dict as ``trainer_state.json`` holds it)."""

    col = _Collector(where)
    for i, record in enumerate(state_records(state, name, where)):
        record.setdefault("eval_score", None)
        col.add(record, i + 1)
    return col.runs()


def read_trainer_state(path, name: str | None = None) -> dict:
    """``{run name: LoggedRun}`` of one ``trainer_state.json`` (module docstring)."""

    path = os.fspath(path)
    with open_text(path, CurveLogError, "trainer state") as f:
        try:
            state = json.load(f)
        except (json.JSONDecodeError, RecursionError, UnicodeDecodeError) as e:
            raise CurveLogError(path, None, f"not valid JSON ({getattr(e, 'msg', type(e).__name__)})") from None
    return state_runs(state, name or _run_name(path), path)


def read_curve_log(path, format: str = "auto") -> dict[str, LoggedRun]:
    """Runs of a curve log: a ``.csv`` or ``.jsonl`` file, a TensorBoard directory,
    or a directory of ``.csv`` / ``.jsonl`` files (run names must not repeat across files)."""
    if format not in CURVE_FORMATS:
        raise ConfigError("curves_format", format, f"must be one of {', '.join(CURVE_FORMATS)}")
    path = os.fspath(path)
    if not os.path.exists(path):
        raise CurveLogError(path, None, "no such file or directory")
    if format == "auto" and is_trainer_state(path):
        return read_trainer_state(path)
    if format == "tensorboard" or (format == "auto" and os.path.isdir(path) and _event_dirs(path)):
        return read_tensorboard(path)
    if os.path.isdir(path):
        files = sorted(f for f in os.listdir(path) if f.endswith((".csv", ".jsonl", ".csv.gz", ".jsonl.gz")))
        if not files:
            raise CurveLogError(path, None, "no .csv or .jsonl curve logs and no TensorBoard event files here")
        runs: dict[str, LoggedRun] = {}
        for f in files:
            for name, run in read_curve_log(os.path.join(path, f), format).items():
                if name in runs:
                    raise CurveLogError(os.path.join(path, f), None, f"run {name!r} also appears in another file")
                runs[name] = run
        return runs
    stem = path[:-3] if path.endswith(".gz") else path   # gzip is read by its magic bytes, whatever the name
    if format == "jsonl" or (format == "auto" and stem.endswith(".jsonl")):
        return read_jsonl_log(path)
    if format == "csv" or (format == "auto" and stem.endswith(".csv")):
        return read_csv_log(path)
    raise CurveLogError(path, None, "unknown curve-log type: name it .csv or .jsonl (.gz allowed), or give its format "
                                    "(--format / --curves-format csv|jsonl|tensorboard)")


def write_curve_log(path, rows: list[dict]) -> None:
    """Write curve rows (dicts with the curve-log columns and any extras) as CSV or JSONL by extension,
    all or nothing (:func:`evalstop_gym.files.atomic_open`)."""
    path = os.fspath(path)
    if path.endswith(".jsonl"):
        with atomic_open(path, "w", field="curves") as f:
            for r in rows:
                f.write(json.dumps(r, allow_nan=False) + "\n")
        return
    columns = list(CURVE_COLUMNS) + sorted({k for r in rows for k in r} - set(CURVE_COLUMNS))
    with atomic_open(path, "w", field="curves", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        w.writerows(rows)


# -- labelling -----------------------------------------------------------------------

def smooth(values: np.ndarray, width: int) -> np.ndarray:
    """Centred moving average over ``width`` points (made odd); windows shrink at the ends."""
    half = max(0, int(width) // 2)
    v = np.asarray(values, dtype=float)
    if half == 0 or v.size < 3:
        return v.copy()
    c = np.concatenate([[0.0], np.cumsum(v)])
    i = np.arange(v.size)
    lo, hi = np.maximum(i - half, 0), np.minimum(i + half + 1, v.size)
    return (c[hi] - c[lo]) / (hi - lo)


def log_noise(values: np.ndarray) -> float:
    """Robust noise sigma of a logged curve from its second differences (blind to local linear trends):
    ``1.4826 * median(|second differences|) / sqrt(6)``."""
    d2 = np.diff(np.asarray(values, dtype=float), n=2)
    if d2.size < 1:
        return 0.0
    return float(1.4826 * np.median(np.abs(d2)) / math.sqrt(6.0))


def has_gold(run: LoggedRun) -> bool:
    """Whether the run logs a dense true score (a ``gold`` column with at least two values)."""
    return "gold" in run.extra and int(np.sum(np.isfinite(run.extra["gold"]))) >= 2


def has_all_gold(runs) -> bool:
    """Whether every run logs gold: only then are hacking labels, precision, recall and FPR measurable."""
    return all(has_gold(r) for r in runs)


def eval_noise(run: LoggedRun) -> float:
    """Sd of the logged eval score around the logged gold (the eval's own sampling error), 0 without gold."""
    if not has_gold(run):
        return 0.0
    err = run.eval_score - run.extra["gold"]
    err = err[np.isfinite(err)]
    return float(np.sqrt(np.mean(err ** 2))) if err.size else 0.0


def label_gold(run: LoggedRun, evals: int, *, drop_share: float = GOLD_DROP_SHARE,
               min_drop: float = GOLD_MIN_DROP) -> RunLabel:
    """Hacking label from the ``gold`` and ``proxy_reward`` columns, on the grid of ``evals`` checkpoints:
    :func:`evalstop_gym.label.overoptimised`, the rule worlds label with (module docstring)."""
    check_range("evals", evals, 1, MAX_EVALS, integer=True)
    check_range("drop_share", drop_share, 0.0, 1.0)
    check_range("min_drop", min_drop, 0.0)
    g0, g = resample(run, "gold", evals)
    gold = np.concatenate([[g0], g])
    got = resample(run, "proxy_reward", evals)
    proxy = np.full(evals + 1, np.nan)
    if got is not None:
        proxy[1:] = got[1]
        if np.isfinite(run.proxy_reward[0]):   # else unknown: resample's copy of a later value is no reading
            proxy[0] = got[0]
    hacking, top, drop, threshold = overoptimised(gold[None, :], proxy[None, :], drop_share=drop_share,
                                                  min_drop=min_drop)
    p = int(top[0])
    first, span = float(run.step[0]), float(run.step[-1] - run.step[0])
    return RunLabel(hacking=bool(hacking[0]), peak_step=first + p / evals * span, peak_progress=p / evals,
                    drop=float(drop[0]), threshold=float(threshold[0]), noise=eval_noise(run))


def eval_score_shape(run: LoggedRun, *, noise_floor: float = 0.0, k_sigma: float = 2.0, rel_drop: float = 0.1,
                     smooth_frac: float = 0.1) -> RunLabel:
    """The shape of the logged eval scores, peak, drop and threshold (module docstring); ``hacking`` is False:
    a run without gold is not labelled."""
    check_range("noise_floor", noise_floor, 0.0)
    check_range("k_sigma", k_sigma, 0.0)
    check_range("rel_drop", rel_drop, 0.0)
    check_range("smooth_frac", smooth_frac, 0.0, 1.0)
    steps, s = run.series("eval_score")
    sigma = max(log_noise(s), float(noise_floor))
    sm = smooth(s, round(smooth_frac * s.size))
    p = int(np.argmax(sm))
    drop = float(sm[p] - sm[-1])
    threshold = max(k_sigma * sigma, rel_drop * float(sm.max() - sm.min()))
    span = float(steps[-1] - steps[0])
    return RunLabel(hacking=False, peak_step=float(steps[p]),
                    peak_progress=float(steps[p] - steps[0]) / span if span > 0 else 1.0,
                    drop=drop, threshold=threshold, noise=sigma)


def label_run(run: LoggedRun, *, evals: int | None = None, drop_share: float = GOLD_DROP_SHARE,
              min_drop: float = GOLD_MIN_DROP) -> RunLabel | None:
    """Hacking label of a logged run: :func:`label_gold` on ``evals`` checkpoints (default: the log's own
    steps) if it logs gold, else None (not labelled: module docstring)."""
    if not has_gold(run):
        return None
    return label_gold(run, evals if evals is not None else run.step.size - 1, drop_share=drop_share,
                      min_drop=min_drop)


# -- replay onto a workload ------------------------------------------------------------

def resample(run: LoggedRun, column: str, evals: int) -> tuple[float, np.ndarray] | None:
    """``(value at the first logged step, values at progress 1/E .. 1)`` of a column, or None if not logged."""
    check_range("evals", evals, 1, MAX_EVALS, integer=True)
    steps, v = run.series(column)
    if steps.size == 0:
        return None
    first, last = float(run.step[0]), float(run.step[-1])
    x = np.arange(1, evals + 1) / evals
    at = first + x * (last - first)
    return float(np.interp(first, steps, v)), np.interp(at, steps, v)


def apply_curve_log(workload: Workload, runs: dict[str, LoggedRun], *, job_types=("rlhf",), seed: int = 0,
                    **label_options) -> Workload:
    """A copy of ``workload`` whose jobs of ``job_types`` take their curves and labels from ``runs``.

    Runs are dealt to those jobs in submit order from a seeded shuffle of the
    run names, cycling when there are more jobs than runs. Each job's true
    score is its run's eval score at the job's checkpoints (module docstring),
    its hacking label comes from :func:`label_run` on the job's ``E``
    checkpoints (``label_options``: ``drop_share``, ``min_drop``; a run without
    gold is not hacking: it is not labelled, :func:`has_all_gold` tells the
    caller to report no detection figures), and its observed scores add the
    workload's eval noise with the workload's own draws. Other jobs keep their curves and labels.
    """
    if not runs:
        raise ConfigError("curves", {}, "the curve log holds no runs")
    for t in job_types:
        if t not in JOB_TYPES:
            raise ConfigError("job_types", t, f"must be among {', '.join(JOB_TYPES)}")
    type_ids = [JOB_TYPES.index(t) for t in job_types]
    jobs = np.flatnonzero(np.isin(workload.job_type, type_ids))
    if jobs.size == 0:
        return workload
    names = sorted(runs)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x6C06]))
    order = rng.permutation(len(names))
    e = workload.evals_per_job
    c = workload.curves
    gold, start, loss, proxy = c.gold.copy(), c.start.copy(), c.loss.copy(), c.proxy.copy()
    peak, hacking = c.peak_progress.copy(), workload.hacking.copy()
    rlhf = JOB_TYPES.index("rlhf")
    labels = {name: label_run(runs[name], evals=e, **label_options) for name in names}
    offset = np.zeros_like(gold) if any(has_gold(r) for r in runs.values()) else None
    for i, j in enumerate(jobs):
        name = names[order[i % len(names)]]
        run, label = runs[name], labels[name]
        start[j], gold[j] = resample(run, "eval_score", e)
        if has_gold(run):   # true score = logged gold; the logged eval's own error rides on the observed score
            start[j], true = resample(run, "gold", e)
            offset[j] = gold[j] - true
            gold[j] = true
        got = resample(run, "train_loss", e)
        if got is not None:
            loss[j] = got[1]
        got = resample(run, "proxy_reward", e)
        if got is not None and workload.job_type[j] == rlhf:
            proxy[j] = got[1]
        hacking[j] = label is not None and label.hacking   # a run without gold is not labelled
        peak[j] = label.peak_progress if hacking[j] else np.inf
    if offset is not None and c.eval_offset is not None:
        offset = np.where(np.isin(np.arange(workload.n), jobs)[:, None], offset, c.eval_offset)
    setup = c.setup
    if setup is not None:   # a curve log records no configuration: a replayed job's is unknown
        setup = {k: np.where(np.isin(np.arange(workload.n), jobs), np.nan, v) for k, v in setup.items()}
    curves = Curves(gold=gold, start=start, eval_z=c.eval_z, loss=loss, proxy=proxy, peak_progress=peak,
                    eval_offset=offset, setup=setup)
    w = dataclasses.replace(workload, curves=curves, hacking=hacking)
    w.validate()
    return w

