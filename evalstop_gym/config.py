"""Typed, validated configuration of a workload and its cluster.

Every number here is a modelling choice; ``docs/calibration.md`` gives each one
with its reason. A bad value raises :class:`ConfigError` (a ``ValueError``)
naming the field, the value and what is allowed.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Any

from .checks import (JOB_TYPES, MAX_EVAL_CELLS, MAX_GPUS, MAX_JOBS, ConfigError,  # noqa: F401  (re-exported)
                     UsageError, check_pair, check_range, check_ranges)

Z90 = 1.2815515655446004   # 90th percentile of a standard normal (straggler p90 -> log-normal sigma)
CURVE_FORMS = ("paper", "realistic")   # curves.sample_curves / curves.realistic_gold


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
    # -- the realistic world's additions (all off in the paper's world) --
    plateau_jitter: float = 0.0                       # sd of each checkpoint's true score around its trend
    dip_prob: float = 0.0                             # chance a checkpoint's true score dips (transient)
    dip_depth: tuple[float, float] = (0.0, 0.0)       # depth of such a dip, score units
    overfit_fraction: float = 0.0                     # healthy runs that slowly decline once saturated
    overfit_drop: tuple[float, float] = (0.0, 0.0)    # their decline from the trend's peak to the end
    dpo_hacking_fraction: float = 0.0                 # DPO runs that over-optimise
    dpo_peak: tuple[float, float] = (0.3, 0.6)        # progress at which an over-optimising DPO run peaks
    dpo_floor: tuple[float, float] = (0.0, 0.0)       # DPO decline levels off at this fraction of its gain
    hack_rate: tuple[float, float] = (1.0, 1.0)       # per-run kl_exponent multiplier: slow (<1) or sharp (>1)
    recovery_fraction: float = 0.0                    # over-optimising runs that partly recover
    recovery: tuple[float, float] = (0.0, 0.0)        # share of the lost score such a run wins back
    hack_min_drop: float = 0.05                       # label: a run hacks iff its trend falls >= this
    healthy_kl_growth: float = 0.0                    # healthy RLHF runs whose KL (so proxy) grows as a hacking run's
    form: str = "paper"                               # "realistic" turns the knobs above on

    _FRACTIONS = ("dip_prob", "overfit_fraction", "dpo_hacking_fraction", "recovery_fraction", "healthy_kl_growth")
    _UNIT_PAIRS = ("dpo_peak", "dpo_floor", "recovery")

    def validate(self) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            name = f"curves.{f.name}"
            if isinstance(v, tuple):
                check_pair(name, v)
                if f.name in self._UNIT_PAIRS and v[1] > 1.0:
                    raise ConfigError(name, v, "must lie within [0, 1]")
            elif f.name == "form":
                if v not in CURVE_FORMS:
                    raise ConfigError(name, v, f"must be one of {', '.join(CURVE_FORMS)}")
            else:
                check_range(name, v, 0.0, 1.0 if f.name in self._FRACTIONS else None)
        if self.dpo_peak[0] <= 0.0:
            raise ConfigError("curves.dpo_peak", self.dpo_peak, "must lie within (0, 1]")
        if self.hack_rate[0] <= 0.0:
            raise ConfigError("curves.hack_rate", self.hack_rate, "lower bound must be > 0")
        if self.hack_min_drop <= self.overfit_drop[1] and self.overfit_fraction > 0:
            raise ConfigError("curves.hack_min_drop", self.hack_min_drop,
                              f"must exceed the largest healthy overfit drop {self.overfit_drop[1]:g}, "
                              "or slowly overfitting runs would count as hacking")
        if self.hack_peak[0] <= 0.0 or self.hack_peak[1] > 1.0:
            raise ConfigError("curves.hack_peak", self.hack_peak, "must lie within (0, 1]")
        if self.healthy_tau[0] <= 0.0 or self.loss_tau[0] <= 0.0:
            raise ConfigError("curves.healthy_tau/loss_tau", (self.healthy_tau, self.loss_tau),
                              "lower bounds must be > 0")
        if self.kl_exponent <= 0:
            raise ConfigError("curves.kl_exponent", self.kl_exponent, "must be > 0")


@dataclass(frozen=True)
class LatentModel:
    """Distributions of every run's latent causes (:mod:`evalstop_gym.latent`); no label is drawn.

    Pairs ``(low, high)`` are uniform, except ``lr``, ``kl_coef``, ``dpo_kl_coef``, ``kl_ceiling``, ``d_star_*``
    and ``proxy_slope``, which are log-uniform (scale parameters). ``d`` is ``sqrt(KL)`` in sqrt-nats; scores
    are on 0..1.
    ``docs/calibration.md`` gives each value with its reason.
    """

    base: tuple[float, float] = (0.0, 0.2)              # true score of the starting checkpoint
    lr: tuple[float, float] = (0.85, 1.18)              # relative learning rate (log-uniform)
    kl_scale: float = 2.0                               # d reached at the end at lr 1 without a penalty
    kl_exponent: tuple[float, float] = (1.0, 1.6)       # d grows as x**p (p = 1: KL quadratic in steps)
    # if set, p follows the learning rate's quantile with this loading in [-1, 1] (its Spearman correlation with lr,
    # so with g = kl_scale * lr: latent.task_quantile): a run whose KL grows faster over the run also starts slower
    # (the TRL runs without a penalty reach d about 1 by the first evals whatever their g, then run to their
    # ceiling). None: p drawn independently of lr
    kl_growth_loading: float | None = None
    penalty_share: float = 0.0                          # runs with a KL penalty
    # DPO runs with one, if set (DPO's beta is a KL coefficient, so every DPO run of a grid has one, while an RL
    # grid may leave it out); None: penalty_share, as for every other job type
    dpo_penalty_share: float | None = None
    kl_coef: tuple[float, float] = (0.05, 0.2)          # its coefficient (log-uniform)
    # DPO runs' coefficient (beta), if set (log-uniform): DPO's beta and an RL trainer's KL coefficient hold d
    # at different levels; None: kl_coef, as for every other job type
    dpo_kl_coef: tuple[float, float] | None = None
    kl_saturation: float = 0.1                          # d_sat = kl_saturation / kl_coef
    # if set, d of every run levels off at a ceiling (log-uniform over this pair) however small its penalty: a
    # policy collapsed onto the answers its proxy rates highest moves no further from its reference (the TRL
    # runs without a KL penalty stop at 12-20 nats); the cliff: gold falls past d* and stays low there. None:
    # an unpenalised d grows without bound
    kl_ceiling: tuple[float, float] | None = None
    d_star_exploitable: tuple[float, float] = (0.67, 0.94)  # gold optimum of an exploitable proxy (log-uniform)
    d_star_robust: tuple[float, float] = (5.2, 8.5)     # ... of a robust proxy (log-uniform)
    # if set, an exploitable proxy's d* is instead where the run's unpenalised d reaches at progress
    # x* ~ U(hack_peak): its gold peaks there (E8 sweeps it, as it sweeps the label-first curves' knob)
    hack_peak: tuple[float, float] | None = None
    peak_gain_exploitable: tuple[float, float] = (0.25, 0.45)  # gold gain at d* (exploitable proxy)
    peak_gain_robust: tuple[float, float] = (0.9, 1.1)  # gold gain at d* (robust proxy)
    # if set, gold follows Gao's form with an exponential lag tau ~ U(gold_lag) (progress units): at a KL the
    # penalty holds fixed, a run's answers still improve for a while (the TRL runs' gold climbs for 2-4 evals after
    # their KL has levelled off). None: gold is Gao's form of the current d
    gold_lag: tuple[float, float] | None = None
    # if set (with gold_lag), a run whose KL a penalty holds, DPO's aside, lags by tau ~ U(held_gold_lag) instead, at
    # the same draw: the TRL runs held by a KL penalty reach their plateau within 2 evals, where the unpenalised
    # runs' fall is spread over several. None: gold_lag for every run
    held_gold_lag: tuple[float, float] | None = None
    # if set, gold's fall past d* stops at a floor ~ U(gold_floor) (score): the score of the answers a collapsed
    # policy gives (the TRL runs without a KL penalty stay at 0.08-0.2). None: Gao's form falls on, clipped at 0
    gold_floor: tuple[float, float] | None = None
    # if set, a task latent per run: the task's quantile t ~ U(0, 1) places the run's gold floor (a task's collapsed
    # answers score alike: the TRL copy task's runs fall to 0.1-0.2, the add task's to 0.24-0.37), and an exploitable
    # proxy's d* and gain follow it with these loadings (d*, gain) in [-1, 1], each its Spearman correlation with the
    # floor (latent.task_quantile). Needs gold_floor. None: floor, d* and gain drawn independently
    task_loadings: tuple[float, float] | None = None
    # if set, this share of runs with an exploitable proxy collapses when its d meets the KL ceiling: from that
    # checkpoint its gold is the floor (the TRL runs without a penalty fall to their floor as their KL runs to its
    # ceiling, whatever their gain; Gao's form alone falls by gain x its shape, slowly for a small gain). Needs
    # kl_ceiling and gold_floor. None: gold past d* follows Gao's form down to the floor
    collapse_share: float | None = None
    # if set, a collapsed run (collapse_share) keeps this share of its drift at its floor: a policy collapsed onto a
    # few answers scores them alike at every checkpoint (the TRL cliff runs' gold at their floor moves about a tenth
    # as much as the other runs'). Needs collapse_share. None: the floor wanders as the rest of the run
    collapse_drift: float | None = None
    dpo_exploitable: float = 0.0                        # DPO runs whose preference data is exploitable
    drift: float = 0.0                                  # sd of each step of the true score's plateau drift
    # DPO runs' step sd, if set (a DPO run's gold wanders about twice as much as an RL run's in the TRL runs);
    # None: drift, as for every other job type
    dpo_drift: float | None = None
    drift_autocorr: float = 0.0                         # lag-1 autocorrelation of those steps
    # share of its level the drift gives back at each checkpoint (0: a random walk; 1: no memory of the level): the
    # TRL runs' gold wanders about a level rather than away from it
    drift_reversion: float = 0.0
    # if set, each run's drift sd is drift (or dpo_drift) times exp(drift_spread * N(0, 1)): a log-normal level per
    # run around the fitted one (the TRL runs' gold noise spans a factor of about 8 between runs: a collapsed policy
    # hardly moves, a penalised one keeps wandering). None: every run of a job type wanders alike
    drift_spread: float | None = None
    proxy_slope: tuple[float, float] = (0.25, 0.5)      # proxy reward per unit d (log-uniform)
    # if set, the proxy is proxy_slope * d ** q with q ~ U(proxy_exponent): a learned reward model's score
    # saturates (the TRL runs' proxies rise with about sqrt(d) and hold near their top once d is large). None: q = 1
    proxy_exponent: tuple[float, float] | None = None
    proxy_noise: float = 0.02
    loss_start: tuple[float, float] = (1.5, 3.0)        # initial training loss
    loss_floor_frac: tuple[float, float] = (0.3, 0.6)   # asymptote as a fraction of the start
    loss_tau: tuple[float, float] = (0.05, 0.5)         # decay scale at lr 1 (fraction of the run)
    loss_noise: float = 0.01                            # multiplicative

    _LOG_PAIRS = ("lr", "kl_coef", "dpo_kl_coef", "kl_ceiling", "d_star_exploitable", "d_star_robust", "proxy_slope")
    _FRACTIONS = ("penalty_share", "dpo_penalty_share", "dpo_exploitable", "drift_reversion", "collapse_share",
                  "collapse_drift")
    _OPTIONAL = ("hack_peak", "kl_ceiling", "dpo_penalty_share", "dpo_kl_coef", "gold_lag", "held_gold_lag", "gold_floor",
                 "dpo_drift", "proxy_exponent", "task_loadings", "drift_spread",
                 "collapse_share", "kl_growth_loading", "collapse_drift")   # None: the knob off
    # Every number's allowed [low, high] (a pair: both ends). Far outside any fitted or named world (the TRL
    # runs: d up to about 10 sqrt-nats, losses under 10, rewards under 100), and small enough that d, KL (d^2),
    # every score and loss stay finite in float64 without a warning: d = kl_scale * lr * x^p <= 1e6.
    # A log-uniform pair starts above 0 (its log is drawn), at 1e-6 at least.
    RANGES = {"base": (0.0, 1.0), "lr": (1e-6, 1e3), "kl_scale": (1e-6, 1e3), "kl_exponent": (1e-3, 10.0),
              "penalty_share": (0.0, 1.0), "dpo_penalty_share": (0.0, 1.0), "kl_coef": (1e-6, 1e3),
              "dpo_kl_coef": (1e-6, 1e3), "kl_saturation": (1e-6, 1e3), "kl_ceiling": (1e-6, 1e3),
              "d_star_exploitable": (1e-6, 1e4), "d_star_robust": (1e-6, 1e4), "hack_peak": (0.0, 1.0),
              "gold_lag": (0.0, 10.0), "held_gold_lag": (0.0, 10.0), "gold_floor": (0.0, 1.0), "peak_gain_exploitable": (0.0, 10.0),
              "peak_gain_robust": (0.0, 10.0), "dpo_exploitable": (0.0, 1.0), "drift": (0.0, 1.0),
              "dpo_drift": (0.0, 1.0), "drift_spread": (0.0, 3.0), "task_loadings": (-1.0, 1.0),
              "collapse_share": (0.0, 1.0), "kl_growth_loading": (-1.0, 1.0), "collapse_drift": (0.0, 1.0),
              "drift_autocorr": (-0.99, 0.99), "drift_reversion": (0.0, 1.0),
              "proxy_slope": (1e-6, 1e4), "proxy_exponent": (0.01, 10.0), "proxy_noise": (0.0, 1e4),
              "loss_start": (0.0, 1e6), "loss_floor_frac": (0.0, 1.0), "loss_tau": (1e-6, 1e3),
              "loss_noise": (0.0, 10.0)}

    def validate(self) -> None:
        check_ranges(self, "curves", self.RANGES)
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            name = f"curves.{f.name}"
            if f.name == "hack_peak" and v is not None:
                check_pair(name, v, lo_open=True)
                if v[1] > 1.0:
                    raise ConfigError(name, v, "must lie within (0, 1]")
            elif f.name in self._OPTIONAL and v is None:
                continue
            elif f.name == "task_loadings":   # two loadings in [-1, 1] (RANGES), not a (low, high) pair
                if not isinstance(v, tuple) or len(v) != 2:
                    raise ConfigError(name, v, "must be a (d_star, gain) pair of loadings in [-1, 1]")
                if self.gold_floor is None:
                    raise ConfigError(name, v, "needs curves.gold_floor: the task latent places the floor")
            elif isinstance(v, tuple):
                check_pair(name, v, lo_open=f.name in self._LOG_PAIRS or f.name in ("kl_exponent", "loss_tau"))
            elif f.name in ("drift_autocorr", "kl_growth_loading"):   # signed: correlations
                check_range(name, v, *self.RANGES[f.name])
            else:
                check_range(name, v, 0.0, 1.0 if f.name in self._FRACTIONS else None,
                            lo_open=f.name in ("kl_scale", "kl_saturation"))
        if self.base[1] > 1.0:
            raise ConfigError("curves.base", self.base, "must lie within [0, 1]")
        if self.collapse_share is not None and (self.kl_ceiling is None or self.gold_floor is None):
            raise ConfigError("curves.collapse_share", self.collapse_share,
                              "needs curves.kl_ceiling and curves.gold_floor: a run collapses at its ceiling, to its floor")
        if self.collapse_drift is not None and self.collapse_share is None:
            raise ConfigError("curves.collapse_drift", self.collapse_drift,
                              "needs curves.collapse_share: it is the drift a collapsed run keeps")
        if self.held_gold_lag is not None and self.gold_lag is None:
            raise ConfigError("curves.held_gold_lag", self.held_gold_lag,
                              "needs curves.gold_lag: it replaces that lag for the runs a KL penalty holds")


@dataclass(frozen=True)
class WorldModel:
    """What the paper's world leaves out: the eval's own sampling error, the
    GPU time evals and preemptions cost, and uncertain training speed.

    Every knob's default switches it off; ``docs/calibration.md`` gives the
    realistic calibration's values with their sources. Per job (drawn by the
    workload generator): an eval-set size ``n`` from ``eval_items`` (public),
    a seed-variance factor from ``seed_noise_factor``, a fixed eval time from
    ``eval_fixed_min``, a storage bandwidth (log-uniform over ``storage_gbps``)
    and warm-up from ``warmup_s`` for the preemption cost, and a straggler
    factor ``1 + X`` with ``X`` log-normal of median ``straggler_excess[0]``
    and 90th percentile ``straggler_excess[1]``; an eval takes at most
    ``eval_max_share`` of the training time of its segment (a user evaluates a
    short job less thoroughly than a long one); per eval segment a speed
    factor ``exp(segment_jitter * N(0, 1))``.
    """

    eval_items: tuple[int, ...] = ()                      # eval-set sizes; () = no sampling error
    seed_noise_factor: tuple[float, float] = (1.0, 1.0)   # eval sd = factor * sqrt(p (1 - p) / n)
    eval_fixed_min: tuple[float, float] = (0.0, 0.0)      # minutes per eval: loading, metric code
    eval_item_gpu_s: float = 0.0                          # GPU-seconds per eval item (generation)
    eval_max_share: float = 1.0                           # an eval takes at most this share of its segment's training
    checkpoint_gb: tuple[float, float, float] = (0.0, 0.0, 0.0)  # saved + restored state per type (lora, dpo, rlhf)
    storage_gbps: tuple[float, float] = (1.0, 10.0)       # checkpoint bandwidth, GB/s (log-uniform)
    warmup_s: tuple[float, float] = (0.0, 0.0)            # restart warm-up, seconds
    straggler_excess: tuple[float, float] = (0.0, 0.0)    # (median, p90) of the slowdown factor minus 1
    segment_jitter: float = 0.0                           # sd of the log speed factor of each eval segment

    # Every number's allowed [low, high] (a pair: both ends): far outside the realistic and grounded worlds
    # (noise factors 0.5-2, evals of minutes, 1-10 GB/s, warm-ups of seconds to minutes, stragglers under 1.3x).
    RANGES = {"seed_noise_factor": (0.0, 10.0), "eval_fixed_min": (0.0, 1440.0), "eval_item_gpu_s": (0.0, 3600.0),
              "eval_max_share": (0.0, 10.0), "checkpoint_gb": (0.0, 1e6), "storage_gbps": (1e-3, 1e4),
              "warmup_s": (0.0, 86400.0), "straggler_excess": (0.0, 10.0), "segment_jitter": (0.0, 1.0)}
    MAX_RESUME_H = 24.0         # the most one resume may cost: 2 x checkpoint / bandwidth + warm-up
    MAX_STRAGGLER_SPREAD = 40.0  # straggler_excess p90 / median: log-normal sigma <= 2.9, mean factor finite

    def validate(self) -> None:
        for i in self.eval_items:
            check_range("world.eval_items", i, 1, 10_000_000, integer=True)
        for name in ("seed_noise_factor", "eval_fixed_min", "storage_gbps", "warmup_s", "straggler_excess"):
            v = getattr(self, name)
            if not isinstance(v, tuple) or len(v) != 2:
                raise ConfigError(f"world.{name}", v, "must be a (low, high) pair")
        if not isinstance(self.checkpoint_gb, tuple) or len(self.checkpoint_gb) != len(JOB_TYPES):
            raise ConfigError("world.checkpoint_gb", self.checkpoint_gb,
                              f"must give one size per job type ({', '.join(JOB_TYPES)})")
        if isinstance(self.storage_gbps[0], (int, float)) and self.storage_gbps[0] <= 0:
            raise ConfigError("world.storage_gbps", self.storage_gbps, "bandwidths must be > 0")
        check_ranges(self, "world", self.RANGES)
        for name in ("seed_noise_factor", "eval_fixed_min", "storage_gbps", "warmup_s", "straggler_excess"):
            check_range(f"world.{name}", getattr(self, name)[1], getattr(self, name)[0])
        if self.straggler_excess[0] == 0 and self.straggler_excess[1] > 0:
            raise ConfigError("world.straggler_excess", self.straggler_excess,
                              "a zero median needs a zero p90 (both 0 = no stragglers)")
        self._check_derived()

    def _check_derived(self) -> None:
        """What the simulator derives from the knobs stays bounded: the cost of one resume (in GPU-hours of
        every GPU of the job, so at most :attr:`MAX_RESUME_H`) and the straggler spread."""
        resume_h = (2.0 * max(self.checkpoint_gb) / self.storage_gbps[0] + self.warmup_s[1]) / 3600.0
        if resume_h > self.MAX_RESUME_H:
            raise ConfigError("world.checkpoint_gb/storage_gbps/warmup_s",
                              (max(self.checkpoint_gb), self.storage_gbps[0], self.warmup_s[1]),
                              f"one resume would cost up to {resume_h:.4g} h (2 x checkpoint GB / GB/s + warm-up "
                              f"s), more than {self.MAX_RESUME_H:g} h")
        med, p90 = self.straggler_excess
        if med > 0 and p90 > self.MAX_STRAGGLER_SPREAD * med:
            raise ConfigError("world.straggler_excess", self.straggler_excess,
                              f"the p90 may be at most {self.MAX_STRAGGLER_SPREAD:g} times the median")

    @property
    def mean_slowdown(self) -> float:
        """Expected factor by which stragglers and segment jitter stretch a run (log-normal means)."""
        med, p90 = self.straggler_excess
        sigma = math.log(p90 / med) / Z90 if med > 0 and p90 > med else 0.0
        return (1.0 + med * math.exp(sigma ** 2 / 2)) * math.exp(self.segment_jitter ** 2 / 2)

    def mean_eval_gpu_h(self, gpus: float) -> float:
        """Expected GPU-hours of one eval of a job on ``gpus`` GPUs (fixed part on every GPU, items shared)."""
        items = sum(self.eval_items) / len(self.eval_items) if self.eval_items else 0.0
        return sum(self.eval_fixed_min) / 2 / 60 * gpus + items * self.eval_item_gpu_s / 3600


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
    noise: float | None = None         # eval-score noise sigma added to every score (None: the calibration's)
    evals_per_job: int = 10
    estimate_error: float = 0.5        # sigma of the log-normal user estimate error
    tenants: int = 4
    seed: int = 0
    mix: Mapping[str, float] | None = None   # overrides the preset's type mix
    job_types: Mapping[str, JobTypeModel] = field(default_factory=lambda: dict(DEFAULT_JOB_TYPES))
    curves: CurveModel | LatentModel | None = None   # None: the calibration's
    calibration: str = "paper"                # a name in CALIBRATIONS or a world file (.yaml): the world's defaults
    world: WorldModel | None = None           # None: the calibration's
    # nodes, GPU types and placement: a ClusterSpec, a preset name or YAML/JSON path, or a dict
    # (evalstop_gym.cluster); None: one flat pool of ``gpus``
    cluster: Any = None

    def __post_init__(self) -> None:
        if isinstance(self.calibration, os.PathLike):   # a world file given as a Path: kept as its text
            object.__setattr__(self, "calibration", os.fspath(self.calibration))
        cal = calibration_of(self.calibration)
        for name in CALIBRATED_FIELDS:  # unset fields take the calibration's value
            if getattr(self, name) is None:
                object.__setattr__(self, name, getattr(cal, name))
        if not isinstance(self.curves, (CurveModel, LatentModel)):
            raise ConfigError("curves", self.curves, "must be a LatentModel, a CurveModel or None")
        if not isinstance(self.world, WorldModel):
            raise ConfigError("world", self.world, "must be a WorldModel or None")
        if self.cluster is None:
            object.__setattr__(self, "cluster", cal.default_cluster(self.gpus))
        else:
            from .cluster import resolve_cluster

            object.__setattr__(self, "cluster", resolve_cluster(self.cluster, self.gpus))
        if self.workload not in PRESETS:
            raise ConfigError("workload", self.workload, f"must be one of {', '.join(PRESETS)}")
        check_range("jobs", self.jobs, 1, MAX_JOBS, integer=True)
        check_range("gpus", self.gpus, 1, MAX_GPUS, integer=True)
        if self.cluster is not None and self.cluster.total_gpus != self.gpus:
            raise ConfigError("cluster", self.cluster.describe(),
                              f"must hold gpus={self.gpus} GPUs (set gpus to its nodes x gpus_per_node)")
        check_range("load", self.load, 0.0, 10.0, lo_open=True)
        check_range("hacking_fraction", self.hacking_fraction, 0.0, 1.0)
        check_range("noise", self.noise, 0.0, 1.0)
        check_range("evals_per_job", self.evals_per_job, 1, 1000, integer=True)
        check_range("estimate_error", self.estimate_error, 0.0, 5.0)
        check_range("tenants", self.tenants, 1, 10_000, integer=True)
        check_range("seed", self.seed, 0, 2**63 - 1, integer=True)
        if self.jobs * self.evals_per_job > MAX_EVAL_CELLS:
            raise ConfigError("jobs", self.jobs, f"times evals_per_job={self.evals_per_job} must be <= "
                                                 f"{MAX_EVAL_CELLS} (the hidden curves' size)")
        mix = self.type_mix
        if not isinstance(mix, Mapping) or not mix:
            raise ConfigError("mix", mix, f"must be a mapping of job type to fraction, as {{'lora': 0.5, 'dpo': 0.5}} "
                                          f"(job types: {', '.join(JOB_TYPES)})")
        for t, p in mix.items():
            if t not in JOB_TYPES:
                raise ConfigError("mix", t, f"job types must be among {', '.join(JOB_TYPES)}")
            check_range(f"mix.{t}", p, 0.0, 1.0)
        if abs(sum(mix.values()) - 1.0) > 1e-6:
            raise ConfigError("mix", dict(mix), "fractions must sum to 1")
        if not isinstance(self.job_types, Mapping):
            raise ConfigError("job_types", self.job_types, "must map job types to JobTypeModel objects")
        for t in JOB_TYPES:
            if t not in self.job_types:
                raise ConfigError("job_types", sorted(map(str, self.job_types)), f"must define {', '.join(JOB_TYPES)}")
            if not isinstance(self.job_types[t], JobTypeModel):
                raise ConfigError(f"job_types.{t}", self.job_types[t], "must be a JobTypeModel "
                                  "(evalstop_gym.config.JobTypeModel)")
            self.job_types[t].validate(f"job_types.{t}")
            if mix.get(t, 0.0) > 0 and self.job_types[t].max_gpus > self.gpus:
                raise ConfigError(
                    f"job_types.{t}.gpu_choices", self.job_types[t].gpu_choices,
                    f"a {t} job may demand {self.job_types[t].max_gpus} GPUs, more than the "
                    f"cluster's gpus={self.gpus}; use gpus >= {self.job_types[t].max_gpus}")
        self.curves.validate()
        self.world.validate()

    @property
    def type_mix(self) -> Mapping[str, float]:
        return self.mix if self.mix is not None else PRESETS[self.workload]

    def replace(self, **changes: Any) -> "WorkloadConfig":
        """A copy with ``changes`` applied (and validated).

        A new ``calibration`` brings its own ``noise``, ``curves`` and ``world``
        unless the same call sets them. A dotted name changes one field of a
        nested model: ``replace(**{"curves.hack_peak": (0.6, 0.9)})``. A new
        ``cluster`` without ``gpus`` brings its own GPU count.
        """
        if changes.keys() == {"seed"}:  # a new episode's seed (each reset): every other field is already checked
            check_range("seed", changes["seed"], 0, 2**63 - 1, integer=True)
            out = copy.copy(self)
            object.__setattr__(out, "seed", changes["seed"])
            return out
        changes = dict(changes)
        for key in [k for k in changes if "." in k]:
            outer, inner = key.split(".", 1)
            model = changes.get(outer, getattr(self, outer, None))
            if outer not in CALIBRATED_FIELDS[1:] or inner not in {f.name for f in dataclasses.fields(model)}:
                raise ConfigError(key, changes[key], "unknown field; dotted names are curves.<field> "
                                  "or world.<field>")
            changes[outer] = dataclasses.replace(model, **{inner: changes.pop(key)})
        if changes.get("cluster") is not None and "gpus" not in changes:
            from .cluster import resolve_cluster

            changes["cluster"] = resolve_cluster(changes["cluster"], self.gpus)
            changes["gpus"] = changes["cluster"].total_gpus
        elif ("gpus" in changes or "calibration" in changes) and "cluster" not in changes and \
                self.cluster == calibration_of(self.calibration).default_cluster(self.gpus):
            changes["cluster"] = None  # the calibration's default cluster follows the new size / calibration
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise ConfigError(sorted(unknown)[0], changes[sorted(unknown)[0]],
                              f"unknown field; known: {', '.join(f.name for f in dataclasses.fields(self))}")
        if "calibration" in changes and changes["calibration"] != self.calibration:
            for name in CALIBRATED_FIELDS:
                changes.setdefault(name, None)
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class Calibration:
    """A named world: the defaults of the fields in :data:`CALIBRATED_FIELDS`."""

    description: str
    noise: float
    curves: CurveModel | LatentModel
    world: WorldModel
    gpus_per_node: int | None = None  # the default cluster: nodes of this many GPUs (None: one flat pool)

    def default_cluster(self, gpus: int):
        """The cluster of a config that names none: the flat pool (None), or nodes of ``gpus_per_node``."""
        if self.gpus_per_node is None:
            return None
        from .cluster import uniform

        if gpus % self.gpus_per_node:
            raise ConfigError("gpus", gpus, f"must be a multiple of {self.gpus_per_node} here: this calibration's "
                                            f"cluster is nodes of {self.gpus_per_node} GPUs (or pass cluster='flat' "
                                            "or a cluster spec)")
        return uniform(gpus // self.gpus_per_node, self.gpus_per_node)


CALIBRATED_FIELDS = ("noise", "curves", "world")


class NamedWorlds(Mapping):
    """The named calibrations; an entry given as a world-file path (:mod:`evalstop_gym.worldfile`) is read
    on first use, so importing the package reads no YAML."""

    def __init__(self, worlds: dict[str, "Calibration | str"]):
        self._worlds = dict(worlds)

    def __getitem__(self, name: str) -> Calibration:
        cal = self._worlds[name]
        if isinstance(cal, str):
            cal = self._worlds[name] = load_world(cal)
        return cal

    def __iter__(self):
        return iter(self._worlds)

    def __len__(self) -> int:
        return len(self._worlds)


def load_world(path) -> Calibration:
    """The calibration a world file holds (:mod:`evalstop_gym.worldfile`), every field checked."""
    from .worldfile import read_world

    return Calibration(**read_world(path, LatentModel, WorldModel))


def calibration_of(calibration: str) -> Calibration:
    """The world a ``calibration`` value names: a key of :data:`CALIBRATIONS` or a world file (``.yaml``)."""
    if isinstance(calibration, str) and calibration in CALIBRATIONS:
        return CALIBRATIONS[calibration]
    from .worldfile import is_world_path

    if is_world_path(calibration):   # parsed once per content of the file (worldfile.read_world)
        return load_world(calibration)
    raise ConfigError("calibration", calibration, f"must be one of {', '.join(CALIBRATIONS)} "
                                                  "or a world file (.yaml, from evalstop-gym calibrate)")


# the realistic world's costs, eval sizes and speed (docs/calibration.md gives each source)
_REALISTIC_WORLD = WorldModel(
    eval_items=(30, 164, 500, 541, 805, 1319, 14042), seed_noise_factor=(1.0, 2.0),
    eval_fixed_min=(0.5, 2.0), eval_item_gpu_s=0.05, eval_max_share=0.25, checkpoint_gb=(14.0, 126.0, 252.0),
    storage_gbps=(1.0, 10.0), warmup_s=(15.0, 250.0), straggler_excess=(0.085, 0.27), segment_jitter=0.06)


# the grounded world, fitted to the varied TRL library; regenerate (from the repository root) with
#   evalstop-gym calibrate --curves evalstop_gym/data/trl_library_varied.csv.gz --out evalstop_gym/data/grounded.yaml \
#       --base realistic
GROUNDED_WORLD = os.path.join(os.path.dirname(__file__), "data", "grounded.yaml")

# The named worlds. Every value's reason is in docs/calibration.md; `evalstop-gym audit` checks that
# none lets public data give the hidden label away early (docs/audit.md).
CALIBRATIONS: Mapping[str, Calibration] = NamedWorlds({
    "paper": Calibration(
        "the paper's detection regime: healthy runs rise to the end, only RLHF runs hack, "
        "Gaussian eval noise of one sigma for every job, free evals and preemptions, exact speed",
        noise=0.02,
        # the LatentModel defaults except four choices that keep public data from giving the label away
        # early (docs/calibration.md, "Curves from latent causes"; docs/audit.md): an exploitable proxy's
        # gold gains 0.18-0.38 at its peak, so by eval 2 a hacking run's score is no higher than a healthy
        # run's (with 0.25-0.45 it was, median 0.23 vs 0.16); its optimum d* 0.55-0.8, so the lower peaks
        # still fall past the label threshold in time for k=2; KL-growth exponents spread over 1-2, as
        # real runs' spread (a factor 2-3 in the TRL library), so a hacking run's early slowing is no
        # longer set by its d* alone; and proxy noise 0.05 (the TRL runs' median residual share of range)
        curves=LatentModel(peak_gain_exploitable=(0.18, 0.38), d_star_exploitable=(0.55, 0.8), kl_exponent=(1.0, 2.0),
                           proxy_noise=0.05),
        world=WorldModel()),
    "realistic": Calibration(
        "evidence-calibrated: curves from latent causes (learning rate, KL penalty, proxy quality) with "
        "early-saturating penalised runs, plateau drift, RLHF and DPO over-optimisation emerging from gold; "
        "binomial eval noise on each job's eval-set size; GPU time for evals and preemptions; stragglers "
        "and speed jitter",
        noise=0.0,
        curves=LatentModel(
            base=(0.1, 0.3), lr=(0.6, 1.6), kl_exponent=(0.7, 1.3), penalty_share=0.3, kl_coef=(0.05, 0.2),
            kl_saturation=0.1, d_star_exploitable=(0.5, 1.2), d_star_robust=(3.0, 8.0),
            peak_gain_exploitable=(0.15, 0.4), peak_gain_robust=(0.4, 0.8), dpo_exploitable=0.5,
            drift=0.008, drift_autocorr=0.2, proxy_slope=(0.2, 0.5)),
        world=_REALISTIC_WORLD,
        gpus_per_node=8),
    # fitted by `evalstop-gym calibrate` (docs/calibration.md, "Fitting a world to a curve log")
    "grounded": GROUNDED_WORLD,
})
