"""Run many episodes in parallel, appending each result to a JSONL file as it finishes.

A run is a pure function of its :class:`RunSpec` (policy names, parameters and
a fully resolved, seeded :class:`~evalstop_gym.config.WorkloadConfig`), so
results do not depend on the backend, the number of workers or the order in
which runs finish. Its ``run_id`` hashes the whole spec and the source of the
simulator and the policies (:func:`code_fingerprint`); re-running a sweep
against the same file skips every run id already there, so an interrupted
sweep resumes where it stopped, and results of older code are never reused.

Backends: ``local`` (a :class:`~concurrent.futures.ProcessPoolExecutor`; one
worker runs in-process) and ``ray``: a local Ray started with ``num_cpus``
set to the worker count, unless Ray is already initialized, or an existing
Ray cluster at ``ray_address`` (or ``$RAY_ADDRESS``), which then gets this
checkout's ``evalstop_gym`` as its code (Ray's
``runtime_env`` ``py_modules``), so every node runs what the driver runs. A
Ray task whose worker process dies is run again (``max_retries``); a run is
a pure function of its spec, so a retry gives the same record.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import sys
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from .. import __version__
from ..config import ConfigError, UsageError, WorkloadConfig
from ..processes import cap_workers, init_worker
from .spec import Point

BACKENDS = ("local", "ray")


@dataclass(frozen=True)
class RunSpec:
    """One episode: ``stopper(scheduler)`` with ``params`` on the workload ``config``."""

    scheduler: str
    stopper: str
    params: tuple[tuple[str, Any], ...]
    config: WorkloadConfig

    @classmethod
    def of(cls, point: Point, base: WorkloadConfig, seed: int) -> "RunSpec":
        config = base.replace(**dict(point.workload), seed=seed)
        return cls(point.scheduler, point.stopper, point.params, config)

    @functools.cached_property
    def run_id(self) -> str:
        """Stable hash of everything the result depends on: the spec and the code."""
        key = json.dumps([__version__, code_fingerprint(), self.scheduler, self.stopper,
                          [list(p) for p in self.params], repr(self.config)])
        return hashlib.sha1(key.encode()).hexdigest()[:16]

    def play(self) -> dict[str, Any]:
        """Run the episode: :func:`execute` (a subclass may play another workload or policy)."""
        return execute(self)

    def describe(self) -> dict[str, Any]:
        """The spec as plain JSON: policy, the workload's scalar fields and the world it is drawn from."""
        return {"scheduler": self.scheduler, "stopper": self.stopper, "params": dict(self.params),
                "workload": {**describe_config(self.config), **describe_world(self.config)}}


def describe_config(config: WorkloadConfig) -> dict[str, Any]:
    """A workload's scalar fields (and its cluster's description) as plain JSON."""
    cfg = {f.name: getattr(config, f.name) for f in fields(config)
           if isinstance(getattr(config, f.name), (int, float, str))}
    if config.cluster is not None:
        cfg["cluster"] = config.cluster.describe()
    return cfg


def describe_world(config: WorkloadConfig) -> dict[str, Any]:
    """The curve and world models a workload is drawn from, as flat ``curves.<field>`` / ``world.<field>``
    keys (plain JSON values: a range is a list): what tells E8's peak ranges and E10's worlds apart."""
    out = {}
    for prefix, model in (("curves", config.curves), ("world", config.world)):
        for f in fields(model):
            value = getattr(model, f.name)
            out[f"{prefix}.{f.name}"] = list(value) if isinstance(value, tuple) else value
    return out


@functools.lru_cache(maxsize=None)
def code_fingerprint() -> str:
    """Hash of the modules a result depends on: ``evalstop_gym/*.py``, ``evalstop_gym/baselines/*.py`` and
    ``evalstop_gym/compiled/*.py`` (the compiled path plays built-in policies).

    Adapters (experiments, commands, envs) are left out: editing a table or a
    plot does not throw finished runs away.
    """
    package = Path(__file__).resolve().parents[1]
    h = hashlib.sha1()
    for folder in (package, package / "baselines", package / "compiled"):
        for f in sorted(folder.glob("*.py")):
            h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:12]


def execute(spec: RunSpec) -> dict[str, Any]:
    """Run one episode; return its metrics (:func:`evalstop_gym.compute_metrics`) and, under
    ``jobs``, each job's JCT and stop flag (:func:`evalstop_gym.metrics.job_results`)."""
    from evalstop_gym.baselines import make_policy

    from ..compiled import run_episode
    from ..metrics import compute_metrics, job_results
    from ..workload import generate

    out = run_episode(generate(spec.config), make_policy(spec.scheduler, spec.stopper, **dict(spec.params)))
    return {**compute_metrics(out), JOBS_KEY: job_results(out)}


JOBS_KEY = "jobs_detail"   # per-job results inside a run's metrics (tables pair jobs across arms)


def execute_record(spec: RunSpec) -> tuple[str, dict[str, Any]]:
    """Run one episode and serialize its record (:func:`serialize`), here in the worker.

    Returns the JSONL line and the metrics as read back from it (what a resume
    would load). The checksum and the JSON of a 5,000-job run cost about 5 ms;
    done in the parent they would be serial work that caps a sweep at a few
    hundred runs a second whatever the worker count, so the parent only
    appends the line.
    """
    return serialize(record(spec, spec.play()))


def serialize(rec: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """A record as one line of strict JSON (no NaN or Infinity, keys sorted), and its metrics read back from
    that line: exactly what a later resume loads."""
    line = json.dumps(rec, sort_keys=True, allow_nan=False)
    return line, json.loads(line)["metrics"]


def record(spec: RunSpec, metrics: Mapping[str, Any]) -> dict[str, Any]:
    """The JSONL record of a finished run, with the checksum :class:`ResultStore` checks on load."""
    return {"run_id": spec.run_id, "code": code_fingerprint(), "spec": spec.describe(), "metrics": metrics,
            "checksum": metrics_checksum(spec.run_id, metrics)}


def metrics_checksum(run_id: str, metrics: Mapping[str, Any]) -> str:
    """Hash of a run id and its metrics as canonical strict JSON: an edited metric no longer matches."""
    text = json.dumps([run_id, metrics], sort_keys=True, allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def record_problem(rec: Any) -> str | None:
    """Why a loaded record cannot be reused (``None`` if it can): schema, then checksum."""
    if not isinstance(rec, dict):
        return "not a JSON object"
    run_id, metrics = rec.get("run_id"), rec.get("metrics")
    if not (isinstance(run_id, str) and len(run_id) == 16 and all(c in "0123456789abcdef" for c in run_id)):
        return "run_id is not a 16-digit hex string"
    if not isinstance(metrics, dict) or not metrics:
        return "metrics is not a non-empty object"
    for k, v in metrics.items():
        if k == JOBS_KEY:
            if not (isinstance(v, dict) and set(v) == {"jct_h", "stopped"}
                    and all(isinstance(col, list) and len(col) == len(v["jct_h"]) for col in v.values())
                    and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                            for col in v.values() for x in col)):
                return f"metric {k!r} is not per-job lists of numbers (jct_h, stopped)"
            continue
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            return f"metric {k!r} is {v!r}, not a number or null"
    if rec.get("checksum") != metrics_checksum(run_id, metrics):
        return "checksum does not match the metrics (edited or from an older version)"
    return None


class ResultStore:
    """Results on disk, one JSON record a line, keyed by run id; appended as runs finish.

    Opening a file that ends in a partial line (a writer killed mid-line)
    truncates that line away. Every other record is checked
    (:func:`record_problem`: schema, then the checksum of its metrics); a bad
    one is reported on stderr, moved to ``<file>.rejected`` and left out, so
    its run is run again. Each record is written with one ``write`` and
    flushed, as strict JSON (no NaN or Infinity). Writers of one file must not
    overlap: :func:`exclusive` gives the lock ``reproduce`` holds.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.metrics: dict[str, dict[str, Any]] = {}
        if self.path.is_dir():
            raise UsageError(f"{self.path} is a directory, not a results file: move it away or use another --out")
        if self.path.exists():
            self._load()

    def _load(self) -> None:
        if not self.path.is_file():
            raise UsageError(f"{self.path} is not a regular file: move it away or use another --out")
        data = self.path.read_bytes()
        end = data.rfind(b"\n") + 1
        if end < len(data):     # a partial last line: drop it so appends start on a fresh line
            with open(self.path, "r+b") as f:
                f.truncate(end)
            data = data[:end]
        good, rejected = [], []
        for n, line in enumerate(data.splitlines(keepends=True), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line, parse_constant=_refuse_constant)
            except ValueError:   # JSONDecodeError, UnicodeDecodeError, NaN / Infinity
                problem = "not valid strict JSON"
            else:
                problem = record_problem(rec)
            if problem is None:
                self.metrics[rec["run_id"]] = rec["metrics"]
                good.append(line)
            else:
                rejected.append(line)
                print(f"warning: {self.path}:{n}: bad record skipped, its run will be run again: {problem}",
                      file=sys.stderr)
        if rejected:
            self._set_aside(good, rejected)

    def _set_aside(self, good: list[bytes], rejected: list[bytes]) -> None:
        """Move rejected lines to ``<file>.rejected`` (kept for inspection) and rewrite the file atomically."""
        with open(self.path.with_name(self.path.name + ".rejected"), "ab") as f:
            f.write(b"".join(ln if ln.endswith(b"\n") else ln + b"\n" for ln in rejected))
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_bytes(b"".join(good))
        os.replace(tmp, self.path)

    def __contains__(self, run_id: str) -> bool:
        return run_id in self.metrics

    def __len__(self) -> int:
        return len(self.metrics)

    def add(self, record: Mapping[str, Any]) -> None:
        """Append one record; a write error (a full disk) is a one-line :class:`UsageError`."""
        self.append(record["run_id"], *serialize(record))

    def append(self, run_id: str, line: str, metrics: dict[str, Any]) -> None:
        """Append a record's line and metrics as :func:`serialize` gives them."""
        try:
            _append_line(self.path, line)
        except OSError as e:
            raise UsageError(f"cannot append to {self.path} ({e.strerror or e}); the {len(self)} runs "
                             "recorded so far are kept: fix that and run the same command again to resume") from None
        self.metrics[run_id] = metrics


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not strict JSON")


def _append_line(path: Path, line: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()


@contextlib.contextmanager
def exclusive(folder: str | os.PathLike, echo: Callable[[str], None] | None = None):
    """Hold ``<folder>/.lock`` (``filelock``: an OS lock the kernel drops if the holder dies, even on
    ``kill -9``). A second holder waits, saying so through ``echo``, then finds the runs done."""
    from filelock import FileLock, Timeout

    lock = FileLock(os.path.join(os.fspath(folder), ".lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        if echo is not None:
            echo(f"another reproduce is writing to {os.fspath(folder)}; waiting for it to finish "
                 "(its finished runs will be reused)")
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


class _Inline:
    """Runs each spec at submission, in this process (one worker)."""

    class _Done:
        def __init__(self, result):
            self.result = result

    def __init__(self, workers: int):
        self.window = 1

    def submit(self, spec: RunSpec):
        return self._Done(execute_record(spec))

    def wait_one(self, handles: list) -> tuple[Any, tuple[str, dict[str, Any]]]:
        return handles[0], handles[0].result

    def close(self, cancel: bool) -> None:
        pass


class _LocalPool:
    def __init__(self, workers: int):
        self.pool = ProcessPoolExecutor(max_workers=workers, initializer=init_worker,
                                        initargs=(os.getpid(),))
        self.window = 4 * workers   # few in flight, so a limit or Ctrl-C stops soon

    def submit(self, spec: RunSpec) -> Future:
        return self.pool.submit(execute_record, spec)

    def wait_one(self, handles: list) -> tuple[Any, tuple[str, dict[str, Any]]]:
        done, _ = wait(handles, return_when=FIRST_COMPLETED)
        h = min(done, key=handles.index)
        return h, h.result()

    def close(self, cancel: bool) -> None:
        self.pool.shutdown(wait=True, cancel_futures=cancel)


class _RayPool:
    RETRIES = 3  # a run whose worker process dies is run again, up to this many times

    def __init__(self, workers: int, address: str | None = None):
        import logging

        import ray

        import evalstop_gym

        self.ray = ray
        self.started = not ray.is_initialized()
        address = address or os.environ.get("RAY_ADDRESS") or None
        if self.started and address:  # an existing cluster: its nodes run this checkout's code
            check_ray_address(address)
            ray.init(address=address, runtime_env={"py_modules": [evalstop_gym]},
                     log_to_driver=False, logging_level=logging.ERROR)
        elif self.started:
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False,
                     logging_level=logging.ERROR)
        self.remote = ray.remote(max_retries=self.RETRIES)(execute_record)
        self.window = 4 * workers

    def submit(self, spec: RunSpec):
        return self.remote.remote(spec)

    def wait_one(self, handles: list) -> tuple[Any, tuple[str, dict[str, Any]]]:
        done, _ = self.ray.wait(handles, num_returns=1)
        return done[0], self.ray.get(done[0])

    def close(self, cancel: bool) -> None:
        if self.started:
            self.ray.shutdown()


RAY_CONNECT_TIMEOUT_S = 5.0   # Ray itself retries a silent address for minutes


def check_ray_address(address: str, timeout_s: float = RAY_CONNECT_TIMEOUT_S) -> None:
    """:class:`ConfigError` unless the head at ``host:port`` (or ``ray://host:port``) accepts a TCP connection
    within ``timeout_s``; ``auto`` and ``local`` are Ray's own and left to it."""
    import socket

    if address in ("auto", "local"):
        return
    host, sep, port = address.split("://", 1)[-1].rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError("ray_address", address, "must be HOST:PORT of a Ray head (or ray://HOST:PORT, auto)")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise ConfigError("ray_address", address, f"does not answer ({e.strerror or e or 'timed out'} within "
                                                  f"{timeout_s:g} s): is a Ray head running there?") from None


def make_pool(backend: str, workers: int, ray_address: str | None = None):
    if backend not in BACKENDS:
        raise ConfigError("backend", backend, f"must be one of {', '.join(BACKENDS)}")
    if backend == "ray":
        try:
            import ray  # noqa: F401
        except ImportError as e:
            raise ConfigError("backend", backend, f"needs Ray (pip install 'evalstop-gym[ray]'): {e}") from e
        return _RayPool(workers, ray_address)
    if ray_address:
        raise ConfigError("ray_address", ray_address, "needs backend 'ray'")
    return _Inline(workers) if workers == 1 else _LocalPool(workers)


def run_sweep(specs: Iterable[RunSpec], store: ResultStore, *, backend: str = "local", workers: int = 1,
              limit: int | None = None, on_done: Callable[[], None] | None = None,
              ray_address: str | None = None) -> int:
    """Run every spec whose run id is not in ``store``, appending results as they finish.

    ``ray_address``: with ``backend="ray"``, an existing Ray cluster to run on
    (``host:port`` of its head; default ``$RAY_ADDRESS``, else a local Ray).

    Runs start longest first (:func:`longest_first`), so the few long runs do
    not form the end of the sweep while the other workers idle. ``limit``
    stops after that many new runs, the costliest (the rest resume on the next
    call). ``on_done`` is called once per finished run (a progress bar).
    Returns the number of new runs.
    """
    cap_workers(workers, 1)   # checked even when nothing is left to run
    todo = longest_first(pending_specs(specs, store))
    if limit is not None:
        todo = todo[:limit]
    if not todo:
        return 0
    # a local pool: no more workers than runs and CPUs; a Ray cluster's CPUs are its own
    workers = min(workers, len(todo)) if backend == "ray" and ray_address else cap_workers(workers, len(todo))
    pool = make_pool(backend, workers, ray_address)
    inflight: dict[Any, RunSpec] = {}   # handle -> its spec, in submission order
    done = 0
    finished = False
    try:
        for spec in todo:
            inflight[pool.submit(spec)] = spec
            if len(inflight) >= pool.window:
                done += _collect_one(pool, inflight, store, on_done)
        while inflight:
            done += _collect_one(pool, inflight, store, on_done)
        finished = True
    finally:
        pool.close(cancel=not finished)
    return done


def _collect_one(pool, inflight: dict, store: ResultStore, on_done) -> int:
    h, (line, metrics) = pool.wait_one(list(inflight))
    store.append(inflight.pop(h).run_id, line, metrics)
    if on_done is not None:
        on_done()
    return 1


# Factors of estimated_cost for a scheduler's work per scheduling point, from CPU seconds per run measured on
# the large preset (5,000 jobs on 1,024 GPUs, no stopper, relative to FIFO; docs/scale.md, section 5):
# FIFO, SJF-Est and MaxThroughput about 1; SRTF-Est 1.7-1.8 (preemptive, running jobs in a kept order);
# SRTF-Progress 5.0-5.4 and LossAware 5.5-6.2 (each running job re-ranked at every point); Tiresias 4.5-5.5
# (its own queue lists, kept across points: an allocate() of its own). A scheduler whose waiting jobs'
# keys change re-sorts its queue at every point (none registered today).
PREEMPTS = 2
RERANKS_RUNNING = 3
OWN_LISTS = 2.5
RESORTS_WAITING = 10


def estimated_cost(spec: RunSpec) -> float:
    """Relative CPU cost of a run: events (jobs x (evals + 1)) times its scheduler's factors.

    Only the order runs start in depends on it, never a result.
    """
    from evalstop_gym.baselines import SCHEDULERS
    from evalstop_gym.policy import Scheduler

    cost = float(spec.config.jobs * (spec.config.evals_per_job + 1))
    cls = SCHEDULERS.get(spec.scheduler)
    if cls is not None:
        if cls.preemptive:
            cost *= PREEMPTS
        if cls.allocate is not Scheduler.allocate:
            cost *= OWN_LISTS
        else:
            if cls.preemptive and not cls.run_invariant_key:
                cost *= RERANKS_RUNNING
            if not cls.static_key:
                cost *= RESORTS_WAITING
    return cost


def longest_first(specs: list[RunSpec]) -> list[RunSpec]:
    """``specs`` by :func:`estimated_cost`, highest first; equal costs keep their order.

    Any order ends within the longest run's time after the first worker runs
    out of work; started longest first (Graham's LPT rule) the runs that
    finish last are short ones, as far as the estimate ranks them right.
    """
    return sorted(specs, key=estimated_cost, reverse=True)


def pending_specs(specs: Iterable[RunSpec], store: ResultStore) -> list[RunSpec]:
    """Specs not yet in ``store``, each run id once, in the given order."""
    seen: set[str] = set()
    out = []
    for s in specs:
        rid = s.run_id
        if rid not in seen and rid not in store:
            seen.add(rid)
            out.append(s)
    return out
