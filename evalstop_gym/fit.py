"""Fit a world's latent distributions (:class:`~evalstop_gym.config.LatentModel`) and eval noise to logged runs.

The method (docs/calibration.md, "Fitting a world to a curve log", gives every choice with its reason):

1. **Per run, least squares** on the run's own evals, progress ``x = (step - first) / (last - first)``,
   with ``d = sqrt(KL)`` from the logged ``kl`` (:func:`fit_run`):

   * KL path: ``d = g x**p`` (no penalty) against ``d = d_sat (1 - exp(-(g / d_sat) x**p))`` (a KL
     penalty), ``p`` and ``g / d_sat`` on grids and the scale in closed form; the penalised form is
     taken when its BIC is lower by :data:`BIC_MARGIN` and the run reaches at least 63% of its
     saturation (``g / d_sat >= 1``): short of that the two forms are the same curve;
   * gold on the fitted path: ``gold = base + A (d / d*) (1 - ln(d / d*))`` (Gao et al.'s RL form),
     followed with an exponential lag (:func:`evalstop_gym.latent.lagged`, on :data:`LAG_GRID`),
     ``base`` the first logged gold, ``d*`` on a grid, ``A`` in closed form within ``[0, MAX_GAIN]``;
     points at 0, 1 or the run's floor (:func:`floor_points`) left out; the proxy is *exploitable* when
     its optimum lies inside the run's KL range (``d* <= max d``);
   * drift: the gold residual (from 0 at the first eval) and its second differences; proxy:
     ``slope d**q`` (RLHF runs; ``q`` on :data:`PROXY_Q_GRID`) and its residual; loss (runs whose loss is
     positive): ``L0 (f + (1 - f) exp(-x / tau))``, ``tau`` on a grid, the rest linear;
   * eval noise: with ``gold`` and ``eval_items`` logged, the seed-variance factor is the RMS of
     ``(eval_score - gold) / sqrt(gold (1 - gold) / n)``; without ``eval_items``, a Gaussian sigma.

2. **Ranges from quantiles** (:func:`span`): a uniform ``(low, high)`` is ``median -+ IQR`` (exact for a
   uniform: its quartiles lie a quarter of the width from each end), a log-uniform one the same on
   logs; shares are means; drift and noise are pooled over runs. **KL regimes** (:func:`kl_regimes`): a
   run whose KL levelled off and whose gold fell to a floor has met the policy's ceiling, the others' KL a
   penalty holds, so a log of runs with and without a KL penalty gives a world with both regimes, the
   plateau and the cliff; penalty shares, coefficients and drift are kept per job type where DPO differs. With
   a ceiling, a free run's KL growth is fitted on its rise to it and its ``g`` and ``p`` are drawn together
   (:func:`growth_loading`); the collapsed runs' quiet floors give the drift they keep there (:func:`floor_drift`).
3. **One step of indirect inference** (:func:`debias_drift`): the fitted world sampled like the log and
   refitted; the drift scaled so its gold is as noisy as the label sees the logged runs'.

Only ``g = kl_scale * lr`` is identified (not the two factors): ``kl_scale`` is the geometric median
of ``g`` and ``lr`` the spread around it, so the relative learning rate is centred on 1. Likewise only
``d_sat = kl_saturation / kl_coef``: ``kl_saturation`` stays the base's. What no curve log holds
(costs, eval time, speed, the cluster) comes from the base calibration (:data:`FROM_BASE`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from .checks import JOB_TYPES, ConfigError
from .curves import gao_normalized
from .label import MAD_TO_SD, curve_noise

P_GRID = np.linspace(0.3, 3.0, 55)          # KL-growth exponent p
Q_GRID = np.geomspace(0.05, 60.0, 72)       # g / d_sat of a penalised run
DSTAR_GRID = np.geomspace(0.02, 200.0, 321)  # gold optimum d*
TAU_GRID = np.geomspace(0.01, 5.0, 90)      # loss decay scale (fraction of the run)
PROXY_Q_GRID = np.linspace(0.2, 1.5, 27)    # the proxy's exponent in d
PROXY_Q_SPAN = 2.0   # ... fitted on runs whose d at the proxy's checkpoints spans at least this factor
LAG_GRID = np.concatenate([[0.0], np.geomspace(0.01, 0.5, 24)])   # gold's lag behind Gao's form (progress)
# a run's gold has met its floor (the score of the answers a collapsed policy gives) when it has fallen at least
# FLOOR_FALL below its peak and its last FLOOR_POINTS checkpoints or more lie within FLOOR_BAND of its lowest point
# after the peak: the TRL runs without a KL penalty fall 0.4-0.7 and then stay within a few hundredths
FLOOR_FALL, FLOOR_BAND, FLOOR_POINTS = 0.2, 0.05, 3
BIC_MARGIN = 2.0     # the penalised KL form must beat the free one by this much BIC
MAX_GAIN = 1.0       # A bound: a score on 0..1 cannot gain more at its optimum
MAX_REACH = 10.0     # d* at most this many times the run's largest d: beyond, gold over the logged range is a line
REF_EVALS = 10       # the drift is stored per checkpoint of a run of this many evals (WorkloadConfig's default)
MIN_RUNS = 3         # runs with KL and gold needed to fit anything
# a run's d nears where it levels off above this share of it: its growth before is its rise (RunFit.rise)
RISE_SHARE = 0.9
REACH = 2.0          # a run tells an exploitable proxy from a robust one when its d passes this many times d*
MIN_SAMPLE = 60      # runs per job type sampled to debias: medians of 60 runs are within about 5%
SHARE_SAMPLE = 200   # DPO runs per arm sampled to solve DPO's exploitable share (solve_dpo_share): sd about 0.03
HELD_SAMPLE = 400    # runs per job type sampled at each scale to solve the held runs' gold lag (solve_held_lag)
HELD_SCALES = np.linspace(0.0, 1.5, 7)   # scales of the held runs' logged lag range tried by solve_held_lag
DEBIAS_STEPS = 2     # indirect-inference steps for the drift's sd and autocorrelation
REVERSION_GRID = np.linspace(0.0, 1.0, 3)   # drift reversions tried when matching the logged runs' own
MIN_TASK_RUNS = 5     # runs with a floor and an exploitable proxy needed to fit the task latent's loadings
NOISE_FLOOR = 1e-4    # gold noise (score units) below this counts as this in its log (log_noise_spread)
IQR_TO_SD = 1.349     # interquartile range of a normal over its sd
FIT_SEED = 0         # the fit's own samples (debias_drift); a report samples the world on other seeds
FITTED = ("curves.base", "curves.lr", "curves.kl_scale", "curves.kl_exponent", "curves.penalty_share",
          "curves.dpo_penalty_share", "curves.kl_coef", "curves.dpo_kl_coef", "curves.kl_ceiling",
          "curves.d_star_exploitable", "curves.d_star_robust", "curves.peak_gain_exploitable",
          "curves.peak_gain_robust", "curves.gold_lag", "curves.held_gold_lag", "curves.gold_floor", "curves.dpo_exploitable",
          "curves.task_loadings", "curves.collapse_share", "curves.collapse_drift",
          "curves.kl_growth_loading", "curves.drift", "curves.dpo_drift", "curves.drift_spread",
          "curves.drift_autocorr", "curves.drift_reversion",
          "curves.proxy_slope", "curves.proxy_exponent", "curves.proxy_noise", "curves.loss_start",
          "curves.loss_floor_frac", "curves.loss_tau", "curves.loss_noise", "noise", "world.eval_items",
          "world.seed_noise_factor")
FROM_BASE = ("curves.kl_saturation", "curves.hack_peak", "world.eval_fixed_min", "world.eval_item_gpu_s",
             "world.eval_max_share", "world.checkpoint_gb", "world.storage_gbps", "world.warmup_s",
             "world.straggler_excess", "world.segment_jitter", "gpus_per_node")


def job_type_of(name: str) -> str:
    """A run's job type from its name's ``-``-separated words (``trl-dpo-...`` is DPO); RLHF otherwise."""
    words = name.lower().replace("_", "-").split("-")
    return next((t for t in ("dpo", "lora") if t in words), "rlhf")


@dataclass(frozen=True)
class RunFit:
    """The least-squares fit of one logged run (module docstring); units of the log."""

    name: str
    job_type: str
    evals: int              # evals after the first, the points fitted
    base: float             # gold at the first eval
    g: float                # unpenalised d reached at the end
    p: float                # KL-growth exponent
    d_sat: float            # saturation of d under a penalty (inf: no penalty)
    d_star: float           # gold optimum
    gain: float             # gold gain at the optimum, A
    lag: float              # gold's lag behind Gao's form (progress units; 0: none)
    floor: float            # the gold its fall stopped at (NaN: it did not meet a floor, floor_points)
    gold_noise: float       # the label's noise estimate of its gold (evalstop_gym.label.curve_noise)
    exploitable: bool       # d* within the run's d range
    d_max: float            # the run's largest fitted d
    growth: tuple[float, float]  # (g, p) of the free form: where d levels off only at the policy's ceiling,
    #                              the saturating form's g and p are hardly identified, the free form's are
    drift_steps: np.ndarray  # steps of the gold residual
    slope: float            # proxy per unit d ** proxy_q (NaN: no proxy fitted)
    proxy_q: float          # the proxy's exponent in d (NaN: no proxy fitted, or d too level to tell)
    proxy_resid: np.ndarray
    loss: tuple[float, float, float] | None   # (L0, floor fraction, tau), None if not fitted
    loss_resid: np.ndarray  # relative residuals
    eval_z: np.ndarray      # standardised eval errors (binomial sd), empty without gold and eval_items
    eval_err: np.ndarray    # eval_score - gold, empty without gold
    eval_items: int         # 0: not logged
    # (g, p) of the free form on the evals before d nears where it levels off (below RISE_SHARE of d_sat, or of the
    # largest d without one): a collapsed run's growth before its ceiling; None under 3 such evals
    rise: tuple[float, float] | None = None
    floor_steps: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0))   # gold's steps at its floor


def kl_fit(x: np.ndarray, d: np.ndarray) -> tuple[float, float, float, np.ndarray, tuple[float, float]]:
    """``(g, p, d_sat, fitted d, (g, p) of the free form)`` of a run's sqrt-KL at progress ``x`` (``d_sat`` inf:
    no penalty)."""
    n = x.size
    xp = x[None, :] ** P_GRID[:, None]                                 # (P, n)
    g = np.maximum((xp @ d) / np.maximum(np.sum(xp * xp, axis=1), 1e-300), 0.0)
    sse = np.sum((d[None, :] - g[:, None] * xp) ** 2, axis=1)
    i = int(np.argmin(sse))
    free = (float(g[i]), float(P_GRID[i]), math.inf, g[i] * xp[i], float(sse[i]))
    s = -np.expm1(-Q_GRID[None, :, None] * xp[:, None, :])             # (P, Q, n)
    sat = np.maximum(np.einsum("pqn,n->pq", s, d) / np.maximum(np.sum(s * s, axis=2), 1e-300), 0.0)
    sse2 = np.sum((d[None, None, :] - sat[:, :, None] * s) ** 2, axis=2)
    pi, qi = np.unravel_index(int(np.argmin(sse2)), sse2.shape)

    def bic(e: float, k: int) -> float:
        return n * math.log(e / n + 1e-12) + k * math.log(n)

    if Q_GRID[qi] >= 1.0 and bic(float(sse2[pi, qi]), 3) < bic(free[4], 2) - BIC_MARGIN:
        ds = float(sat[pi, qi])
        return ds * float(Q_GRID[qi]), float(P_GRID[pi]), ds, ds * s[pi, qi], free[:2]
    return (*free[:4], free[:2])


def gold_fit(x: np.ndarray, d: np.ndarray, y: np.ndarray, use: np.ndarray) -> tuple[float, float, float, np.ndarray]:
    """``(d*, A, lag, fitted gain at the used points)`` of ``y = A gao(d / d*)`` followed with an exponential
    lag (:func:`evalstop_gym.latent.lagged`; ``y`` the gold minus its start, at progress ``x``), fitted on the
    points ``use``; ``d*`` within :data:`MAX_REACH` times the largest ``d``, the lag on :data:`LAG_GRID`."""
    from .latent import lagged

    grid = DSTAR_GRID[DSTAR_GRID <= MAX_REACH * max(float(d.max()), DSTAR_GRID[0])]
    gm0 = gao_normalized(np.maximum(d[None, :] / grid[:, None], 1e-300))                               # (D, n)
    # every lag at once: row l * D + j is d* grid[j] followed with lag LAG_GRID[l]
    gm = lagged(x, np.tile(gm0, (LAG_GRID.size, 1)), np.repeat(LAG_GRID, grid.size))[:, use]       # (L D, m)
    yu = y[use]
    a = np.clip((gm @ yu) / np.maximum(np.sum(gm * gm, axis=1), 1e-300), 0.0, MAX_GAIN)
    sse = np.sum((yu[None, :] - a[:, None] * gm) ** 2, axis=1)
    i = int(np.argmin(sse))   # the first minimum: ties keep the shorter lag
    return float(grid[i % grid.size]), float(a[i]), float(LAG_GRID[i // grid.size]), a[i] * gm[i]


def loss_fit(x: np.ndarray, loss: np.ndarray) -> tuple[tuple[float, float, float], np.ndarray] | None:
    """``((L0, floor fraction, tau), relative residuals)`` of ``L0 (f + (1 - f) exp(-x / tau))``, or None."""
    if loss.size < 4 or np.any(loss <= 0):
        return None
    e = np.exp(-x[None, :] / TAU_GRID[:, None])                      # (T, n): loss = lo + up e
    n, se, see = x.size, e.sum(axis=1), np.sum(e * e, axis=1)
    sy, sey = loss.sum(), e @ loss
    det = n * see - se * se
    ok = det > 1e-12
    up = np.where(ok, (n * sey - se * sy) / np.where(ok, det, 1.0), np.nan)
    lo = (sy - up * se) / n
    fitted = lo[:, None] + up[:, None] * e
    sse = np.where(ok & (lo >= 0) & (up >= 0), np.sum((fitted - loss) ** 2, axis=1), np.inf)
    i = int(np.argmin(sse))
    if not np.isfinite(sse[i]):
        return None
    return (float(lo[i] + up[i]), float(lo[i] / (lo[i] + up[i])), float(TAU_GRID[i])), loss / fitted[i] - 1.0


def skip_reason(run) -> str | None:
    """Why a logged run cannot be fitted (None if it can): it must log ``kl`` (an eval's ``eval_kl``, or the
    ``kl`` GRPO and RLOO log while training) and ``gold`` (the true score: without it the eval score's fall
    cannot be told from its noise, and the fitted world would be a guess)."""
    from .curvelog import has_gold

    missing = [what for what, ok in (("kl", "kl" in run.extra and np.isfinite(run.extra["kl"]).sum() >= 3),
                                     ("gold", has_gold(run))) if not ok]
    return f"no {' and no '.join(missing)} logged (at 3 evals or more)" if missing else None


def floor_points(gold: np.ndarray) -> tuple[float, np.ndarray]:
    """``(floor, floored)`` of a gold curve (the start, then its checkpoints): the median of its trailing
    checkpoints at its floor and a mask of those after the first (which may still be on the way down), or
    ``(nan, none)`` if it has no floor (:data:`FLOOR_FALL`; a floor lies below the start and above 0)."""
    top = int(np.argmax(gold))
    floored = np.zeros(gold.size, dtype=bool)
    low = float(gold[top:].min())
    # a collapse ends below where the run started; a score clipped at 0 has met the scale's bound, not a floor
    if gold[top] - low < FLOOR_FALL or low >= gold[0] or low <= 0.0:
        return math.nan, floored
    near = gold <= low + FLOOR_BAND
    tail = gold.size - (int(np.flatnonzero(~near)[-1]) + 1 if (~near).any() else 0)
    if tail < FLOOR_POINTS:
        return math.nan, floored
    floored[gold.size - tail + 1:] = True
    return float(np.median(gold[gold.size - tail:])), floored


def fit_run(run) -> RunFit | None:
    """The fit of one :class:`~evalstop_gym.curvelog.LoggedRun`, or None if it logs no ``kl`` or no gold
    (:func:`skip_reason`) or too few evals."""
    if skip_reason(run) is not None:
        return None
    step = run.step.astype(float)
    span_steps = float(step[-1] - step[0])
    if span_steps <= 0:
        return None
    x_all = (step - step[0]) / span_steps
    gold_col = run.extra["gold"]
    ok = np.isfinite(gold_col) & np.isfinite(run.extra["kl"])
    first = int(np.flatnonzero(ok)[0]) if ok.any() else -1
    pts = ok & (x_all > 0)
    if first < 0 or pts.sum() < 3:
        return None
    x, gold = x_all[pts], gold_col[pts]
    d = np.sqrt(np.maximum(run.extra["kl"][pts], 0.0))
    g, p, d_sat, d_hat, growth = kl_fit(x, d)
    below = d < RISE_SHARE * (d_sat if math.isfinite(d_sat) else float(d_hat.max()))
    rise = kl_fit(x[below], d[below])[4] if below.sum() >= 3 else None
    base = float(gold_col[first])
    # a score clipped at 0 or 1, or held at the run's floor, says only that the curve passed the bound
    floor, floored = floor_points(np.r_[base, gold])
    floored = floored[1:]
    inside = (gold > 0.0) & (gold < 1.0) & ~floored
    if inside.sum() < 3:
        return None
    d_star, gain, lag, fitted = gold_fit(x, d_hat, gold - base, inside)
    resid = gold[inside] - base - fitted
    job_type = job_type_of(run.name)
    slope, proxy_q, proxy_resid = math.nan, math.nan, np.empty(0)
    pr = np.isfinite(run.proxy_reward) & (x_all > 0)
    if job_type == "rlhf" and pr.sum() >= 3:
        dp = np.interp(x_all[pr], x, d_hat)
        # the exponent only where d spans enough to bend the proxy; a d held level by a penalty fits any
        # exponent, and there d ** q is about d: q = 1, not reported
        wide = dp.max() >= PROXY_Q_SPAN * max(float(dp.min()), 1e-9)
        grid = PROXY_Q_GRID if wide else np.array([1.0])
        dq = dp[None, :] ** grid[:, None]                                                  # (Q, n)
        y = run.proxy_reward[pr]
        slopes = np.maximum((dq @ y) / np.maximum(np.sum(dq * dq, axis=1), 1e-300), 1e-3)
        i = int(np.argmin(np.sum((y[None, :] - slopes[:, None] * dq) ** 2, axis=1)))
        slope, proxy_q = float(slopes[i]), float(grid[i]) if wide else math.nan
        proxy_resid = y - slope * dq[i]
    lo = np.isfinite(run.train_loss) & (x_all > 0)
    lf = loss_fit(x_all[lo], run.train_loss[lo])
    items_col = run.extra.get("eval_items")
    items = items_col[np.isfinite(items_col)] if items_col is not None else np.empty(0)
    n_items = int(round(float(np.median(items)))) if items.size else 0
    eval_z = np.empty(0)
    ev = pts & np.isfinite(run.eval_score)
    eval_err = run.eval_score[ev] - run.extra["gold"][ev]
    pg = np.clip(run.extra["gold"][ev], 0.0, 1.0)
    inner = (pg > 0) & (pg < 1)
    if n_items > 0 and inner.any():
        eval_z = eval_err[inner] / np.sqrt(pg[inner] * (1.0 - pg[inner]) / n_items)
    full = gold_col[ok]
    noise = float(curve_noise(full[None, :], np.array([int(np.argmax(full))]))[0])
    return RunFit(run.name, job_type, int(pts.sum()), base, g, p, d_sat, d_star, gain, lag, floor, noise,
                  bool(d_star <= d_hat.max()), float(d_hat.max()), growth,
                  np.diff(np.concatenate([[0.0], resid])), slope, proxy_q, proxy_resid,
                  None if lf is None else lf[0], np.empty(0) if lf is None else lf[1], eval_z, eval_err, n_items, rise,
                  np.diff(gold[floored]) if floored.sum() >= 2 else np.empty(0))


def curve_noise_of(curves: list[np.ndarray]) -> np.ndarray:
    """:func:`evalstop_gym.label.curve_noise` of curves of any lengths, one value each."""
    return np.array([float(curve_noise(c[None, :])[0]) for c in curves])


def drift_moments(fits, ref_evals: int) -> tuple[float | None, float]:
    """Pooled ``(step sd, lag-1 autocorrelation)`` of the walk in the runs' gold residuals, read from their
    second differences (the residual steps' differences), which a misfit of the trend's slow shape hardly
    reaches: for AR(1) steps of sd ``s`` and lag-1 autocorrelation ``rho`` a second difference has variance
    ``2 s^2 (1 - rho)`` and lag-1 autocorrelation ``-(1 - rho) / 2``. The sd is per checkpoint of a
    ``ref_evals``-eval run (a walk's variance at the end is evals x step variance)."""
    d2 = [np.diff(f.drift_steps) for f in fits if f.drift_steps.size >= 4]
    if not d2:
        return None, 0.0
    lag = sum(float(v[1:] @ v[:-1]) for v in d2) / max(sum(float(v[:-1] @ v[:-1]) for v in d2), 1e-300)
    rho = float(np.clip(1.0 + 2.0 * lag, -0.9, 0.9))
    # robust (the label's noise estimator, pooled): a trend's misfit at a peak or a cliff's foot is a few
    # large second differences the median leaves out
    scaled = np.concatenate([v * math.sqrt((v.size + 1) / ref_evals) for v in d2])
    var = float((MAD_TO_SD * np.median(np.abs(scaled))) ** 2) / (2.0 * (1.0 - rho))
    return math.sqrt(var), rho


def kl_regimes(fits) -> tuple[np.ndarray, np.ndarray]:
    """``(penalised, collapsed)`` masks over ``fits``. A run whose gold fell to a floor (:func:`floor_points`)
    has collapsed: its ``d`` met the policy's ceiling, not a penalty. With 2 such runs or more, a run whose
    ``d`` still grows is unpenalised if it reached the lowest ceiling (a collapsed run's ``d_sat``, or its
    largest ``d`` if its KL had not levelled off), penalised (a penalty that has not bitten yet) if not, and
    every other run whose KL levelled off is penalised. With fewer, every run whose KL levelled off is
    penalised, none collapsed, and the growing ones unpenalised."""
    sat = np.array([math.isfinite(f.d_sat) for f in fits])
    collapsed = np.array([math.isfinite(f.floor) for f in fits])
    if collapsed.sum() < 2:
        return sat, np.zeros(len(fits), dtype=bool)
    lowest = min(f.d_sat if math.isfinite(f.d_sat) else f.d_max for f, c in zip(fits, collapsed) if c)
    grows_past = np.array([not math.isfinite(f.d_sat) and f.d_max >= lowest for f in fits])
    return ~collapsed & ~grows_past, collapsed


def told_runs(fits, d_star_exploitable: tuple[float, float] | None) -> list:
    """The ``fits`` whose largest ``d`` passes :data:`REACH` times the geometric middle of ``d_star_exploitable``:
    a run held below that by its penalty cannot show its gold's optimum, so its robust fit says nothing of its
    proxy (all of ``fits`` where fewer than 2 reach it)."""
    told = [f for f in fits if d_star_exploitable is not None
            and f.d_max >= REACH * math.sqrt(d_star_exploitable[0] * d_star_exploitable[1])]
    return told if len(told) >= 2 else list(fits)


def exploitable_share(fits, d_star_exploitable: tuple[float, float] | None) -> float:
    """Share of ``fits`` with an exploitable proxy among those that tell (:func:`told_runs`)."""
    if not fits:
        return math.nan
    return float(np.mean([f.exploitable for f in told_runs(fits, d_star_exploitable)]))


def reversion_of(fits) -> float | None:
    """How much of its level the gold residual gives back per checkpoint, pooled over the runs: the least-squares
    ``r`` of ``level_i - level_{i-1} = -r level_{i-1} + step`` (0: a random walk, 1: no memory), within [0, 1];
    None without a run of 4 residuals."""
    pairs = [(np.cumsum(f.drift_steps)[:-1], f.drift_steps[1:]) for f in fits if f.drift_steps.size >= 4]
    if not pairs:
        return None
    den = sum(float(lv @ lv) for lv, _ in pairs)
    return float(np.clip(-sum(float(lv @ st) for lv, st in pairs) / max(den, 1e-300), 0.0, 1.0))


def collapse_share(fits, penalised: np.ndarray, collapsed: np.ndarray) -> float | None:
    """The share of runs with an exploitable proxy that collapsed (:func:`kl_regimes`) among those no penalty held
    (collapsed, or grown past the lowest ceiling): :attr:`LatentModel.collapse_share`; None without a collapsed run
    (no ceiling)."""
    free = [c for f, k, c in zip(fits, penalised, collapsed) if f.exploitable and not k and f.job_type != "dpo"]
    return round(float(np.mean(free)), 4) if free and any(free) else None


def floor_drift(fits) -> float | None:
    """The share of its drift a collapsed run keeps at its floor (:attr:`LatentModel.collapse_drift`): the median
    absolute size of the cliff runs' gold steps at their floor (:attr:`RunFit.floor_steps`) over that of the drift
    steps of the runs other than DPO (their gold residuals' steps), within [0, 1]; None under :data:`MIN_TASK_RUNS`
    runs at a floor."""
    rest = [f for f in fits if f.job_type != "dpo"]
    at_floor = [f.floor_steps for f in rest if f.floor_steps.size]
    if len(at_floor) < MIN_TASK_RUNS:
        return None
    walk = np.concatenate([f.drift_steps for f in rest])
    return round(min(float(np.median(np.abs(np.concatenate(at_floor))) / max(np.median(np.abs(walk)), 1e-300)),
                     1.0), 4)


def cliff_floored(floored) -> list:
    """The runs of ``floored`` (runs whose gold met a floor) other than DPO: the cliff's runs, a policy collapsed onto
    the answers its proxy rates highest. A DPO run that levels off low has had its KL held by beta."""
    return [f for f in floored if f.job_type != "dpo"]


def average_ranks(values) -> np.ndarray:
    """Ranks from 0 of ``values``, tied values sharing the mean of the ranks they span, so the ranks do not depend
    on the order of the input (the fitted ``p`` and ``d*`` come from grids, so ties are common)."""
    v = np.asarray(values, dtype=float)
    order = np.argsort(v, kind="stable")
    _, first, counts = np.unique(v[order], return_index=True, return_counts=True)
    ranks = np.empty(len(v))
    ranks[order] = np.repeat(first + (counts - 1) / 2.0, counts)
    return ranks


def spearman(a, b) -> float:
    """Spearman's rank correlation of two samples: Pearson's on average ranks (ties share their mean rank), so
    reordering the runs leaves it unchanged."""
    return float(np.corrcoef(average_ranks(a), average_ranks(b))[0, 1])


def task_loadings(floored) -> tuple[float, float] | None:
    """The loadings ``(d*, gain)`` of an exploitable proxy on the task latent (:attr:`LatentModel.task_loadings`):
    their Spearman correlations with the floor over the ``floored`` runs with an exploitable proxy (the world's
    floor is the task's quantile, so those correlations are the loadings); None under :data:`MIN_TASK_RUNS`."""
    runs = [f for f in floored if f.exploitable]
    if len(runs) < MIN_TASK_RUNS:
        return None
    floor = [f.floor for f in runs]
    return (round(spearman(floor, [f.d_star for f in runs]), 4), round(spearman(floor, [f.gain for f in runs]), 4))


def growth_loading(growth) -> float | None:
    """The loading of the KL-growth exponent on the learning rate (:attr:`LatentModel.kl_growth_loading`): the
    Spearman correlation of ``log g`` and ``p`` over the free runs' ``growth`` pairs ``(g, p)`` (their rise to the
    ceiling: a run's ``g`` and ``p`` trade off on the evals before it, so they are drawn together); None under
    :data:`MIN_TASK_RUNS` pairs."""
    if len(growth) < MIN_TASK_RUNS:
        return None
    g, p = np.array(growth, dtype=float).T
    return round(spearman(np.log(g), p), 4)


def log_noise_spread(fits, floorless: bool = False) -> float | None:
    """The spread between runs of their gold noise (:attr:`RunFit.gold_noise`): the IQR / 1.349 of its log (the
    sd of a normal), each run's log taken from its own group's median (DPO, the rest: :func:`median_noise`), so
    the two groups' levels do not count as spread; None under 4 runs. Noise under :data:`NOISE_FLOOR` counts as
    that (a run held at its floor logs hardly any)."""
    logs = []
    if floorless:
        fits = without_floor(fits)
    for dpo in (False, True):
        group = np.log([max(f.gold_noise, NOISE_FLOOR) for f in fits if (f.job_type == "dpo") == dpo])
        if group.size:
            logs.append(group - np.median(group))
    v = np.concatenate(logs) if logs else np.empty(0)
    if v.size < 4:
        return None
    q25, q75 = np.quantile(v, [0.25, 0.75])
    return float((q75 - q25) / IQR_TO_SD)


def solve_dpo_share(cal, fits, ref_evals: int, seed: int = FIT_SEED):
    """``cal`` with the DPO exploitable share (:attr:`LatentModel.dpo_exploitable`) whose runs, fitted and classified
    as the logged ones are (:func:`exploitable_share`), give the logged runs' share: one step of indirect inference.
    The per-run fit calls a robust DPO run exploitable when a lagged optimum inside its range explains its plateau as
    well as a far one, so the logged share overstates the world's.

    Two samples of :data:`SHARE_SAMPLE` DPO runs, one with every proxy exploitable and one with none: a run of the
    world at share ``s`` is exploitable with probability ``s`` whatever its other draws, so the told runs'
    classified share is ``(s a + (1 - s) c) / (s b + (1 - s) d)``, with ``a``, ``c`` the shares of the two
    samples' runs fitted, told and classified exploitable and ``b``, ``d`` the shares fitted and told. Solved for
    the logged share, within [0, 1] (an end where even it misses). Unchanged without DPO runs or a told sampled run."""
    dpo = [f for f in fits if f.job_type == "dpo"]
    if not dpo:
        return cal
    d_expl = cal.curves.d_star_exploitable
    want = exploitable_share(dpo, d_expl)
    evals = int(np.median([f.evals for f in fits]))
    arms = []
    for share in (1.0, 0.0):
        arm = dataclasses.replace(cal, curves=dataclasses.replace(cal.curves, dpo_exploitable=share))
        sample = sample_runs(at_evals(arm, evals, ref_evals), {"dpo": SHARE_SAMPLE}, evals, seed)
        told = told_runs([f for f in (fit_run(r) for r in sample.values()) if f is not None], d_expl)
        # per run sampled, not per run fitted: the two arms lose different shares to runs the fit refuses
        arms.append((sum(f.exploitable for f in told) / len(sample), len(told) / len(sample)))
    (a, b), (c, d) = arms
    if b + d == 0:
        return cal
    at0, at1 = c - want * d, a - want * b   # (classified - want x told) at s = 0 and 1: it rises with s
    s = 1.0 if at1 <= 0 else 0.0 if at0 >= 0 else at0 / (at0 - at1)
    return dataclasses.replace(cal, curves=dataclasses.replace(cal.curves, dpo_exploitable=round(s, 4)))


def held_lags(fits) -> list[float]:
    """The fitted gold lags (:attr:`RunFit.lag`) of the runs of ``fits`` other than DPO whose KL a penalty holds
    (:func:`kl_regimes`)."""
    penalised, _ = kl_regimes(fits)
    return [f.lag for f, k in zip(fits, penalised) if k and f.job_type != "dpo"]


def solve_held_lag(cal, fits, share: float, ref_evals: int, seed: int = FIT_SEED):
    """``cal`` with the gold lag of the runs a KL penalty holds (:attr:`LatentModel.held_gold_lag`) whose samples,
    refitted, show the logged held runs' median lag: one step of indirect inference. The per-run fit finds a lag
    in a run with none (a lag smooths the drift's wiggles as well as a slow rise: sampled with no lag, the
    grounded world's held runs refit to a median of 0.014), so the logged lags overstate the world's; and where
    the world's penalty holds ``d`` later than the logged runs' does, its gold rises late already. The held runs'
    logged range (:func:`span`) scaled by one factor, tried on :data:`HELD_SCALES` (a sample of
    :data:`HELD_SAMPLE` runs a type at each, classified by the same rule as the log) and interpolated where the
    refitted median crosses the logged one (the grid's end nearest to it if it never does). Unchanged without a
    lag or with fewer than :data:`MIN_TASK_RUNS` held runs."""
    want = held_lags(fits)
    if cal.curves.gold_lag is None or len(want) < MIN_TASK_RUNS:
        return cal
    start = span(want)
    evals = int(np.median([f.evals for f in fits]))
    counts = {t: HELD_SAMPLE for t in sorted({f.job_type for f in fits})}
    got = []
    for k in HELD_SCALES:
        trial = dataclasses.replace(cal, curves=dataclasses.replace(
            cal.curves, held_gold_lag=tuple(float(v * k) for v in start)))
        sample = sample_runs(at_evals(trial, evals, ref_evals), counts, evals, seed, share if share == share else 0.6)
        lags = held_lags([f for f in (fit_run(r) for r in sample.values()) if f is not None])
        got.append(float(np.median(lags)) if lags else np.nan)
    got = np.array(got)
    ok = np.isfinite(got)
    if ok.sum() < 2:
        return cal
    order = np.argsort(got[ok], kind="stable")
    scale = float(np.interp(np.median(want), got[ok][order], HELD_SCALES[ok][order]))
    held = tuple(round(v * scale, 6) for v in start)
    return dataclasses.replace(cal, curves=dataclasses.replace(cal.curves, held_gold_lag=held))


def solve_drift_spread(cal, fits, share: float, ref_evals: int, seed: int = FIT_SEED):
    """``cal`` with the per-run drift spread (:attr:`LatentModel.drift_spread`) whose samples' gold noise spreads
    as the logged runs' does (:func:`log_noise_spread`): sampled and refitted without it, the world's runs already
    spread by the noise estimate's own error and by their trends; the rest, ``sqrt(logged^2 - sampled^2)``, is the
    runs' own levels (log-normal: log variances add). None (the knob off) if the samples spread as much already."""
    floorless = cal.curves.collapse_drift is not None   # the floors' own drift is no part of the levels' spread
    want = log_noise_spread(fits, floorless)
    off = dataclasses.replace(cal, curves=dataclasses.replace(cal.curves, drift_spread=None))
    got = log_noise_spread(refit_sample(off, fits, share, ref_evals, seed), floorless)
    if want is None or got is None or want <= got:
        return off
    return dataclasses.replace(cal, curves=dataclasses.replace(cal.curves,
                                                               drift_spread=round(math.sqrt(want ** 2 - got ** 2), 4)))


def drift_by_type(fits, ref_evals: int) -> tuple[float | None, float, float | None]:
    """``(step sd, lag-1 autocorrelation, DPO step sd)`` (:func:`drift_moments`): the first two of the runs
    other than DPO (all runs if there are none), the last of the DPO runs (None without them)."""
    rest = [f for f in fits if f.job_type != "dpo"] or list(fits)
    dpo = [f for f in fits if f.job_type == "dpo"]
    sd, lag = drift_moments(rest, ref_evals)
    return sd, lag, drift_moments(dpo, ref_evals)[0] if dpo else None


def without_floor(fits) -> list:
    """The runs of ``fits`` whose gold met no floor."""
    return [f for f in fits if not math.isfinite(f.floor)]


def median_noise(fits, dpo: bool, floorless: bool = False) -> float | None:
    """Median gold noise (:attr:`RunFit.gold_noise`) of the DPO runs (``dpo``) or of the others (all if none);
    ``floorless``: of those whose gold met no floor only (where a collapsed run's floor has a drift of its own,
    :attr:`LatentModel.collapse_drift`, the drift is what the other runs show)."""
    chosen = [f for f in fits if (f.job_type == "dpo") == dpo] or ([] if dpo else list(fits))
    if floorless:
        chosen = without_floor(chosen) or chosen
    return float(np.median([f.gold_noise for f in chosen])) if chosen else None


def at_evals(cal, evals: int, ref_evals: int):
    """``cal`` with its drift steps (``drift``, ``dpo_drift``) for runs of ``evals`` checkpoints: a fitted drift is
    per checkpoint of a ``ref_evals``-eval run (:func:`drift_moments`), so each of ``evals`` steps is
    ``drift sqrt(ref_evals / evals)``, the walk's variance over the run the same."""
    c, k = cal.curves, math.sqrt(ref_evals / evals)
    curves = dataclasses.replace(c, drift=c.drift * k, dpo_drift=None if c.dpo_drift is None else c.dpo_drift * k)
    return dataclasses.replace(cal, curves=curves)


def refit_sample(cal, fits, share: float, ref_evals: int, seed: int = FIT_SEED) -> tuple:
    """The fits of runs of ``cal`` sampled like the logged ``fits`` (same job types, at least
    :data:`MIN_SAMPLE` of each, as many evals: :func:`at_evals`)."""
    counts = {t: max(MIN_SAMPLE, sum(f.job_type == t for f in fits)) for t in sorted({f.job_type for f in fits})}
    evals = int(np.median([f.evals for f in fits]))
    sample = sample_runs(at_evals(cal, evals, ref_evals), counts, evals, seed, share if share == share else 0.6)
    return tuple(f for f in (fit_run(r) for r in sample.values()) if f is not None)


def solve_reversion(cal, fits, measured: float, share: float, ref_evals: int):
    """``cal`` with the drift reversion whose samples, refitted, give back the ``measured`` one: the per-run fit
    takes up the slow part of any walk, so a random walk's residuals look mean-reverting too. The remeasured
    reversion at each of :data:`REVERSION_GRID`, interpolated where it crosses ``measured`` (the grid's end
    nearest to it if it never does)."""
    got = []
    for r in REVERSION_GRID:
        trial = dataclasses.replace(cal, curves=dataclasses.replace(cal.curves, drift_reversion=float(r)))
        got.append(reversion_of(refit_sample(trial, fits, share, ref_evals)))
    got = np.array([np.nan if v is None else v for v in got])
    ok = np.isfinite(got)
    if ok.sum() < 2:
        return cal
    g, r = got[ok], REVERSION_GRID[ok]
    order = np.argsort(g)
    rev = float(np.clip(np.interp(measured, g[order], r[order]), 0.0, 1.0))
    return dataclasses.replace(cal, curves=dataclasses.replace(cal.curves, drift_reversion=rev))


def debias_drift(cal, fits, measured_lag: float, ref_evals: int, share: float, seed: int = FIT_SEED):
    """``cal`` with its drift corrected for what the per-run fit misses (one step of indirect inference).

    Fitting ``d*`` and ``A`` to each run takes up part of its drift walk, and a trend the form misses adds to
    its residuals. Sample runs of ``cal`` like the logged ones, fit them the same way, and scale each step sd
    by the logged runs' median gold noise over the samples' (the label's own noise estimate, per
    :func:`median_noise` group), and shift the autocorrelation by what the fit changed there: ``autocorr +
    measured - remeasured``.
    """
    again = refit_sample(cal, fits, share, ref_evals, seed)
    sd2, lag2, _ = drift_by_type(again, ref_evals)
    if not sd2:
        return cal
    c = cal.curves

    def scaled(sd, dpo: bool):
        floorless = c.collapse_drift is not None and not dpo   # a DPO run never collapses: all of them
        want, got = median_noise(fits, dpo, floorless), median_noise(again, dpo, floorless)
        return sd * want / got if sd is not None and want and got else sd

    curves = dataclasses.replace(c, drift=scaled(c.drift, False), dpo_drift=scaled(c.dpo_drift, True),
                                 drift_autocorr=float(np.clip(c.drift_autocorr + measured_lag - lag2, -0.9, 0.9)))
    return dataclasses.replace(cal, curves=curves)


def span(values, log: bool = False, lo: float = 0.0, hi: float = math.inf) -> tuple[float, float]:
    """A uniform (``log``: log-uniform) ``(low, high)`` from samples: ``median -+ IQR``, within ``[lo, hi]``."""
    v = np.asarray(values, dtype=float)
    v = np.log(v) if log else v
    q25, med, q75 = np.quantile(v, [0.25, 0.5, 0.75])
    a, b = med - (q75 - q25), med + (q75 - q25)
    if log:
        a, b = math.exp(a), math.exp(b)
    a, b = min(max(float(a), lo), hi), min(max(float(b), lo), hi)
    return (a, b) if a > 0 or not log else (min(1e-6, b), b)


@dataclass(frozen=True)
class FitResult:
    """The fitted calibration, the per-run fits and what the fit could not identify."""

    calibration: object              # a config.Calibration
    fits: tuple[RunFit, ...]
    rlhf_exploitable: float           # share of RLHF runs with an exploitable proxy (a workload's hacking_fraction)
    from_base: tuple[str, ...]        # fields taken from the base calibration
    notes: tuple[str, ...]            # what was not fitted and why


def fit_world(runs: dict, base, description: str | None = None, ref_evals: int = REF_EVALS) -> FitResult:
    """Fit ``base`` (a :class:`~evalstop_gym.config.Calibration`)'s curve and eval-noise fields to ``runs``."""
    from .config import Calibration

    fits = tuple(f for f in (fit_run(r) for r in runs.values()) if f is not None)
    if len(fits) < MIN_RUNS:
        raise ConfigError("curves", f"{len(fits)} of {len(runs)} runs",
                          f"at least {MIN_RUNS} runs must log eval_score, gold and kl at >= 3 evals "
                          "after the first to fit a world")
    c0, notes, from_base = base.curves, [], list(FROM_BASE)

    def keep(name: str, why: str):
        notes.append(f"{name}: the base's ({why})")
        from_base.append(name)
        return getattr(c0, name.split(".", 1)[1])

    penalised, collapsed = kl_regimes(fits)
    pen = [f for f, k in zip(fits, penalised) if k and math.isfinite(f.d_sat)]   # the penalties that bit
    # DPO's beta and an RL trainer's KL coefficient hold d at different levels: each type its own range
    pen_dpo = [f for f in pen if f.job_type == "dpo"]
    pen_rest = [f for f in pen if f.job_type != "dpo"] or pen
    ceiling = [f for f, k in zip(fits, collapsed) if k]
    # g and p are identified where no penalty holds d back (a collapsed run's by its free form); under a
    # penalty that saturates early, hardly at all
    free = [f for f, k in zip(fits, penalised) if not k] or list(fits)
    gp = {f.name: f.growth if c else (f.g, f.p) for f, c in zip(fits, collapsed)}
    if ceiling:   # with a ceiling, a free run's KL growth is its rise to it (growth_loading)
        free = [f for f in free if f.rise is not None] or free
        gp.update({f.name: f.rise for f in free if f.rise is not None})
    kl_scale = float(np.exp(np.median(np.log([max(gp[f.name][0], 1e-6) for f in free]))))
    lr_run = np.array([max(gp[f.name][0], 1e-6) / kl_scale if not k or len(free) == len(fits) else 1.0
                       for f, k in zip(fits, penalised)])
    expl = [f for f in fits if f.exploitable]
    rob = [f for f in fits if not f.exploitable]
    dpo = [f for f in fits if f.job_type == "dpo"]
    rlhf = [f for f in fits if f.job_type == "rlhf"]
    sd, lag, dpo_sd = drift_by_type(fits, ref_evals)
    steps = sd is not None
    rev = reversion_of(fits) or 0.0
    d_expl = span([f.d_star for f in expl], log=True) if len(expl) >= 2 else c0.d_star_exploitable
    share = exploitable_share(rlhf, d_expl)
    # the floor of a collapsed policy: DPO runs that level off low have their KL held by beta, not collapsed
    floored = [f for f in fits if math.isfinite(f.floor)]
    floors = [f.floor for f in (cliff_floored(floored) or floored)]
    prox = [f for f in rlhf if math.isfinite(f.slope)]
    collapses = collapse_share(fits, penalised, collapsed) if len(floors) >= 2 else None
    loss = [(f, lr) for f, lr in zip(fits, lr_run) if f.loss is not None]
    kw = dict(base=span([f.base for f in fits], hi=1.0), lr=span([gp[f.name][0] / kl_scale for f in free], log=True),
              kl_scale=kl_scale,
              kl_exponent=span([gp[f.name][1] for f in (free if ceiling else fits)], lo=0.05),
              penalty_share=float(np.mean(penalised[[f.job_type != "dpo" for f in fits]]))
              if any(f.job_type != "dpo" for f in fits) else len(pen) / len(fits),
              dpo_penalty_share=(float(np.mean(penalised[[f.job_type == "dpo" for f in fits]])) if dpo
                                 else keep("curves.dpo_penalty_share", "no DPO runs")),
              kl_coef=(span([c0.kl_saturation / f.d_sat for f in pen_rest], log=True) if len(pen_rest) >= 2
                       else keep("curves.kl_coef", "fewer than 2 runs whose KL a penalty levels off")),
              dpo_kl_coef=(span([c0.kl_saturation / f.d_sat for f in pen_dpo], log=True) if len(pen_dpo) >= 2
                           else keep("curves.dpo_kl_coef", "fewer than 2 DPO runs whose KL a penalty levels off")),
              kl_ceiling=(span([f.d_sat if math.isfinite(f.d_sat) else f.d_max for f in ceiling], log=True)
                          if ceiling
                          else keep("curves.kl_ceiling", "no run's KL levels off above its penalised runs'")),
              d_star_exploitable=(d_expl if len(expl) >= 2
                                  else keep("curves.d_star_exploitable", "fewer than 2 exploitable runs")),
              d_star_robust=(span([f.d_star for f in rob], log=True) if len(rob) >= 2
                             else keep("curves.d_star_robust", "fewer than 2 robust runs")),
              peak_gain_exploitable=(span([f.gain for f in expl]) if len(expl) >= 2
                                     else keep("curves.peak_gain_exploitable", "fewer than 2 exploitable runs")),
              gold_lag=span([f.lag for f in fits]) if any(f.lag > 0 for f in fits) else None,
              gold_floor=(span(floors, hi=1.0) if len(floors) >= 2
                          else keep("curves.gold_floor", "fewer than 2 runs fell to a floor")),
              task_loadings=task_loadings(cliff_floored(floored)),
              kl_growth_loading=growth_loading([gp[f.name] for f in free]) if ceiling else None,
              collapse_share=collapses,
              collapse_drift=floor_drift(fits) if collapses is not None else None,
              peak_gain_robust=(span([f.gain for f in rob]) if len(rob) >= 2
                                else keep("curves.peak_gain_robust", "fewer than 2 robust runs")),
              dpo_exploitable=(exploitable_share(dpo, d_expl) if dpo
                               else keep("curves.dpo_exploitable", "no DPO runs")),
              drift=sd if steps else keep("curves.drift", "no run with 3 evals"),
              dpo_drift=dpo_sd if dpo_sd is not None else keep("curves.dpo_drift", "no DPO run with 4 evals"),
              drift_reversion=rev,
              drift_autocorr=float(np.clip(lag, -0.9, 0.9)) if steps else keep("curves.drift_autocorr",
                                                                                 "no run with 3 evals"))
    bent = [f.proxy_q for f in prox if math.isfinite(f.proxy_q)]
    if len(prox) >= 2:
        kw.update(proxy_slope=span([f.slope for f in prox], log=True),
                  proxy_exponent=(span(bent, lo=float(PROXY_Q_GRID[0]), hi=float(PROXY_Q_GRID[-1])) if len(bent) >= 2
                                  else keep("curves.proxy_exponent", "fewer than 2 runs whose d spans a factor 2")),
                  # robust, as the label reads a proxy's noise (evalstop_gym.label.curve_noise): the proxy's
                  # departures from a line in d are slow (it levels off before d does), not noise
                  proxy_noise=float(np.sqrt(np.mean(curve_noise_of([f.proxy_resid for f in prox]) ** 2))))
    else:
        kw.update(proxy_slope=keep("curves.proxy_slope", "fewer than 2 RLHF runs log a proxy reward"),
                  proxy_exponent=keep("curves.proxy_exponent", "fewer than 2 RLHF runs log a proxy reward"),
                  proxy_noise=keep("curves.proxy_noise", "fewer than 2 RLHF runs log a proxy reward"))
    if len(loss) >= 2:
        kw.update(loss_start=span([f.loss[0] for f, _ in loss], lo=1e-6),
                  loss_floor_frac=span([f.loss[1] for f, _ in loss], hi=1.0),
                  loss_tau=span([f.loss[2] * lr for f, lr in loss], lo=0.01),
                  loss_noise=float(np.sqrt(np.mean(np.concatenate([f.loss_resid for f, _ in loss]) ** 2))))
        if len(loss) < len(fits):
            notes.append(f"loss: fitted on the {len(loss)} runs whose logged loss is positive and falls "
                         f"(of {len(fits)}); the others' losses are not of the model's form")
    else:
        for name in ("loss_start", "loss_floor_frac", "loss_tau", "loss_noise"):
            kw[name] = keep(f"curves.{name}", "fewer than 2 runs log a positive, falling loss")
    curves = dataclasses.replace(c0, **kw)
    world, noise = base.world, base.noise
    z = [f.eval_z for f in fits if f.eval_z.size]
    err = [f.eval_err for f in fits if f.eval_err.size]
    if z:
        factors = np.array([float(np.sqrt(np.mean(v ** 2))) for v in z])
        # each run's RMS of m draws has sampling variance about factor**2 / (2 m), as large as the spread
        # itself on 10 evals: take it out (method of moments), then a uniform of that variance
        own = float(np.mean(factors ** 2 / (2.0 * np.array([v.size for v in z]))))
        mid = float(np.mean(factors))
        half = math.sqrt(3.0 * max(float(np.var(factors)) - own, 0.0))
        items = tuple(sorted({f.eval_items for f in fits if f.eval_z.size}))
        world = dataclasses.replace(world, eval_items=items, seed_noise_factor=(max(mid - half, 0.0), mid + half))
        noise = 0.0
    elif err:
        world = dataclasses.replace(world, eval_items=())
        noise = float(np.sqrt(np.mean(np.concatenate(err) ** 2)))
        notes.append("eval noise: Gaussian (the log has gold but no eval_items)")
    else:
        from_base += ["noise", "world.eval_items", "world.seed_noise_factor"]
        notes.append("eval noise: the base's (no eval score logged beside the gold)")
    cal = Calibration(description or f"fitted to {len(fits)} logged runs", noise=noise, curves=curves,
                      world=world, gpus_per_node=base.gpus_per_node)
    if cal.curves.task_loadings is None:
        notes.append(f"curves.task_loadings: off (fewer than {MIN_TASK_RUNS} runs of a type other than DPO fell to "
                     "a floor with an exploitable proxy)")
    cal = solve_dpo_share(cal, fits, ref_evals)
    cal = solve_held_lag(cal, fits, share, ref_evals)
    if steps and curves.drift > 0:
        cal = solve_reversion(cal, fits, rev, share, ref_evals)
        cal = solve_drift_spread(cal, fits, share, ref_evals)
        for _ in range(DEBIAS_STEPS):
            cal = debias_drift(cal, fits, lag, ref_evals, share)
    cal.curves.validate()
    cal.world.validate()
    return FitResult(cal, fits, share, tuple(from_base), tuple(notes))


# -- samples of a world as a curve log, and fit quality ----------------------------------------------

def sample_runs(cal, counts: dict[str, int], evals: int, seed: int = 0, hacking_fraction: float = 0.6,
                step: int = 8) -> dict:
    """Runs of ``cal``'s own model as logged runs (``{name: LoggedRun}``, names ``<type>-<i>``): ``counts``
    runs per job type, ``evals`` evals after step 0 every ``step`` steps, with the gold, KL, proxy, loss
    and observed eval score (the world's binomial or Gaussian noise), as a trainer would log them."""
    from .curvelog import LoggedRun
    from .latent import binomial_z, latent_curves

    rng = np.random.default_rng([seed, 3])
    job_type = np.concatenate([np.full(int(k), JOB_TYPES.index(t)) for t, k in counts.items()])
    curves, _, kl = latent_curves(rng, cal.curves, evals, job_type, hacking_fraction)
    gold = np.concatenate([curves.start[:, None], curves.gold], axis=1)
    n = gold.shape[0]
    if cal.world.eval_items:
        items = rng.choice(np.array(cal.world.eval_items, dtype=np.int64), size=n)
        factor = rng.uniform(*cal.world.seed_noise_factor, size=n)
        p = np.clip(gold, 0.0, 1.0)
        sd = np.sqrt(cal.noise ** 2 + factor[:, None] ** 2 * p * (1.0 - p) / items[:, None])
        z = binomial_z(rng, gold, items)
    else:
        items, sd, z = np.zeros(n, dtype=np.int64), np.full(gold.shape, cal.noise), rng.standard_normal(gold.shape)
    observed = gold + sd * z
    lead = np.full((n, 1), np.nan)
    out = {}
    for i in range(n):
        name = f"{JOB_TYPES[job_type[i]]}-{i}"
        extra = {"gold": gold[i], "kl": np.concatenate([[0.0], kl[i]])}
        if items[i]:
            extra["eval_items"] = np.full(evals + 1, float(items[i]))
        out[name] = LoggedRun(name, np.arange(evals + 1, dtype=float) * step, observed[i],
                              np.concatenate([lead[0], curves.loss[i]]), np.concatenate([lead[0], curves.proxy[i]]),
                              extra)
    return out


def log_rows(runs: dict) -> list[dict]:
    """Curve-log rows (:func:`evalstop_gym.curvelog.write_curve_log`) of logged runs; NaN written blank."""
    rows = []
    for run in runs.values():
        cols = {"eval_score": run.eval_score, "train_loss": run.train_loss, "proxy_reward": run.proxy_reward,
                **run.extra}
        for j, s in enumerate(run.step):
            rows.append({"job": run.name, "step": int(s) if float(s).is_integer() else float(s),
                         **{k: ("" if not np.isfinite(v[j]) else float(v[j])) for k, v in cols.items()}})
    return rows


FEATURES = ("start", "gain to peak", "peak progress", "end drop", "final KL", "KL half / final",
            "first proxy", "final proxy", "loss end / start", "eval error sd", "gold step sd")


def run_features(run) -> dict[str, float]:
    """Summary figures of one logged run (gold = the gold column, else the eval score)."""
    from .curvelog import has_gold

    gold = run.extra["gold"] if has_gold(run) else run.eval_score
    ok = np.isfinite(gold)
    x = (run.step - run.step[0]) / max(float(run.step[-1] - run.step[0]), 1e-300)
    xg, g = x[ok], gold[ok]
    top = int(np.argmax(g))
    f = {"start": g[0], "gain to peak": g[top] - g[0], "peak progress": xg[top], "end drop": g[top] - g[-1],
         "gold step sd": float(np.std(np.diff(g)))}
    if "kl" in run.extra:
        k = run.extra["kl"]
        kk = np.isfinite(k)
        if kk.sum() >= 2:
            f["final KL"] = k[kk][-1]
            f["KL half / final"] = float(np.interp(0.5, x[kk], k[kk])) / max(float(k[kk][-1]), 1e-9)
    pr = run.proxy_reward[np.isfinite(run.proxy_reward)]
    if pr.size and job_type_of(run.name) == "rlhf":
        f["first proxy"], f["final proxy"] = pr[0], pr[-1]
    lo = run.train_loss[np.isfinite(run.train_loss)]
    if lo.size >= 2 and np.all(lo > 0):
        f["loss end / start"] = lo[-1] / lo[0]
    if has_gold(run):
        e = run.eval_score - run.extra["gold"]
        e = e[np.isfinite(e)]
        if e.size:
            f["eval error sd"] = float(np.sqrt(np.mean(e ** 2)))
    return {k: float(v) for k, v in f.items()}


def feature_table(real: dict, fitted: dict, evals: int) -> list[dict]:
    """Per job type and feature: q10 / median / q90 in the real runs and in the fitted world's samples,
    and the share of hacking runs (the gold label rule on ``evals`` checkpoints)."""
    from .curvelog import label_gold

    rows = []
    for t in JOB_TYPES:
        r = [run for run in real.values() if job_type_of(run.name) == t]
        s = [run for run in fitted.values() if job_type_of(run.name) == t]
        if not r or not s:
            continue
        fr, fs = [run_features(x) for x in r], [run_features(x) for x in s]
        for name in FEATURES:
            a = [f[name] for f in fr if name in f]
            b = [f[name] for f in fs if name in f]
            if a and b:
                rows.append({"job_type": t, "feature": name, "runs": len(a), "real": np.quantile(a, [0.1, 0.5, 0.9]),
                             "fitted": np.quantile(b, [0.1, 0.5, 0.9])})
        hr = np.mean([label_gold(x, evals).hacking for x in r])
        hs = np.mean([label_gold(x, evals).hacking for x in s])
        rows.append({"job_type": t, "feature": "hacking share", "runs": len(r), "real": np.array([hr] * 3),
                     "fitted": np.array([hs] * 3)})
    return rows


def format_table(rows: list[dict]) -> str:
    head = f"{'type':<5} {'feature':<17} {'runs':>4}  {'real q10 / q50 / q90':>26}  {'fitted q10 / q50 / q90':>26}"
    lines = [head, "-" * len(head)]
    for r in rows:
        def q(v):
            return f"{v[0]:8.3f} {v[1]:8.3f} {v[2]:8.3f}"
        lines.append(f"{r['job_type']:<5} {r['feature']:<17} {r['runs']:>4}  {q(r['real']):>26}  {q(r['fitted']):>26}")
    return "\n".join(lines)
