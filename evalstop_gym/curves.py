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
    proxy: np.ndarray       # observed proxy reward (NaN for non-RLHF jobs)
    peak_progress: np.ndarray  # x* of hacking runs, inf for healthy ones (hidden)
    # measured eval error of replayed runs (logged eval minus logged gold), added to observed scores
    # before the simulated noise; None when every job's eval noise is simulated (hidden)
    eval_offset: np.ndarray | None = None


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
