"""Seeded workload generator: jobs, their public specs and their hidden curves.

All randomness of an episode comes from one ``numpy.random.Generator`` seeded
with ``WorkloadConfig.seed``; the simulator itself draws nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .config import JOB_TYPES, ConfigError, WorkloadConfig
from .curves import Curves, sample_curves


@dataclass(frozen=True)
class Workload:
    """Columnar description of ``n`` jobs. Arrays are indexed by job id.

    Public per job: ``tenant, job_type, gpus, submit_h, est_length_h``, the
    observed ``loss`` and ``proxy`` curves and the observed eval scores (revealed
    one checkpoint at a time by the simulator). Hidden: ``length_h``,
    ``hacking``, ``curves.gold``, ``curves.eval_z``, ``curves.peak_progress``.
    """

    submit_h: np.ndarray       # float, hours, sorted ascending
    gpus: np.ndarray           # int, GPUs
    length_h: np.ndarray       # float, true run time on its GPUs, hours (hidden)
    est_length_h: np.ndarray   # float, the user's estimate, hours
    job_type: np.ndarray       # int index into JOB_TYPES
    tenant: np.ndarray         # int
    hacking: np.ndarray        # bool (hidden label)
    curves: Curves
    noise: float               # eval noise sigma used for observed scores
    total_gpus: int

    @property
    def n(self) -> int:
        return int(self.submit_h.shape[0])

    @property
    def evals_per_job(self) -> int:
        return int(self.curves.gold.shape[1])

    @property
    def observed(self) -> np.ndarray:
        """Observed eval scores, shape ``(n, E)``: gold plus ``noise * z``."""
        return self.curves.gold + self.noise * self.curves.eval_z

    def validate(self) -> None:
        if self.n == 0:
            raise ConfigError("jobs", 0, "a workload needs at least one job")
        big = np.flatnonzero(self.gpus > self.total_gpus)
        if big.size:
            j = int(big[0])
            raise ConfigError(f"job {j}.gpus", int(self.gpus[j]),
                              f"must be <= the cluster's gpus={self.total_gpus}")
        if np.any(self.gpus < 1):
            j = int(np.flatnonzero(self.gpus < 1)[0])
            raise ConfigError(f"job {j}.gpus", int(self.gpus[j]), "must be >= 1")
        if np.any(~(self.length_h > 0)) or np.any(~np.isfinite(self.length_h)):
            j = int(np.flatnonzero(~(self.length_h > 0) | ~np.isfinite(self.length_h))[0])
            raise ConfigError(f"job {j}.length_h", float(self.length_h[j]), "must be a finite number > 0")
        if np.any(np.diff(self.submit_h) < 0):
            raise ConfigError("submit_h", "unsorted", "submit times must be non-decreasing in job id")


def offered_rate(cfg: WorkloadConfig) -> float:
    """Arrivals per hour giving offered load ``cfg.load`` on ``cfg.gpus`` GPUs."""
    gpu_hours = 0.0
    for t, p in cfg.type_mix.items():
        m = cfg.job_types[t]
        # mean of a log-normal (ignoring the clip, which is far in the tails)
        gpu_hours += p * m.mean_gpus * m.median_h * float(np.exp(m.sigma ** 2 / 2))
    return cfg.load * cfg.gpus / gpu_hours


def generate(cfg: WorkloadConfig) -> Workload:
    """Draw a whole workload from ``cfg`` (deterministic in ``cfg.seed``)."""
    rng = np.random.default_rng(cfg.seed)
    n = cfg.jobs
    mix = cfg.type_mix
    probs = np.array([mix.get(t, 0.0) for t in JOB_TYPES])
    job_type = rng.choice(len(JOB_TYPES), size=n, p=probs / probs.sum())
    gpus = np.empty(n, dtype=np.int64)
    length = np.empty(n)
    for i, t in enumerate(JOB_TYPES):
        m = cfg.job_types[t]
        idx = np.flatnonzero(job_type == i)
        gpus[idx] = rng.choice(np.array(m.gpu_choices), size=idx.size, p=np.array(m.gpu_probs))
        length[idx] = np.clip(m.median_h * np.exp(m.sigma * rng.standard_normal(idx.size)), m.min_h, m.max_h)
    submit = np.cumsum(rng.exponential(1.0 / offered_rate(cfg), size=n))
    submit -= submit[0]  # the first job arrives at t = 0
    est = length * np.exp(cfg.estimate_error * rng.standard_normal(n))
    tenant = rng.integers(0, cfg.tenants, size=n)
    is_rlhf = job_type == JOB_TYPES.index("rlhf")
    hacking = is_rlhf & (rng.random(n) < cfg.hacking_fraction)
    curves = sample_curves(rng, cfg.curves, cfg.evals_per_job, hacking, is_rlhf)
    w = Workload(submit_h=submit, gpus=gpus, length_h=length, est_length_h=est, job_type=job_type,
                 tenant=tenant, hacking=hacking, curves=curves, noise=cfg.noise, total_gpus=cfg.gpus)
    w.validate()
    return w


def workload_from_jobs(jobs: list[dict], total_gpus: int, evals_per_job: int | None = None) -> Workload:
    """A hand-written workload, for tests, examples and replays.

    Each job is a dict with ``submit_h, gpus, length_h`` and optionally
    ``est_length_h`` (default: the true length), ``job_type`` (default
    ``"rlhf"``), ``tenant`` (0), ``hacking`` (False), ``gold`` (true scores at
    the checkpoints; default a straight rise), ``observed`` (observed scores;
    default gold), ``loss`` and ``proxy`` (defaults: falling /
    rising lines). Jobs must be listed in submit order.
    """
    if not jobs:
        raise ConfigError("jobs", [], "a workload needs at least one job")
    e = evals_per_job or len(jobs[0].get("gold", ())) or 4
    x = np.arange(1, e + 1) / e

    def col(key, default):
        return np.array([j.get(key, default) for j in jobs])

    def rows(key, default_row):
        out = [np.asarray(j.get(key, default_row), dtype=float) for j in jobs]
        for i, row in enumerate(out):  # checked row by row: ragged rows would not make an array
            if row.shape != (e,):
                raise ConfigError(f"job {i}.{key}", row.tolist(), f"every job needs exactly {e} values")
        return np.array(out)

    gold = rows("gold", x)
    observed = rows("observed", None) if all("observed" in j for j in jobs) else gold
    curves = Curves(gold=gold, start=np.zeros(len(jobs)), eval_z=observed - gold, loss=rows("loss", 2.0 - x),
                    proxy=rows("proxy", x), peak_progress=np.full(len(jobs), np.inf))
    w = Workload(submit_h=col("submit_h", 0.0).astype(float), gpus=col("gpus", 1).astype(np.int64),
                 length_h=col("length_h", 1.0).astype(float),
                 est_length_h=np.array([j.get("est_length_h", j.get("length_h", 1.0)) for j in jobs], float),
                 job_type=np.array([JOB_TYPES.index(j.get("job_type", "rlhf")) for j in jobs]),
                 tenant=col("tenant", 0).astype(np.int64), hacking=col("hacking", False).astype(bool),
                 curves=curves, noise=1.0, total_gpus=total_gpus)
    w.validate()
    return w
