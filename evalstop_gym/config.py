"""Typed, validated configuration of a workload and its cluster.

Every number here is a modelling choice; ``docs/calibration.md`` gives each one
with its reason. A bad value raises :class:`ConfigError` (a ``ValueError``)
naming the field, the value and what is allowed.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

JOB_TYPES = ("lora", "dpo", "rlhf")


class ConfigError(ValueError):
    """A configuration value is out of range: names the field, value and what is allowed."""

    def __init__(self, field_name: str, value: Any, allowed: str):
        self.field = field_name
        self.value = value
        self.allowed = allowed
        super().__init__(f"{field_name}={value!r} is invalid: {allowed}")


class UsageError(ValueError):
    """Bad command-line input that is not a config field (paths, names, ...): one line, exit 2."""


def check_range(name: str, value: Any, lo: float | None = None, hi: float | None = None,
                *, lo_open: bool = False, integer: bool = False) -> None:
    """Raise :class:`ConfigError` unless ``value`` is a finite number in the range."""
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            integer and not isinstance(value, int)) or not math.isfinite(value):
        raise ConfigError(name, value, f"must be {kind}{_range_text(lo, hi, lo_open)}")
    if (lo is not None and (value <= lo if lo_open else value < lo)) or (hi is not None and value > hi):
        raise ConfigError(name, value, f"must be {kind}{_range_text(lo, hi, lo_open)}")


def _range_text(lo, hi, lo_open) -> str:
    if lo is not None and hi is not None:
        return f" in {'(' if lo_open else '['}{lo}, {hi}]"
    if lo is not None:
        return f" {'>' if lo_open else '>='} {lo}"
    if hi is not None:
        return f" <= {hi}"
    return ""


@dataclass(frozen=True)
class JobTypeModel:
    """GPU demand and true-length distribution of one job type.

    Lengths are log-normal (hours): ``median_h * exp(sigma * N(0,1))`` clipped to
    ``[min_h, max_h]``. GPU demand is drawn from ``gpu_choices`` with ``gpu_probs``.
    """

    gpu_choices: tuple[int, ...]
    gpu_probs: tuple[float, ...]
    median_h: float
    sigma: float
    min_h: float = 0.1
    max_h: float = 48.0

    def validate(self, name: str) -> None:
        if len(self.gpu_choices) == 0 or len(self.gpu_choices) != len(self.gpu_probs):
            raise ConfigError(f"{name}.gpu_choices", self.gpu_choices,
                              "must be non-empty and as long as gpu_probs")
        for g in self.gpu_choices:
            check_range(f"{name}.gpu_choices", g, 1, integer=True)
        for p in self.gpu_probs:
            check_range(f"{name}.gpu_probs", p, 0.0, 1.0)
        if abs(sum(self.gpu_probs) - 1.0) > 1e-6:
            raise ConfigError(f"{name}.gpu_probs", self.gpu_probs, "must sum to 1")
        check_range(f"{name}.median_h", self.median_h, 0.0, lo_open=True)
        check_range(f"{name}.sigma", self.sigma, 0.0)
        check_range(f"{name}.min_h", self.min_h, 0.0, lo_open=True)
        check_range(f"{name}.max_h", self.max_h, self.min_h)

    @property
    def mean_gpus(self) -> float:
        return sum(g * p for g, p in zip(self.gpu_choices, self.gpu_probs))

    @property
    def max_gpus(self) -> int:
        return max(g for g, p in zip(self.gpu_choices, self.gpu_probs) if p > 0)


# Demand and length per job type; reasons in docs/calibration.md.
DEFAULT_JOB_TYPES: dict[str, JobTypeModel] = {
    "lora": JobTypeModel(gpu_choices=(1, 2, 4), gpu_probs=(0.5, 0.3, 0.2), median_h=1.0, sigma=0.6),
    "dpo": JobTypeModel(gpu_choices=(4, 8), gpu_probs=(0.5, 0.5), median_h=2.5, sigma=0.5),
    "rlhf": JobTypeModel(gpu_choices=(8, 16), gpu_probs=(0.6, 0.4), median_h=6.0, sigma=0.5),
}


@dataclass(frozen=True)
class CurveModel:
    """Ranges of the hidden per-job curve parameters (all drawn uniformly).

    Scores are on a 0..1 scale. See ``evalstop_gym.curves`` for the formulas.
    """

    base: tuple[float, float] = (0.0, 0.1)            # score of the starting checkpoint
    healthy_gain: tuple[float, float] = (0.5, 0.9)    # total gain of a healthy run
    healthy_tau: tuple[float, float] = (0.6, 1.5)     # saturation scale (fraction of the run)
    hack_gain: tuple[float, float] = (0.5, 0.9)       # gain from base to the true peak
    hack_peak: tuple[float, float] = (0.3, 0.6)       # progress at which gold peaks
    kl_exponent: float = 1.0                          # sqrt(KL) grows as progress**kl_exponent
    proxy_gain: tuple[float, float] = (0.5, 1.0)      # proxy-reward gain (RLHF only)
    proxy_noise: float = 0.02
    loss_start: tuple[float, float] = (1.5, 3.0)      # initial training loss
    loss_floor_frac: tuple[float, float] = (0.3, 0.6)  # asymptote as a fraction of the start
    loss_tau: tuple[float, float] = (0.05, 0.5)       # decay scale (fraction of the run)
    loss_noise: float = 0.01                          # multiplicative

    def validate(self) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            name = f"curves.{f.name}"
            if isinstance(v, tuple):
                if len(v) != 2:
                    raise ConfigError(name, v, "must be a (low, high) pair")
                check_range(name, v[0], 0.0)
                check_range(name, v[1], v[0])
            else:
                check_range(name, v, 0.0)
        if self.hack_peak[0] <= 0.0 or self.hack_peak[1] > 1.0:
            raise ConfigError("curves.hack_peak", self.hack_peak, "must lie within (0, 1]")
        if self.healthy_tau[0] <= 0.0 or self.loss_tau[0] <= 0.0:
            raise ConfigError("curves.healthy_tau/loss_tau", (self.healthy_tau, self.loss_tau),
                              "lower bounds must be > 0")
        if self.kl_exponent <= 0:
            raise ConfigError("curves.kl_exponent", self.kl_exponent, "must be > 0")


PRESETS: dict[str, dict[str, float]] = {
    # the paper's headline setting: 80% RLHF
    "rlhf-heavy": {"lora": 0.1, "dpo": 0.1, "rlhf": 0.8},
    "balanced": {"lora": 1 / 3, "dpo": 1 / 3, "rlhf": 1 / 3},
    "lora-heavy": {"lora": 0.7, "dpo": 0.2, "rlhf": 0.1},
}


@dataclass(frozen=True)
class WorkloadConfig:
    """A whole workload on a cluster of homogeneous GPUs.

    Units: hours for time, GPUs for demand. ``load`` is the offered load: the
    arrival rate is set so that ``rate * E[gpus * true length] = load * gpus``.
    """

    workload: str = "rlhf-heavy"
    jobs: int = 200
    gpus: int = 64
    load: float = 1.0
    hacking_fraction: float = 0.6      # of RLHF runs
    noise: float = 0.02                # eval-score noise sigma
    evals_per_job: int = 10
    estimate_error: float = 0.5        # sigma of the log-normal user estimate error
    tenants: int = 4
    seed: int = 0
    mix: Mapping[str, float] | None = None   # overrides the preset's type mix
    job_types: Mapping[str, JobTypeModel] = field(default_factory=lambda: dict(DEFAULT_JOB_TYPES))
    curves: CurveModel = field(default_factory=CurveModel)

    def __post_init__(self) -> None:
        if self.workload not in PRESETS:
            raise ConfigError("workload", self.workload, f"must be one of {', '.join(PRESETS)}")
        check_range("jobs", self.jobs, 1, integer=True)
        check_range("gpus", self.gpus, 1, integer=True)
        check_range("load", self.load, 0.0, 10.0, lo_open=True)
        check_range("hacking_fraction", self.hacking_fraction, 0.0, 1.0)
        check_range("noise", self.noise, 0.0, 1.0)
        check_range("evals_per_job", self.evals_per_job, 1, 1000, integer=True)
        check_range("estimate_error", self.estimate_error, 0.0, 5.0)
        check_range("tenants", self.tenants, 1, 10_000, integer=True)
        check_range("seed", self.seed, 0, 2**63 - 1, integer=True)
        mix = self.type_mix
        for t, p in mix.items():
            if t not in JOB_TYPES:
                raise ConfigError("mix", t, f"job types must be among {', '.join(JOB_TYPES)}")
            check_range(f"mix.{t}", p, 0.0, 1.0)
        if abs(sum(mix.values()) - 1.0) > 1e-6:
            raise ConfigError("mix", dict(mix), "fractions must sum to 1")
        for t in JOB_TYPES:
            if t not in self.job_types:
                raise ConfigError("job_types", sorted(self.job_types), f"must define {', '.join(JOB_TYPES)}")
            self.job_types[t].validate(f"job_types.{t}")
            if mix.get(t, 0.0) > 0 and self.job_types[t].max_gpus > self.gpus:
                raise ConfigError(
                    f"job_types.{t}.gpu_choices", self.job_types[t].gpu_choices,
                    f"a {t} job may demand {self.job_types[t].max_gpus} GPUs, more than the "
                    f"cluster's gpus={self.gpus}; use gpus >= {self.job_types[t].max_gpus}")
        self.curves.validate()

    @property
    def type_mix(self) -> Mapping[str, float]:
        return self.mix if self.mix is not None else PRESETS[self.workload]

    def replace(self, **changes: Any) -> "WorkloadConfig":
        """A copy with ``changes`` applied (and validated)."""
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise ConfigError(sorted(unknown)[0], changes[sorted(unknown)[0]],
                              f"unknown field; known: {', '.join(f.name for f in dataclasses.fields(self))}")
        return dataclasses.replace(self, **changes)
