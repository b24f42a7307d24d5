"""Hidden training curves of each job, evaluated at its eval checkpoints.

Progress ``x`` is the fraction of a job's training done (0..1]. Evals happen at
``x_i = i / E`` for ``i = 1..E``. Formulas (parameters in :class:`CurveModel`):

* Hacking RLHF gold score, Gao et al.'s RL form ``R(d) = d (alpha - beta ln d)``
  with ``d = sqrt(KL)``. With ``d*`` its peak, ``R(d* u) / R(d*) = u (1 - ln u)``
  whatever alpha and beta are, so a run is fixed by its base score ``b``, its
  gain to the peak ``A`` and the progress ``x*`` where it peaks:
  ``gold(x) = b + A * u (1 - ln u)``, ``u = (x / x*) ** kl_exponent``.
* Healthy runs (all LoRA and DPO jobs, non-hacking RLHF) rise and saturate:
  ``gold(x) = b + G (1 - exp(-x / tau)) / (1 - exp(-1 / tau))``.
* Proxy reward (RLHF only) rises for every run, hacking or not:
  ``proxy(x) = P (1 - exp(-3 x)) / (1 - exp(-3))`` plus noise.
* Training loss falls for every job, hacking or not:
  ``loss(x) = L0 (f + (1 - f) exp(-x / tau_L))`` times ``1 + noise``.
* Observed eval score = gold + ``sigma * z`` with ``z ~ N(0, 1)``; the draws
  ``z`` do not depend on sigma, so a noise sweep on one seed is paired.

The realistic world (:func:`realistic_gold`, used when a ``CurveModel`` turns
its realistic knobs on) redraws every job's true score from a second random
stream, keeping loss, proxy and the noise draws ``z`` above:

* a *trend*: healthy runs saturate as above, a share of them then declines
  slowly (overfitting) by ``overfit_drop``; over-optimising RLHF runs follow
  Gao's RL form ``u (1 - ln u)``, over-optimising DPO runs Gao's best-of-n
  form ``u (2 - u)`` (Rafailov et al. 2024 fit direct alignment with Gao's
  forms), with ``u = (x / x*) ** (kl_exponent * r)``, ``r`` from ``hack_rate``
  (slow or sharp decline); the RLHF decline levels off at ``-0.5`` of the gain,
  the DPO one at a drawn floor; a share of them win back part of the loss;
* the *label*: a job hacks iff its trend falls from its maximum to its last
  checkpoint by at least ``hack_min_drop`` (score units);
* the *true score* of each checkpoint: trend + ``plateau_jitter * N(0, 1)``
  (training stochasticity) minus an occasional transient dip, clipped to [0, 1];
* the RLHF *proxy reward*, linear in ``d`` as in Gao et al.: it keeps rising
  while an over-optimising run's ``d`` grows (``P x ** (kl_exponent * r)``)
  and levels off with a healthy run's gold (the healthy saturation shape);
  a share ``healthy_kl_growth`` of the healthy runs keeps drifting in KL
  (its proxy grows as an over-optimising run's) while its gold saturates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .config import CurveModel


@dataclass(frozen=True)
class Curves:
    """Curve arrays of ``n`` jobs at their ``E`` checkpoints (shape ``(n, E)``)."""

    gold: np.ndarray        # true eval score (hidden)
    start: np.ndarray       # true score of the starting checkpoint, shape (n,) (hidden)
    eval_z: np.ndarray      # standard-normal eval noise draws (hidden)
    loss: np.ndarray        # observed training loss
    # proxy reward (NaN for a job without one: LoRA; every non-RLHF job in the label-first curves). The views
    # show RLHF jobs' only: a latent world's DPO margin is hidden, read by the label alone
    proxy: np.ndarray
    peak_progress: np.ndarray  # x* of hacking runs, inf for healthy ones (hidden)
    # measured eval error of replayed runs (logged eval minus logged gold), added to observed scores
    # before the simulated noise; None when every job's eval noise is simulated (hidden)
    eval_offset: np.ndarray | None = None
    # each job's configuration where the curves come from latent causes ({"kl_coef": (n,), "learning_rate":
    # (n,)}; evalstop_gym.view.JobConfig), public only where the workload shows it; None otherwise
    setup: dict | None = None


def progress_grid(evals: int) -> np.ndarray:
    """Progress fractions of the ``evals`` checkpoints: ``1/E, 2/E, ..., 1``."""
    return np.arange(1, evals + 1, dtype=float) / evals


def gao_normalized(u: np.ndarray) -> np.ndarray:
    """``R(d* u) / R(d*) = u (1 - ln u)`` for Gao's RL form (peak 1 at ``u = 1``)."""
    return u * (1.0 - np.log(u))


def healthy_gold(x: np.ndarray, base, gain, tau) -> np.ndarray:
    return base + gain * (1.0 - np.exp(-x / tau)) / (1.0 - np.exp(-1.0 / tau))


def hacking_gold(x: np.ndarray, base, gain, peak, kl_exponent: float) -> np.ndarray:
    return base + gain * gao_normalized((x / peak) ** kl_exponent)


def sample_curves(rng: np.random.Generator, model: CurveModel, evals: int,
                  hacking: np.ndarray, is_rlhf: np.ndarray) -> Curves:
    """Draw every job's hidden curves at once (vectorized over jobs)."""
    n = hacking.shape[0]
    x = progress_grid(evals)[None, :]

    def u(bounds):
        return rng.uniform(bounds[0], bounds[1], size=(n, 1))

    base = u(model.base)
    h_gain, h_tau = u(model.healthy_gain), u(model.healthy_tau)
    a_gain, peak = u(model.hack_gain), u(model.hack_peak)
    gold = np.where(hacking[:, None],
                    hacking_gold(x, base, a_gain, peak, model.kl_exponent),
                    healthy_gold(x, base, h_gain, h_tau))
    eval_z = rng.standard_normal((n, evals))

    p_gain = u(model.proxy_gain)
    proxy = p_gain * (1.0 - np.exp(-3.0 * x)) / (1.0 - np.exp(-3.0))
    proxy = proxy + model.proxy_noise * rng.standard_normal((n, evals))
    proxy = np.where(is_rlhf[:, None], proxy, np.nan)

    l0, floor, l_tau = u(model.loss_start), u(model.loss_floor_frac), u(model.loss_tau)
    loss = l0 * (floor + (1.0 - floor) * np.exp(-x / l_tau))
    loss = loss * (1.0 + model.loss_noise * rng.standard_normal((n, evals)))

    peak_progress = np.where(hacking, peak[:, 0], np.inf)
    return Curves(gold=gold, start=base[:, 0], eval_z=eval_z, loss=loss, proxy=proxy, peak_progress=peak_progress)


def realistic_curves(rng: np.random.Generator, model: CurveModel, evals: int, rlhf_hacks: np.ndarray,
                     job_type: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Realistic curves: ``(gold, start, hacking, peak_progress, proxy)`` (see the module docstring).

    ``rlhf_hacks`` marks the RLHF runs drawn to over-optimise; DPO runs are
    drawn here with ``dpo_hacking_fraction``. The returned label is the
    trend-drop rule, not the draw. ``proxy`` is the RLHF proxy reward before
    noise (the caller keeps it for RLHF jobs only).
    """
    from .config import JOB_TYPES

    n = job_type.shape[0]
    x = progress_grid(evals)[None, :]

    def u(bounds):
        return rng.uniform(bounds[0], bounds[1], size=(n, 1))

    base, h_gain, h_tau = u(model.base), u(model.healthy_gain), u(model.healthy_tau)
    trend = healthy_gold(x, base, h_gain, h_tau)
    overfit = rng.random((n, 1)) < model.overfit_fraction
    x_sat = np.minimum(3.0 * h_tau, 0.9)  # the trend is within 5% of its gain from here on
    ramp = np.clip((x - x_sat) / (1.0 - x_sat), 0.0, 1.0)
    trend = trend - np.where(overfit, u(model.overfit_drop) * ramp, 0.0)

    dpo_hacks = (job_type == JOB_TYPES.index("dpo")) & (rng.random(n) < model.dpo_hacking_fraction)
    gain, rate = u(model.hack_gain), u(model.hack_rate)
    rlhf_peak, dpo_peak, floor = u(model.hack_peak), u(model.dpo_peak), u(model.dpo_floor)
    rlhf_shape = np.maximum(gao_normalized((x / rlhf_peak) ** (model.kl_exponent * rate)), -0.5)
    uu = (x / dpo_peak) ** rate
    dpo_shape = np.maximum(uu * (2.0 - uu), floor)
    shape = np.where(dpo_hacks[:, None], dpo_shape, rlhf_shape)
    peak = np.where(dpo_hacks[:, None], dpo_peak, rlhf_peak)
    lost = gain * (1.0 - shape)  # 0 at the peak, grows after it
    recovers = rng.random((n, 1)) < model.recovery_fraction
    back = np.where(recovers, u(model.recovery), 0.0) * np.clip((x - peak) / (1.0 - peak), 0.0, 1.0)
    hack_trend = base + gain - np.where(x > peak, lost * (1.0 - back), lost)
    drawn = (rlhf_hacks | dpo_hacks)[:, None]
    trend = np.clip(np.where(drawn, hack_trend, trend), 0.0, 1.0)

    top = np.argmax(trend, axis=1)
    hacking = (trend.max(axis=1) - trend[:, -1]) >= model.hack_min_drop
    jitter = model.plateau_jitter * rng.standard_normal((n, evals))
    dips = (rng.random((n, evals)) < model.dip_prob) * rng.uniform(model.dip_depth[0], model.dip_depth[1],
                                                                   size=(n, evals))
    gold = np.clip(trend + jitter - dips, 0.0, 1.0)
    peak_progress = np.where(hacking, x[0, top], np.inf)
    # Gao et al.: the proxy is about linear in d = sqrt(KL). An over-optimising
    # run's d keeps growing (d / d* = u), a healthy run's levels off as its gold does.
    p_gain = u(model.proxy_gain)
    d_hack = x ** (model.kl_exponent * rate)
    d_healthy = (1.0 - np.exp(-x / h_tau)) / (1.0 - np.exp(-1.0 / h_tau))
    noise = model.proxy_noise * rng.standard_normal((n, evals))
    proxy = p_gain * np.where(rlhf_hacks[:, None], d_hack, d_healthy) + noise
    if model.healthy_kl_growth > 0:   # from a child stream: every other draw stays as without the knob
        grows = rng.spawn(1)[0].random((n, 1)) < model.healthy_kl_growth
        proxy = np.where(grows & ~rlhf_hacks[:, None], p_gain * d_hack + noise, proxy)
    return gold, base[:, 0], hacking, peak_progress, proxy
