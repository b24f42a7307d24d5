"""Seeded workload generator: jobs, their public specs and their hidden curves.

All randomness of an episode comes from one ``numpy.random.Generator`` seeded
with ``WorkloadConfig.seed``; the simulator itself draws nothing.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np

from .cluster import ClusterSpec
from .config import JOB_TYPES, Z90, ConfigError, LatentModel, WorkloadConfig, WorldModel
from .curves import Curves, realistic_curves, sample_curves
from .timebase import MAX_HOURS, TICKS_PER_HOUR, to_ticks


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
    # the realistic world's arrays (None / zeros in the paper's world)
    eval_items: np.ndarray | None = None      # int, items in the job's eval set (public; 0: unknown)
    eval_factor: np.ndarray | None = None     # seed-variance factor on the sampling error (hidden)
    ckpt_service_h: np.ndarray | None = None  # (n, E) hours run when each eval's score is out (hidden)
    restart_h: np.ndarray | None = None       # hours a resume costs: save + restore + warm-up (hidden)
    eval_h: np.ndarray | None = None          # hours each eval takes on the job's GPUs (hidden)
    cluster: ClusterSpec | None = None        # nodes, GPU types, placement; None: the flat pool of total_gpus

    @functools.cached_property
    def spec(self) -> ClusterSpec:
        """The cluster the workload runs on (the flat pool when none is given)."""
        return self.cluster if self.cluster is not None else ClusterSpec.flat(self.total_gpus)

    @property
    def n(self) -> int:
        return int(self.submit_h.shape[0])

    def job_configs(self) -> list | None:
        """Each job's public :class:`~evalstop_gym.view.JobConfig` (NaN for a field the world does not
        model), or None where the curves carry no configuration (a label-first CurveModel draws none)."""
        setup = self.curves.setup
        if setup is None:
            return None
        from .view import JobConfig

        nan = np.full(self.n, np.nan)
        cols = [np.asarray(setup.get(f, nan), dtype=float).tolist() for f in JobConfig._fields]
        return [JobConfig(*row) for row in zip(*cols)]

    @property
    def evals_per_job(self) -> int:
        return int(self.curves.gold.shape[1])

    @property
    def observed(self) -> np.ndarray:
        """Observed eval scores, shape ``(n, E)``: gold plus ``sd * z``, plus replayed runs'
        measured eval error (``curves.eval_offset``) where there is one.

        ``sd = noise`` in the paper's world; with eval-set sizes ``n`` it is
        ``sqrt(noise**2 + factor**2 p (1 - p) / n)`` with ``p`` the true score
        (clipped to [0, 1]): the eval's sampling error times the seed-variance
        factor, plus any extra noise. In a latent world with eval-set sizes the
        draws ``z`` are standardised binomial counts on ``n`` items
        (:func:`evalstop_gym.latent.binomial_z`): discrete, skewed near 0 and 1.
        """
        c = self.curves
        sd = self.noise if self.eval_factor is None else self.eval_sd
        observed = c.gold + sd * c.eval_z
        return observed if c.eval_offset is None else observed + c.eval_offset

    @property
    def eval_sd(self) -> np.ndarray:
        """Standard deviation of each observed score, shape ``(n, E)`` (see :attr:`observed`)."""
        if self.eval_factor is None:
            return np.full(self.curves.gold.shape, float(self.noise))
        p = np.clip(self.curves.gold, 0.0, 1.0)
        sampling = self.eval_factor[:, None] ** 2 * p * (1.0 - p) / self.eval_items[:, None]
        return np.sqrt(self.noise ** 2 + sampling)

    @property
    def checkpoint_service_h(self) -> np.ndarray:
        """Hours each job has run when each of its evals' scores is out, shape ``(n, E)``.

        The last column is the true length. Without speed jitter or eval
        costs the checkpoints split ``length_h`` evenly.
        """
        if self.ckpt_service_h is not None:
            return self.ckpt_service_h
        return self.length_h[:, None] * np.arange(1, self.evals_per_job + 1) / self.evals_per_job

    def checkpoint_ticks(self) -> np.ndarray:
        """The simulator's checkpoint grid, ``(n, E)`` int64 ticks of service (:mod:`~evalstop_gym.timebase`).

        Evenly split lengths give ``length * i // E`` (exact integers); the
        realistic world's per-segment times are rounded to the tick once.
        """
        if self.ckpt_service_h is not None:
            return to_ticks(self.ckpt_service_h)
        return to_ticks(self.length_h)[:, None] * np.arange(1, self.evals_per_job + 1) // self.evals_per_job

    @property
    def items(self) -> np.ndarray:
        """Eval-set size of every job (0 where the world does not model it)."""
        return self.eval_items if self.eval_items is not None else np.zeros(self.n, dtype=np.int64)

    def validate(self) -> None:
        if self.n == 0:
            raise ConfigError("jobs", 0, "a workload needs at least one job")
        if self.cluster is not None and self.cluster.total_gpus != self.total_gpus:
            raise ConfigError("cluster", self.cluster.describe(),
                              f"must hold the workload's gpus={self.total_gpus} GPUs")
        big = np.flatnonzero(self.gpus > self.total_gpus)
        if big.size:
            j = int(big[0])
            raise ConfigError(f"job {j}.gpus", int(self.gpus[j]),
                              f"must be <= the cluster's gpus={self.total_gpus}")
        if np.any(self.gpus < 1):
            j = int(np.flatnonzero(self.gpus < 1)[0])
            raise ConfigError(f"job {j}.gpus", int(self.gpus[j]), "must be >= 1")
        # times become integer ticks of 1 ms in the simulator (evalstop_gym.timebase)
        for name, arr, lo, allowed in (
                ("length_h", self.length_h, 1 / TICKS_PER_HOUR, "hours in [0.001 s, 1e6 h] (one tick to MAX_HOURS)"),
                ("submit_h", self.submit_h, 0.0, "hours in [0, 1e6]")):
            bad = np.flatnonzero(~((arr >= lo) & (arr <= MAX_HOURS)))  # NaN fails too
            if bad.size:
                j = int(bad[0])
                raise ConfigError(f"job {j}.{name}", float(arr[j]), f"must be a finite number of {allowed}")
        bad = np.flatnonzero(~(self.est_length_h >= 0))  # NaN fails too; +inf means "no idea"
        if bad.size:
            j = int(bad[0])
            raise ConfigError(f"job {j}.est_length_h", float(self.est_length_h[j]), "must be a number >= 0 hours")
        if np.any(np.diff(self.submit_h) < 0):
            raise ConfigError("submit_h", "unsorted", "submit times must be non-decreasing in job id")


def offered_rate(cfg: WorkloadConfig) -> float:
    """Arrivals per hour giving offered load ``cfg.load`` on ``cfg.gpus`` GPUs.

    In a world with stragglers, speed jitter and eval costs the offered work
    is their expected GPU-hours, so ``load`` means the same in every world.
    """
    gpu_hours = 0.0
    world = cfg.world
    costly = world != WorldModel()
    for t, p in cfg.type_mix.items():
        m = cfg.job_types[t]
        # mean of a log-normal (ignoring the clip, which is far in the tails)
        work = m.mean_gpus * m.median_h * float(np.exp(m.sigma ** 2 / 2))
        if costly:  # the work users submit includes stragglers, jitter and evals (resumes depend on policy)
            work = work * world.mean_slowdown + cfg.evals_per_job * world.mean_eval_gpu_h(m.mean_gpus)
        gpu_hours += p * work
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
        if not idx.size:  # no job of this type: the draws below would take nothing from rng
            continue
        gpus[idx] = rng.choice(np.array(m.gpu_choices), size=idx.size, p=np.array(m.gpu_probs))
        length[idx] = np.clip(m.median_h * np.exp(m.sigma * rng.standard_normal(idx.size)), m.min_h, m.max_h)
    submit = np.cumsum(rng.exponential(1.0 / offered_rate(cfg), size=n))
    submit -= submit[0]  # the first job arrives at t = 0
    if submit[-1] > MAX_HOURS:   # times that large lose the precision JCTs need
        raise ConfigError("load", cfg.load, f"too low for {n} jobs on {cfg.gpus} GPUs: arrivals would span "
                                            f"{submit[-1]:.3g} h, more than {MAX_HOURS:g} h")
    est = length * np.exp(cfg.estimate_error * rng.standard_normal(n))
    tenant = rng.integers(0, cfg.tenants, size=n)
    w = Workload(submit_h=submit, gpus=gpus, est_length_h=est, job_type=job_type, tenant=tenant,
                 total_gpus=cfg.gpus, cluster=cfg.cluster, **hidden_truth(cfg, rng, job_type, gpus, length))
    w.validate()
    return w


def hidden_truth(cfg: WorkloadConfig, rng: np.random.Generator, job_type: np.ndarray, gpus: np.ndarray,
                 length_h: np.ndarray) -> dict:
    """Labels, curves, noise, costs and speed of jobs whose type, demand and nominal length are given.

    Curves come from latent causes (a :class:`LatentModel`, every named calibration; the label
    emerges from gold), drawn from a stream seeded with ``(seed, 2)``, or from ``rng`` for the
    label-first :class:`CurveModel` family (the label drawn, then a curve per class). The world's eval sizes, costs and speed, and the label-first
    ``realistic`` form's curves, come from a second stream seeded with ``(seed, 1)``, and a latent world's binomial
    eval errors from a third, ``(seed, 3)``, so a latent world's curve parameters move nothing but its curves and
    their scores (the jobs, their speeds and costs stay draw for draw). Returns
    :class:`Workload` keyword arguments (``length_h`` is the true length: the nominal one
    stretched by stragglers and jitter, plus eval time).
    """
    n, evals = job_type.shape[0], cfg.evals_per_job
    world, model = cfg.world, cfg.curves
    extra = np.random.default_rng([cfg.seed, 1])
    if isinstance(model, LatentModel):
        from .latent import latent_curves

        # their own stream, so every latent world leaves ``rng`` where it found it (a trace replay draws
        # the users' estimates from it afterwards, the same in every world)
        curves, hacking, _ = latent_curves(np.random.default_rng([cfg.seed, 2]), model, evals, job_type,
                                           cfg.hacking_fraction)
    else:
        is_rlhf = job_type == JOB_TYPES.index("rlhf")
        hacking = is_rlhf & (rng.random(n) < cfg.hacking_fraction)
        curves = sample_curves(rng, model, evals, hacking, is_rlhf)
        if model.form == "realistic":
            gold, start, hacking, peak, proxy = realistic_curves(extra, model, evals, hacking, job_type)
            proxy = np.where(np.isnan(curves.proxy), np.nan, proxy)  # RLHF jobs only, as in the paper's world
            curves = dataclasses.replace(curves, gold=gold, start=start, peak_progress=peak, proxy=proxy)
    out = dict(length_h=length_h, hacking=hacking, curves=curves, noise=cfg.noise)
    if world == WorldModel():
        return out
    if world.eval_items:
        items = extra.choice(np.array(world.eval_items, dtype=np.int64), size=n)
        factor = extra.uniform(*world.seed_noise_factor, size=n)
        out.update(eval_items=items, eval_factor=factor)
        if isinstance(model, LatentModel):
            from .latent import binomial_z

            # their own stream: a binomial draw takes as many of a stream's numbers as its p asks for, so drawn from
            # ``extra`` they would move every later draw (speeds, eval and restart costs) with the curves
            out.update(curves=dataclasses.replace(
                curves, eval_z=binomial_z(np.random.default_rng([cfg.seed, 3]), curves.gold, items)))
    else:
        items = np.zeros(n, dtype=np.int64)
    # speed: segment i takes length / E * straggler * jitter_i, then its eval
    seg = np.repeat(length_h[:, None] / evals, evals, axis=1)
    med, p90 = world.straggler_excess
    if med > 0:
        sigma = np.log(p90 / med) / Z90 if p90 > med else 0.0
        seg = seg * (1.0 + med * np.exp(sigma * extra.standard_normal((n, 1))))
    if world.segment_jitter > 0:
        seg = seg * np.exp(world.segment_jitter * extra.standard_normal((n, evals)))
    eval_h = (extra.uniform(*world.eval_fixed_min, size=n) / 60.0
              + items * world.eval_item_gpu_s / 3600.0 / gpus)
    eval_h = np.minimum(eval_h, world.eval_max_share * length_h / evals)  # short jobs evaluate less
    ckpt = np.cumsum(seg + eval_h[:, None], axis=1)
    size_gb = np.array(world.checkpoint_gb)[job_type]
    lo, hi = np.log(world.storage_gbps)
    restart_s = 2.0 * size_gb / np.exp(extra.uniform(lo, hi, size=n)) + extra.uniform(*world.warmup_s, size=n)
    out.update(length_h=ckpt[:, -1].copy(), ckpt_service_h=ckpt, restart_h=restart_s / 3600.0, eval_h=eval_h)
    return out



def workload_from_jobs(jobs: list[dict], total_gpus: int, evals_per_job: int | None = None,
                       cluster: ClusterSpec | None = None) -> Workload:
    """A hand-written workload, for tests, examples and replays.

    Each job is a dict with ``submit_h, gpus, length_h`` and optionally
    ``est_length_h`` (default: the true length), ``job_type`` (default
    ``"rlhf"``), ``tenant`` (0), ``hacking`` (False), ``gold`` (true scores at
    the checkpoints; default a straight rise), ``observed`` (observed scores;
    default gold), ``loss`` and ``proxy`` (defaults: falling /
    rising lines). Jobs must be listed in submit order. ``cluster``: its nodes
    (default: the flat pool of ``total_gpus``).
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
                 curves=curves, noise=1.0, total_gpus=total_gpus, cluster=cluster)
    w.validate()
    return w
