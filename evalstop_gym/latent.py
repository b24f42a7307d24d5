"""Curves from latent causes: every run's gold, proxy, KL and loss from one law; hacking emerges.

Per run (any job type) the model draws latent causes, not a label:

* a relative **learning rate** ``lr`` (log-uniform) and a **KL-growth exponent** ``p``: without a KL
  penalty ``d = sqrt(KL)`` grows as ``g x**p`` over training progress ``x`` (``p = 1``: KL quadratic in
  steps, Gao et al. 2023), with ``g = kl_scale * lr`` the ``d`` reached at the end;
* a **KL coefficient** ``kappa`` (a share ``penalty_share`` of runs; log-uniform): the penalty
  saturates ``d`` at ``d_sat = kl_saturation / kappa``, ``d = d_sat (1 - exp(-g x**p / d_sat))``;
  a penalty acts like early stopping;
* the **proxy's quality**: an *exploitable* proxy (RLHF: a share ``hacking_fraction`` of runs, DPO:
  ``dpo_exploitable``, LoRA: none; a learned reward model that latches onto a spurious cue) puts the
  gold optimum at a small ``d*`` (log-uniform over ``d_star_exploitable``), a *robust* one at a large
  ``d*`` (``d_star_robust``); with it the gold gain at the optimum ``A`` (``peak_gain_*``);
* the **eval-set size** ``n`` (the world's ``eval_items``, public), and a start score ``base``.

Gold follows Gao et al.'s RL form ``R(d) = d (alpha - beta ln d)`` with ``beta = A / d*`` and
``alpha = beta (1 + ln d*)``, so its peak ``R(d*) = A`` is at ``d* = exp(alpha / beta - 1)``:
``gold = base + A (d / d*) (1 - ln(d / d*))``. DPO follows the same form in KL units (Rafailov et al.
2024 fit Gao's forms to direct-alignment over-optimisation against the KL of the implicit policy).
**Regimes** come from these causes, never from a draw of their own: where the world sets a KL ceiling
(``kl_ceiling``: a collapsed policy moves no further from its reference, so ``d = min(path, ceiling)``),
an unpenalised run's ``d`` runs past an exploitable proxy's ``d*`` to the ceiling: gold peaks, falls to its
floor (``gold_floor``) and stays, while the proxy holds at its top (the cliff); a penalty holds ``d`` near
or short of ``d*`` and gold climbs and levels off (the plateau). Gold may lag Gao's form (``gold_lag``,
:func:`lagged`; a run a penalty holds by its own ``held_gold_lag``), the proxy may bend in ``d`` (``proxy_exponent``: ``slope d**q``), and DPO may have its
own penalty share, coefficient and drift (``dpo_penalty_share``, ``dpo_kl_coef``, ``dpo_drift``). A **task**
latent (``task_loadings``) puts each run's floor at its task's quantile and ties an exploitable proxy's ``d*``
and gain to it (:func:`task_quantile`): runs of one task share where they fall to and from how high. A share
``collapse_share`` of exploitable runs **collapse** when their ``d`` meets the ceiling: gold is the floor from
there, whatever the gain. ``drift_spread`` gives each run its own drift level (log-normal about the fitted
one). ``kl_growth_loading`` draws each run's KL-growth exponent ``p`` with its learning rate (a run reaching a larger
``d`` by the end starts slower), and ``collapse_drift`` is the share of its drift a collapsed run keeps at its floor
(a DPO run, its KL held by its beta, never collapses). Each of these knobs is off by default and drawn only when
set, so a world without them draws what it drew before.
The true score adds *plateau drift* (``drift``): a random walk whose steps have lag-1
autocorrelation ``drift_autocorr`` (training stochasticity that persists across checkpoints). A run is
**hacking** iff its gold and proxy meet the label rule of logged runs (:func:`evalstop_gym.label.overoptimised`:
gold gives back at least 25% of its gain, 0.03, 2 sqrt(2) times its own noise sd and 2 sqrt(m) times its own wander's
step sd over the fall's m checkpoints after its peak while the proxy rises beyond its noise; a run without a proxy
never hacks). The rule reads the curves only, no parameter of the world. Nothing else decides it.

Public signals from the same latents: the RLHF proxy reward is linear in ``d`` (Gao et al.),
``proxy = proxy_slope * d`` plus noise, for exploitable and robust proxies alike; a DPO run's proxy, its
implicit reward margin, follows the same law (it grows with the policy's KL from its reference; the
simulator's views show proxies of RLHF jobs only, as before), a LoRA run has none; the training loss
falls for every run, faster with a larger learning rate: ``loss = L0 (f + (1 - f) exp(-x lr / tau))``.
Observed eval scores (:mod:`evalstop_gym.workload`): where the world models eval-set sizes, a
binomial draw on ``n`` items (discrete and skewed near 0 and 1, unlike a Gaussian), its error scaled
by the seed-variance factor (:func:`binomial_z`); elsewhere Gaussian noise of the configured sigma.
"""

from __future__ import annotations

import numpy as np

from .config import JOB_TYPES, LatentModel
from .curves import Curves, gao_normalized, progress_grid
from .label import overoptimised


def log_uniform(rng: np.random.Generator, bounds: tuple[float, float], n: int,
                q: np.ndarray | None = None) -> np.ndarray:
    """``n`` log-uniform draws over ``bounds``; at the quantiles ``q`` (in [0, 1)) if given, else drawn from ``rng``."""
    lo, hi = bounds
    if q is None:
        return np.exp(rng.uniform(np.log(lo), np.log(hi), size=n))
    return np.exp(at_quantile((np.log(lo), np.log(hi)), q))


def at_quantile(bounds: tuple[float, float], q: np.ndarray) -> np.ndarray:
    """The uniform over ``bounds`` at quantiles ``q``: ``low + q (high - low)`` (as ``Generator.uniform`` maps its
    draws, so ``at_quantile(b, rng.random(n))`` is ``rng.uniform(*b, size=n)`` draw for draw)."""
    lo, hi = bounds
    return lo + (hi - lo) * q


def task_quantile(rng: np.random.Generator, task: np.ndarray | None, loading: float) -> np.ndarray | None:
    """Quantiles of a quantity tied to each run's task (``task``: the task's quantile, uniform on [0, 1)) by
    ``loading`` in [-1, 1]: with probability ``|loading|`` the task's own quantile (``1 - task`` where the loading is
    negative), else an independent one. The quantity is uniform whatever the loading, and its Spearman correlation
    with the task (so with anything at the task's quantile, the gold floor) is the loading (Spearman's rho is linear
    in the copula: ``|loading|`` of the comonotone or countermonotone copula's +-1, the rest the independent one's 0).
    Draws two uniforms per run; None (nothing drawn) without a task latent (``task`` None)."""
    if task is None:
        return None
    follows = rng.random(task.shape[0]) < abs(loading)
    own = rng.random(task.shape[0])
    return np.where(follows, task if loading >= 0 else 1.0 - task, own)


def kl_path(x: np.ndarray, g: np.ndarray, p: np.ndarray, d_sat: np.ndarray) -> np.ndarray:
    """``d = sqrt(KL)`` at progress ``x``: ``g x**p`` without a penalty (``d_sat = inf``), saturating at ``d_sat``."""
    free = g[:, None] * x[None, :] ** p[:, None]
    sat = d_sat[:, None]
    with np.errstate(invalid="ignore", over="ignore"):
        damped = sat * -np.expm1(-free / sat)
    return np.where(np.isfinite(sat), damped, free)


def gold_of_d(d: np.ndarray, base: np.ndarray, gain: np.ndarray, d_star: np.ndarray) -> np.ndarray:
    """Gao's RL form ``base + d (alpha - beta ln d)`` with its peak ``gain`` at ``d_star``."""
    return base[:, None] + gain[:, None] * gao_normalized(np.maximum(d / d_star[:, None], 1e-300))


def _recur(keep: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``y_i = keep_i * y_{i-1} + x_i`` along the last axis from ``y_{-1} = 0`` (``keep``: one factor per column,
    shape ``(m,)``, or per row and column, shape ``(n, m)``): the first-order recurrence of a lag, an AR(1)
    walk and a reverting level."""
    keep = np.broadcast_to(keep, x.shape)
    out = np.empty_like(x, dtype=float)
    prev = np.zeros(x.shape[0])
    for i in range(x.shape[1]):
        prev = keep[:, i] * prev + x[:, i]
        out[:, i] = prev
    return out


def lagged(x: np.ndarray, target: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """``target`` (shape ``(n, m)``, at progress ``x``, 0 at ``x = 0``) followed with an exponential lag of
    ``tau`` (progress units, shape ``(n,)``; 0: no lag): ``s_i = s_{i-1} + (target_i - s_{i-1}) (1 - exp(-(x_i -
    x_{i-1}) / tau))`` from ``s = 0`` at ``x = 0``. Gold's lag behind Gao's frontier: at a KL the penalty holds
    fixed, a run's answers still improve for a while."""
    tau = np.asarray(tau, dtype=float)
    dx = np.diff(np.concatenate([[0.0], np.asarray(x, dtype=float)]))
    with np.errstate(divide="ignore"):
        keep = np.where(tau[:, None] > 0, np.exp(-dx[None, :] / np.where(tau > 0, tau, 1.0)[:, None]), 0.0)
    return _recur(keep, (1.0 - keep) * target)


def drift_walk(rng: np.random.Generator, n: int, evals: int, sd, rho: float, reversion: float = 0.0) -> np.ndarray:
    """AR(1) steps (sd ``sd``: a number, or one per run, shape ``(n, 1)``; lag-1 autocorrelation ``rho``) summed
    into a walk that gives back ``reversion`` of its level at each checkpoint (``w_i = (1 - reversion)
    w_{i-1} + step_i``; 0: a random walk, 1: the steps themselves), shape ``(n, evals)``."""
    eps = rng.standard_normal((n, evals))
    innovations = np.sqrt(1.0 - rho ** 2) * eps
    innovations[:, 0] = eps[:, 0]                   # the first step is a standard normal itself
    steps = _recur(np.full(evals, rho), innovations)
    if reversion == 0.0:                            # a random walk: the same sums, at NumPy's speed
        return sd * np.cumsum(steps, axis=1)
    return sd * _recur(np.full(evals, 1.0 - reversion), steps)


def latent_curves(rng: np.random.Generator, model: LatentModel, evals: int, job_type: np.ndarray,
                  hacking_fraction: float) -> tuple[Curves, np.ndarray, np.ndarray]:
    """Every job's hidden curves from its latent causes: ``(curves, hacking, kl)``.

    ``hacking_fraction``: the share of RLHF runs whose proxy is exploitable (the label itself emerges
    from each gold curve). ``kl`` is the hidden KL (nats) at each checkpoint, shape ``(n, E)``.
    """
    n = job_type.shape[0]
    x = progress_grid(evals)
    rlhf, dpo = job_type == JOB_TYPES.index("rlhf"), job_type == JOB_TYPES.index("dpo")
    share = np.where(rlhf, hacking_fraction, np.where(dpo, model.dpo_exploitable, 0.0))
    exploitable = rng.random(n) < share
    if model.kl_growth_loading is None:
        lr = log_uniform(rng, model.lr, n)
        p = rng.uniform(*model.kl_exponent, size=n)
    else:   # drawn only then: a world without it keeps every later draw (the same lr, draw for draw)
        lr_q = rng.random(n)
        lr = log_uniform(rng, model.lr, n, lr_q)
        p = at_quantile(model.kl_exponent, task_quantile(rng, lr_q, model.kl_growth_loading))
    penalised = rng.random(n) < (model.penalty_share if model.dpo_penalty_share is None
                                 else np.where(dpo, model.dpo_penalty_share, model.penalty_share))
    kappa = log_uniform(rng, model.kl_coef, n)
    if model.dpo_kl_coef is not None:   # drawn only then: a world without it keeps every later draw
        kappa = np.where(dpo, log_uniform(rng, model.dpo_kl_coef, n), kappa)
    d_sat = np.where(penalised, model.kl_saturation / kappa, np.inf)
    g = model.kl_scale * lr
    d = kl_path(x, g, p, d_sat)
    at_ceiling = np.zeros(d.shape, dtype=bool)
    if model.kl_ceiling is not None:   # drawn only then: a world without a ceiling keeps every later draw
        ceiling = log_uniform(rng, model.kl_ceiling, n)[:, None]
        at_ceiling = d >= ceiling
        d = np.minimum(d, ceiling)
    # the task's quantile, drawn only then: a world without a task latent keeps every later draw
    task = None if model.task_loadings is None else rng.random(n)
    loading_d_star, loading_gain = model.task_loadings or (0.0, 0.0)
    d_star = np.where(exploitable, log_uniform(rng, model.d_star_exploitable, n,
                                               task_quantile(rng, task, loading_d_star)),
                      log_uniform(rng, model.d_star_robust, n))
    if model.hack_peak is not None:   # place an exploitable run's optimum at a chosen progress instead
        d_star = np.where(exploitable, g * rng.uniform(*model.hack_peak, size=n) ** p, d_star)
    gain_q = rng.random(n) if task is None else task_quantile(rng, task, loading_gain)
    gain = np.where(exploitable, at_quantile(model.peak_gain_exploitable, gain_q),
                    rng.uniform(*model.peak_gain_robust, size=n))
    base = rng.uniform(*model.base, size=n)
    gold = gold_of_d(d, base, gain, d_star)
    collapsed = np.zeros(d.shape, dtype=bool)
    if model.gold_floor is not None:   # drawn only then: a world without a floor keeps every later draw
        low = at_quantile(model.gold_floor, rng.random(n) if task is None else task)   # the task's floor
        gold = np.maximum(gold, low[:, None])
        if model.collapse_share is not None:   # drawn only then: a world without it keeps every later draw
            # a policy whose KL has met its ceiling has collapsed onto the answers its exploitable proxy rates
            # highest: they score the task's floor, however little gold Gao's form would have lost by then
            # (a DPO run's KL is held by its beta: one that meets the ceiling declines, it does not collapse)
            collapsed = (exploitable & (rng.random(n) < model.collapse_share) & ~dpo)[:, None] & at_ceiling
            gold = np.where(collapsed, low[:, None], gold)
    if model.gold_lag is not None:   # drawn only then: a world without the lag keeps every later draw
        q = rng.random(n)   # rng.uniform(*gold_lag) draw for draw (at_quantile); a held run's own range at it
        tau = at_quantile(model.gold_lag, q)
        if model.held_gold_lag is not None:
            tau = np.where(penalised & ~dpo, at_quantile(model.held_gold_lag, q), tau)
        gold = base[:, None] + lagged(x, gold - base[:, None], tau)
    if model.drift > 0:
        sd = model.drift if model.dpo_drift is None else np.where(dpo, model.dpo_drift, model.drift)[:, None]
        if model.drift_spread is not None:   # drawn only then: a world without it keeps every later draw
            sd = sd * np.exp(model.drift_spread * rng.standard_normal(n))[:, None]
        walk = drift_walk(rng, n, evals, sd, model.drift_autocorr, model.drift_reversion)
        if model.collapse_drift is not None:   # a collapsed policy's answers hardly change: it keeps this share
            walk = np.where(collapsed, model.collapse_drift * walk, walk)
        gold = gold + walk
    gold = np.clip(gold, 0.0, 1.0)

    slope = log_uniform(rng, model.proxy_slope, n)
    if model.proxy_exponent is not None:   # drawn only then: a world without it keeps every later draw
        proxy = slope[:, None] * d ** rng.uniform(*model.proxy_exponent, size=n)[:, None]
    else:
        proxy = slope[:, None] * d
    proxy = proxy + model.proxy_noise * rng.standard_normal((n, evals))
    proxy = np.where((rlhf | dpo)[:, None], proxy, np.nan)
    # the proxy before training is unknown, as in a trainer's log (evalstop_gym.label)
    hacking, top, _, _ = overoptimised(np.concatenate([base[:, None], gold], axis=1),
                                       np.concatenate([np.full((n, 1), np.nan), proxy], axis=1))
    peak_progress = np.where(hacking, np.concatenate([[0.0], x])[top], np.inf)
    l0 = rng.uniform(*model.loss_start, size=n)
    floor = rng.uniform(*model.loss_floor_frac, size=n)
    tau = rng.uniform(*model.loss_tau, size=n) / lr
    loss = l0[:, None] * (floor[:, None] + (1.0 - floor[:, None]) * np.exp(-x[None, :] / tau[:, None]))
    loss = loss * (1.0 + model.loss_noise * rng.standard_normal((n, evals)))
    eval_z = rng.standard_normal((n, evals))
    setup = {"kl_coef": np.where(penalised, kappa, 0.0), "learning_rate": lr}
    curves = Curves(gold=gold, start=base, eval_z=eval_z, loss=loss, proxy=proxy, peak_progress=peak_progress,
                    setup=setup)
    return curves, hacking, d ** 2


def binomial_z(rng: np.random.Generator, gold: np.ndarray, items: np.ndarray) -> np.ndarray:
    """Standardised binomial eval errors: ``(Binomial(n, p) / n - p) / sqrt(p (1 - p) / n)`` (0 where p is 0 or 1).

    Observed scores are ``gold + sd z`` with ``sd = factor sqrt(p (1 - p) / n)``
    (:attr:`evalstop_gym.workload.Workload.observed`), so with factor 1 and no extra noise an observed
    score is a count of correct items over ``n``.
    """
    p = np.clip(gold, 0.0, 1.0)
    n = np.broadcast_to(items[:, None], p.shape)
    se = np.sqrt(p * (1.0 - p) / n)
    err = rng.binomial(n, p) / n - p
    return np.divide(err, se, out=np.zeros_like(p), where=se > 0)
