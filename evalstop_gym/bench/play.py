"""One bench run as a :class:`~evalstop_gym.experiments.runner.RunSpec`: the runner's pools, records and resume, unchanged.

A :class:`BenchSpec` adds what a plain spec cannot name: a replayed trace and
a replayed curve library (each file's hash is part of the run id) and a user
class (its module's source hash is part of the run id). It plays in any worker process, or on Ray, from its
fields alone. A user class plays in a process of its own (:mod:`.isolate`) unless ``in_process`` is set,
which the run id and the record then say.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..experiments.runner import RunSpec
from .policies import BenchPolicy, build
from .suite import Row, Trace, curves_path

# the metrics a scorecard reports (evalstop_gym.metrics.compute_metrics names); lower is better but for
# HIGHER_BETTER. RELATIVE ones are compared as a paired % change, the others as a paired difference.
METRICS = ("avg_jct_h", "p50_jct_h", "p99_jct_h", "makespan_h", "compute_waste_gpu_h", "gpu_hours",
           "precision", "recall", "f1", "fpr", "delivered_quality_regret", "preemptions")
COUNTS = ("true_positives", "false_positives", "false_negatives")   # played too: selection rules read them
HIGHER_BETTER = ("precision", "recall", "f1")
RELATIVE = ("avg_jct_h", "p50_jct_h", "p99_jct_h", "makespan_h", "compute_waste_gpu_h", "gpu_hours")


@functools.lru_cache(maxsize=8)
def file_hash(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


# What a curves row replays of each logged run: its eval and gold scores and its proxy reward. Its
# train_loss is left out (the world's modelled loss stays): TRL's GRPO and RLOO log the policy-gradient
# surrogate there (at or below 0, exactly 0 for RLOO), not a loss curve, which loss-based schedulers
# (LossAware: relative loss drop) cannot read.
NOT_REPLAYED = ("train_loss",)


@functools.lru_cache(maxsize=2)
def curve_library(path: str) -> dict:
    """The runs of a curve-log file, read once per process, without the :data:`NOT_REPLAYED` columns."""
    import dataclasses

    import numpy as np

    from ..curvelog import read_curve_log

    return {name: dataclasses.replace(run, **{c: np.full_like(getattr(run, c), np.nan) for c in NOT_REPLAYED})
            for name, run in read_curve_log(path, "csv").items()}


@dataclass(frozen=True)
class BenchSpec(RunSpec):
    """A run of the bench: a :class:`RunSpec` plus the row's trace, its curve library and a user class's source hash."""

    trace: Trace | None = None
    trace_path: str = ""
    trace_sha: str = ""
    source: str = ""
    curves: str = ""          # a shipped curve library's name (Row.curves), "" for none
    curves_path: str = ""
    curves_sha: str = ""
    in_process: bool = False  # a user class plays beside the simulator (``--in-process``), not in its own process

    @classmethod
    def make(cls, policy: BenchPolicy, row: Row, seed: int, in_process: bool = False) -> "BenchSpec":
        path = row.trace.path() if row.trace is not None else None
        curves = curves_path(row.curves) if row.curves is not None else ""
        return cls(policy.scheduler, policy.stopper, policy.params, row.config(seed), row.trace,
                   str(path or ""), file_hash(str(path)) if path else "", policy.source,
                   row.curves or "", curves, file_hash(curves) if curves else "", in_process and bool(policy.source))

    @functools.cached_property
    def run_id(self) -> str:
        """The runner's id (a plain spec's own, which the runner's other users look runs up by), with what a
        plain spec cannot name. The inputs the runner's code hash misses (data files, library versions) are
        guarded per folder instead (:func:`~.run.set_aside_stale`)."""
        plain = RunSpec.run_id.func(self)
        if not (self.trace_sha or self.source or self.curves_sha or self.in_process):
            return plain
        key = [plain, self.trace_sha, self.trace and self.trace.jobs, self.source]
        if self.curves_sha:
            key += [self.curves, self.curves_sha, list(NOT_REPLAYED)]
        if self.in_process:
            key.append("in-process")
        return hashlib.sha1(json.dumps(key).encode()).hexdigest()[:16]

    @property
    def workload_key(self) -> str:
        """What the workload depends on: the config (as the run id reads it) and the replayed files' hashes."""
        return json.dumps([repr(self.config), self.trace_sha, self.trace and self.trace.jobs, self.curves,
                           self.curves_sha])

    def workload(self):
        """The row's workload for this seed: drawn once per process (:func:`cached_workload`), read-only."""
        return cached_workload(self)

    def draw_workload(self):
        """The workload drawn afresh (what :meth:`workload` caches)."""
        if self.trace is None:
            from ..workload import generate

            w = generate(self.config)
        else:
            from ..traces import load_trace

            w = load_trace(self.trace_path, self.trace.format, self.config, jobs=self.trace.jobs, sample=True,
                           gpu_scale="fit", on_bad_row="skip")
        if self.curves:   # as `simulate --curves` (less NOT_REPLAYED): the RLHF jobs replay the library's runs
            from ..curvelog import apply_curve_log

            w = apply_curve_log(w, curve_library(self.curves_path), seed=self.config.seed)
        return w

    def play(self) -> dict[str, Any]:
        import warnings

        from ..compiled import run_episode
        from ..metrics import compute_metrics

        with warnings.catch_warnings():   # a trace's skipped rows: counted in its report, the same every run
            warnings.simplefilter("ignore")
            workload = self.workload()
        if self.source and not self.in_process:   # outside code: in its own process, never imported here
            from .isolate import Remote

            policy = Remote(self.scheduler, self.stopper, self.params)
        else:
            policy = build(self.scheduler, self.stopper, dict(self.params))
        return compute_metrics(run_episode(workload, policy))   # a Remote policy is never compiled

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        if self.trace is not None:
            out["trace"] = {"file": self.trace.file, "format": self.trace.format, "jobs": self.trace.jobs,
                            "sha256": self.trace_sha}
        if self.curves:
            out["curves"] = {"library": self.curves, "sha256": self.curves_sha, "not_replayed": list(NOT_REPLAYED)}
        if self.source:
            out["source"] = self.source
            out["process"] = "in-process" if self.in_process else "isolated"
        return out


# Workloads a process keeps (:func:`cached_workload`): every validation workload of a suite (2 seeds x 18 rows)
# with room to spare; one of 600 jobs x 10 evals holds about 0.5 MB.
WORKLOAD_CACHE = 64
_workloads: "OrderedDict[str, Any]" = OrderedDict()


def cached_workload(spec: BenchSpec):
    """``spec``'s workload, drawn the first time this process asks for it (keyed by
    :attr:`BenchSpec.workload_key`, least recently used dropped beyond :data:`WORKLOAD_CACHE`).

    Every arm and every tuning trial plays the same few workloads, and drawing one costs most of a compiled
    episode's CPU, so a trial costs simulation only. The workload is shared between runs, so its arrays are
    made read-only: a run that tried to change one would raise instead of changing the next run's input.
    Worker processes forked after :func:`warm_workloads` inherit the cache.
    """
    key = spec.workload_key
    w = _workloads.get(key)
    if w is None:
        w = _workloads[key] = _read_only(spec.draw_workload())
        if len(_workloads) > WORKLOAD_CACHE:
            _workloads.popitem(last=False)
    else:
        _workloads.move_to_end(key)
    return w


def warm_workloads(rows, policy: BenchPolicy) -> None:
    """Draw every workload of ``rows`` (each seed) in this process, and load the compiled kernel, so that worker
    processes forked from it find both ready (:func:`cached_workload`,
    :func:`evalstop_gym.compiled.preload`); under another start method each worker makes its own."""
    import multiprocessing
    import warnings

    from ..compiled import preload

    if multiprocessing.get_start_method(allow_none=False) != "fork":
        return
    preload()
    with warnings.catch_warnings():   # as BenchSpec.play
        warnings.simplefilter("ignore")
        for r in rows:
            for s in r.seeds:
                BenchSpec.make(policy, r, s).workload()


def _read_only(w):
    """``w`` with every array it holds (its curves' too) made read-only, in place; returns ``w``."""
    import numpy as np

    for holder in (w, w.curves, *([w.curves.setup] if w.curves.setup else [])):
        values = holder.values() if isinstance(holder, dict) else vars(holder).values()
        for a in values:
            if isinstance(a, np.ndarray):
                a.flags.writeable = False
    return w


@dataclass(frozen=True)
class LearnedSpec(RunSpec):
    """A saved model's run (:func:`~.arms.rows_of`: the rows it runs on). By default its model is loaded, and
    asked, only in a process of its own (:mod:`.isolate`), while the simulator, the labels and the metrics stay
    here: a stop-policy there answers public views over :class:`~.isolate.Remote`; a learned scheduler's env
    plays here and its model there gets each observation and action mask (:func:`~.isolate.learned_episode`).
    ``in_process``: the learned layer's provider plays it in this process (the run id is then a plain spec's,
    as before isolation)."""

    in_process: bool = False

    @functools.cached_property
    def run_id(self) -> str:
        plain = RunSpec.run_id.func(self)
        return plain if self.in_process else hashlib.sha1(json.dumps([plain, "isolated"]).encode()).hexdigest()[:16]

    def play(self) -> dict[str, Any]:
        from ..experiments.spec import LEARNED
        from .isolate import Remote, learned_episode

        if self.in_process:
            raise RuntimeError("an in-process learned run is played by the learned provider (bench.arms.play)")
        if self.scheduler == LEARNED:
            return learned_episode(self)
        from ..metrics import compute_metrics
        from ..policy import drive
        from ..simulator import Simulator
        from ..workload import generate

        return compute_metrics(drive(Simulator(generate(self.config)), Remote(self.scheduler, self.stopper, self.params)))

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "process": "in-process" if self.in_process else "isolated"}


def learned_spec(policy: BenchPolicy, row: Row, seed: int, in_process: bool = False) -> LearnedSpec:
    """A saved model's run on ``row``'s workload of ``seed``."""
    return LearnedSpec(policy.scheduler, policy.stopper, policy.params, row.config(seed), in_process)
