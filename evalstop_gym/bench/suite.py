"""The bench's suites as data: one :class:`Row` a line, each a world played on fixed seeds.

A row is a world (a calibration of :data:`evalstop_gym.config.CALIBRATIONS`),
a job-mix preset, a cluster (size, nodes, GPU types, placement), an offered
load, an eval-noise level, and optionally a replayed real trace. Every policy
plays every row on the row's test seeds; the tuner (:mod:`.tune`) plays the
same rows on :meth:`Row.validation_seeds`. A suite's :func:`suite_hash` covers
every field of every row, so two results files are comparable only when
they played the same grid (:mod:`.results`).

Adding a world is one line: ``Row("grounded", calibration="grounded")``. A
row whose calibration is not in this checkout, or whose trace file is absent,
is skipped with a note in the results (and two files that skipped different
rows are refused as incomparable).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import CALIBRATIONS, ConfigError, WorkloadConfig
from ..worldfile import is_world_path
from ..seeds import VALIDATION, check_seeds

# Where a row's trace is looked for: $EVALSTOP_GYM_TRACES, else ../shared/traces beside the checkout
# (the project's copy of public traces; never copied into the repository).
TRACES_ENV = "EVALSTOP_GYM_TRACES"
TRACE_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "traces"


@dataclass(frozen=True)
class Trace:
    """A real trace replayed as a row's arrivals, lengths and GPU demands (:func:`evalstop_gym.traces.load_trace`).

    ``jobs`` of them are a seeded uniform sample of the whole trace (a new sample per seed);
    arrivals are rescaled to the row's load, and demands shrunk to fit its GPUs (``gpu_scale="fit"``).
    """

    file: str
    format: str = "philly"
    jobs: int = 300

    @property
    def shipped(self) -> bool:
        """Whether the file ships in the package's data (a trace's shape) rather than in the traces folder."""
        from ..traces import SHAPE

        return self.format == SHAPE

    def path(self) -> Path | None:
        """The trace file, or ``None`` if it is not on this machine (a shipped shape is always there)."""
        if self.shipped:
            from ..data import DATA_DIR

            return Path(DATA_DIR) / self.file
        folder = Path(os.environ.get(TRACES_ENV) or TRACE_DIR)
        p = folder / self.file
        return p if p.is_file() else None


@dataclass(frozen=True)
class Row:
    """One world of a suite, played on ``seeds`` (test seeds; :func:`evalstop_gym.seeds.check_seeds`).

    ``cluster``: ``None`` (the calibration's default: a flat pool, or nodes of 8 GPUs),
    ``"flat"``, ``"NxG"`` / ``"NxG-<placement>"`` (N nodes of G GPUs) or ``"two-types"``
    (8 x 8 GPUs, half of an older generation). ``noise``: the eval-noise sigma added to
    every score (``None``: the calibration's own). ``curves``: a shipped curve library
    (:data:`CURVE_LIBRARIES`) whose logged runs the RLHF jobs replay, dealt by a seeded
    shuffle (:func:`evalstop_gym.curvelog.apply_curve_log`, as ``simulate --curves`` does).
    """

    name: str
    calibration: str = "paper"
    workload: str = "rlhf-heavy"
    jobs: int = 200
    gpus: int = 64
    cluster: str | None = None
    load: float = 1.0
    noise: float | None = None
    trace: Trace | None = None
    seeds: tuple[int, ...] = ()
    curves: str | None = None
    base: WorkloadConfig | None = None   # a whole workload config instead of the fields above (:meth:`of_config`)

    @classmethod
    def of_config(cls, name: str, base: WorkloadConfig, seeds) -> "Row":
        """A row that is ``base`` itself (only its seed changes): a world no suite field describes whole, such as
        the one ``targets`` judges in. Not for suites: a suite's rows are their fields, so their hash says all."""
        return cls(name, calibration=base.calibration, seeds=tuple(seeds), base=base)

    @property
    def synthetic(self) -> bool:
        """Every job generated from the config (no replayed trace or logged curves): what a saved model plays."""
        return self.trace is None and self.curves is None

    def missing(self) -> str | None:
        """Why this row cannot be played here (``None``: it can)."""
        if self.calibration not in CALIBRATIONS and not (is_world_path(self.calibration)
                                                         and os.path.isfile(self.calibration)):
            return (f"calibration {self.calibration!r} is neither in this version ({', '.join(CALIBRATIONS)}) "
                    "nor a world file here")
        if self.curves is not None and self.curves not in CURVE_LIBRARIES:
            return f"curve library {self.curves!r} is not in this version ({', '.join(CURVE_LIBRARIES)})"
        if self.trace is not None and self.trace.path() is None:
            return (f"trace {self.trace.file} not found in {os.environ.get(TRACES_ENV) or TRACE_DIR} "
                    f"(set ${TRACES_ENV} to its folder)")
        return None

    def config(self, seed: int) -> WorkloadConfig:
        """The row's workload config with ``seed`` (for a trace row: its :func:`~evalstop_gym.traces.trace_config`)."""
        if self.base is not None:
            return self.base.replace(seed=seed)
        fields: dict[str, Any] = {"calibration": self.calibration, "workload": self.workload, "jobs": self.jobs,
                                  "gpus": self.gpus, "load": self.load, "seed": seed}
        if self.noise is not None:
            fields["noise"] = self.noise
        if self.cluster is not None:
            fields["cluster"] = cluster_spec(self.cluster)
        if self.trace is not None:
            from ..traces import trace_config

            return trace_config(**fields)
        return WorkloadConfig(**fields)

    def validation_seeds(self, n: int) -> list[int]:
        """``n`` validation seeds of this row, the same on every machine (the tuner's workloads)."""
        digest = int(hashlib.sha256(self.name.encode()).hexdigest()[:8], 16)
        first = VALIDATION.first + (digest % 1000) * 1000
        return check_seeds("validation", range(first, first + n))

    def describe(self) -> dict[str, Any]:
        """Every field; a field added after suite v1 only when set, so v1's hash is what its results carry."""
        out = dataclasses.asdict(self)
        for name in LATER_FIELDS:
            if out[name] is None:
                del out[name]
        return out


LATER_FIELDS = ("curves", "base")


def cluster_spec(name: str):
    """The :class:`~evalstop_gym.cluster.ClusterSpec` of a row's ``cluster`` text."""
    from ..cluster import PLACEMENTS, CLUSTER_PRESETS, ClusterSpec, uniform

    if name == "flat":
        return None
    if name in CLUSTER_PRESETS:
        return CLUSTER_PRESETS[name]()
    size, _, placement = name.partition("-")
    nodes, x, per_node = size.partition("x")
    if not (x and nodes.isdigit() and per_node.isdigit()) or (placement and placement not in PLACEMENTS):
        raise ConfigError("cluster", name, f"must be flat, {', '.join(CLUSTER_PRESETS)} or NxG[-placement] "
                          f"with a placement among {', '.join(PLACEMENTS)}")
    spec: ClusterSpec = uniform(int(nodes), int(per_node), placement or "consolidate")
    return spec


def _seeds(row: int, n: int = 4) -> tuple[int, ...]:
    """Row ``row``'s test seeds: a block of its own from 1000, clear of the seeds any default was tuned on."""
    return tuple(range(1000 + 100 * row, 1000 + 100 * row + n))


CURVE_LIBRARIES = ("trl-library",)   # Row.curves: the curve libraries shipped in evalstop_gym/data


def curves_path(name: str) -> str:
    """The file of shipped curve library ``name`` (:data:`CURVE_LIBRARIES`)."""
    from ..data import TRL_LIBRARY

    if name not in CURVE_LIBRARIES:
        raise ConfigError("curves", name, f"must be one of {', '.join(CURVE_LIBRARIES)}")
    return {"trl-library": TRL_LIBRARY}[name]


PHILLY = Trace("philly_jobs_pollux.csv", "philly", jobs=300)
# Philly's shape (evalstop_gym.trace_shape): quantiles fitted to the trace, shipped where the trace is not
PHILLY_SHAPE = Trace("philly_shape.json", "shape", jobs=300)

# Suite v1. Sizes are moderate so the whole grid runs in minutes on 2 cores (docs/bench.md);
# a change to any row is a new suite version, never an edit of v1.
V1: tuple[Row, ...] = (
    Row("paper", seeds=_seeds(0)),
    Row("paper-noise-0.05", noise=0.05, seeds=_seeds(1)),
    Row("paper-noise-0.10", noise=0.10, seeds=_seeds(2)),
    Row("paper-balanced", workload="balanced", seeds=_seeds(3)),
    Row("paper-lora-heavy", workload="lora-heavy", seeds=_seeds(4)),
    Row("paper-load-0.7", load=0.7, seeds=_seeds(5)),
    Row("paper-load-1.5", load=1.5, seeds=_seeds(6)),
    Row("paper-8x8-spread", cluster="8x8-spread", seeds=_seeds(7)),
    Row("paper-two-types", cluster="two-types", seeds=_seeds(8)),
    Row("paper-256-gpus", jobs=600, gpus=256, cluster="32x8", seeds=_seeds(9)),
    Row("realistic", calibration="realistic", seeds=_seeds(10)),
    Row("realistic-balanced", calibration="realistic", workload="balanced", seeds=_seeds(11)),
    Row("realistic-load-1.5", calibration="realistic", load=1.5, seeds=_seeds(12)),
    Row("realistic-8x8-first-fit", calibration="realistic", cluster="8x8-first-fit", seeds=_seeds(13)),
    Row("realistic-256-gpus", calibration="realistic", jobs=600, gpus=256, seeds=_seeds(14)),
    Row("realistic-philly", calibration="realistic", trace=PHILLY, seeds=_seeds(15)),
)

# Suite v2: v1 unchanged, then the grounded world (calibration "grounded": the world fitted to real TRL
# runs, docs/calibration.md) and the same world whose RLHF jobs replay the shipped TRL curve library.
V2: tuple[Row, ...] = V1 + (
    Row("grounded", calibration="grounded", seeds=_seeds(16)),
    Row("grounded-trl-curves", calibration="grounded", curves="trl-library", seeds=_seeds(17)),
)

# Suite v3: v2 with its one row that replays an unshipped file (the Philly trace) replaced by the trace's
# shipped shape (PHILLY_SHAPE, on the same seeds), so a plain clone plays every row.
V3: tuple[Row, ...] = tuple(
    Row("realistic-philly-shape", calibration="realistic", trace=PHILLY_SHAPE, seeds=_seeds(15))
    if r.name == "realistic-philly" else r for r in V2)

SUITES: dict[str, tuple[Row, ...]] = {"v1": V1, "v2": V2, "v3": V3}
DEFAULT_SUITE = "v3"


def suite(name: str) -> tuple[Row, ...]:
    """The rows of suite ``name`` (their seeds checked: test seeds, none a default was tuned on)."""
    if name not in SUITES:
        raise ConfigError("suite", name, f"must be one of {', '.join(SUITES)}")
    rows = SUITES[name]
    for r in rows:
        check_seeds("test", r.seeds)
    return rows


@functools.lru_cache(maxsize=None)
def suite_hash(name: str) -> str:
    """Hash of every field of every row of suite ``name``: equal hashes, the same grid."""
    text = json.dumps([name, [r.describe() for r in suite(name)]], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
