"""The hacking label: over-optimisation as Gao et al. (2023) define it, one rule for worlds and logged runs.

A run is **hacking** when its true score (gold) falls after its peak while its proxy reward keeps rising:

* gold's peak is the first maximum over the start and the ``E`` checkpoints, and not the last checkpoint;
* gold's fall from the peak to the last checkpoint is at least ``max(GOLD_DROP_SHARE * gain, GOLD_MIN_DROP,
  NOISE_MULTIPLE * sqrt(2) * s_gold, NOISE_MULTIPLE * sqrt(m) * w_gold)`` (``gain``: peak minus start, ``m``:
  the span of the fall, in checkpoints from the peak to the last one): it gives back a quarter of what the run
  gained, at least 0.03, more than its own noise and more than its own wander over that span;
* the proxy at the last checkpoint is above the proxy at gold's peak by more than
  ``NOISE_MULTIPLE * sqrt(2) * s_proxy``: the proxy rose over the stretch where gold fell.

A run without a proxy (NaN at its checkpoints: LoRA jobs, logs without a proxy column) is never hacking: without a
proxy there is nothing to over-optimise, and a gold fall alone may be the run's wander.

**The proxy's start.** A trainer logs its reward (GRPO / RLOO ``reward``, DPO ``rewards/margins``) after
training steps, never before the first one, so the proxy before training is unknown in real logs: its start
is NaN unless a log holds a proxy value at its first step. An unknown start is not invented: it is left out
of the proxy's noise (a value copied back from the first checkpoint would make the first second difference
a first difference, the trend counted as noise; a 0 would be a noiseless point no log holds), and when gold
peaks at the start the rise is read from the first checkpoint, the earliest proxy logged (no run is
labelled from a stretch nobody logged). Worlds label their proxies the same way: the start is unknown there
too, as in the logs a world's runs stand for, so a world's run and its log get one label.

**Noise.** ``s`` is each curve's own noise, estimated from its checkpoints alone, never from a world's
parameters (so a detector cannot read a world constant off the label): ``1.4826 * median |second difference|
/ sqrt(6)``, the robust sd of independent errors around a locally linear trend (a second difference of such
errors has variance ``6 s^2``; the median ignores the few large second differences at a peak or a cliff,
where a first difference would count the trend itself as noise). A difference of two checkpoints then has
sd ``sqrt(2) s``, and ``NOISE_MULTIPLE`` (2) of those is what a fall or a rise must beat (docs/calibration.md
gives the labelled share of a world without an exploitable proxy at each multiple). The start and ``E`` checkpoints
have ``E - 1`` second differences. For gold the one centred on its peak is left out: it is the peak's own
curvature, the signal; a peak at the start or at the last checkpoint has none, so nothing is left out. With
10 checkpoints the median runs over 9 second differences (8 for gold peaking between the start and the last
checkpoint, 8 for a proxy with an unknown start). A curve with fewer than 3 second differences left gets
noise 0 (so few points cannot tell noise from trend; the share and minimum-drop thresholds still apply):
gold with 4 checkpoints or fewer if its peak lies between the start and the last checkpoint, with 3 or fewer
if it peaks at either end; a proxy with 4 checkpoints or fewer (3 or fewer if its start is known); and any
curve of two known points, which has no second difference at all.

**Wander.** Gold also wanders: training stochasticity that persists from checkpoint to checkpoint, a random
walk about its trend. A walk's fall over ``m`` steps has sd ``sqrt(m)`` times its step's, so a bar fixed in
the span labels more of a wandering run the more checkpoints it has (and the fall is measured from a
maximum, which a walk reaches by chance). ``w`` is the walk's step sd read off the curve alone, in two ways
that a trend inflates differently:

* ``1.4826 * median |second difference| / sqrt(2)`` (``sqrt(3) s``): a walk's second difference is the
  difference of two independent steps (variance ``2 w^2``). Blind to a locally linear trend and to a corner
  (one large second difference each), but a smooth bend, as gold rising to an early peak and falling again,
  reads as steps;
* ``1.4826 * median |third difference| / sqrt(6)``: a walk's third difference is the second difference of its
  steps (variance ``6 w^2``). Blind to a locally quadratic trend, the bend, but a corner gives two large
  third differences (those whose window holds it inside), so the plateau's and the cliff's corners of a short
  run can outnumber the rest.

For a walk both read ``w``; a trend mostly adds to either, so ``w`` is the smaller. The peak's own second
difference and its two third differences are left out, as above (its curvature and its corner are the
signal); below 3 left, a reading is 0: the third differences of gold on 4 checkpoints or fewer whatever its
peak, and on 5 or 6 wherever the peak's left-out differences leave fewer than 3 (on 5, all but a peak at the
start). ``w`` being the smaller reading, such a short curve gets no wander bar (the noise bar stands). The curve cannot tell a walk from independent errors on so few
points; for either reading, a fall over ``m >= 1`` steps varies most when its differences are all a walk's
(errors ``e`` and steps ``w`` give second differences of variance ``6 e^2 + 2 w^2`` and a fall of variance
``2 e^2 + m w^2``; third differences ``20 e^2 + 6 w^2``), so the bar takes that worst case:
``NOISE_MULTIPLE * sqrt(m) * w``. Steps with a positive lag-1 autocorrelation ``rho`` travel further than
their differences show (by about ``sqrt((1 + rho) / (1 - rho))``): the bar is a walk's with independent
steps, no more. It only adds to the noise bar, so it never labels a run the noise bar alone would not.

Worlds (:func:`evalstop_gym.latent.latent_curves`, vectorised over runs) and logged runs
(:func:`evalstop_gym.curvelog.label_gold`, one row) call this same function on the start and ``E``
checkpoints of gold and proxy.
"""

from __future__ import annotations

import math

import numpy as np

GOLD_DROP_SHARE = 0.25   # share of the run's gold gain that must be given back to call it hacking
GOLD_MIN_DROP = 0.03     # and at least this much: several times the dense gold's sampling error
NOISE_MULTIPLE = 2.0     # a fall (or rise) must beat this many sds of itself, under noise and under wander
MAD_TO_SD = 1.4826       # median absolute deviation to sd for Gaussian errors
MIN_NOISE_POINTS = 3     # fewer differences than this estimate no noise or wander (0): they are mostly trend


def robust_sd(diffs: np.ndarray, per_unit: float) -> np.ndarray:
    """Each row's ``1.4826 * median |diff| / per_unit`` over its finite entries (``per_unit``: the sd of one
    difference per unit of the sd sought); 0 for a row with fewer than ``MIN_NOISE_POINTS`` of them."""
    d = np.abs(diffs)
    out = np.zeros(d.shape[0])
    # rows with too few differences (a start and one or two checkpoints have no second difference at all) keep 0
    enough = np.isfinite(d).sum(axis=1) >= MIN_NOISE_POINTS
    if enough.any():
        out[enough] = MAD_TO_SD * row_nanmedian(d[enough]) / per_unit
    return out


def row_nanmedian(x: np.ndarray) -> np.ndarray:
    """Each row's median over its non-NaN entries, for rows with at least one: the value of
    ``np.nanmedian(x, axis=1)``, bit for bit (the two middle values summed from 0.0, ``0.0 + low + high``,
    then halved, with ``low = high`` on an odd count, as NumPy computes it; the leading 0.0 makes a -0.0
    median 0.0, as NumPy's). NumPy takes that median of a short row through masked arrays, which cost
    several times the sort: this runs at every episode's labelling."""
    s = np.sort(x, axis=1)  # NaNs sort last
    count = x.shape[1] - np.isnan(x).sum(axis=1)
    high = count // 2
    low = high - 1 + count % 2
    rows = np.arange(x.shape[0])
    return (0.0 + s[rows, low] + s[rows, high]) / 2.0


def curve_noise(curve: np.ndarray, peak: np.ndarray | None = None) -> np.ndarray:
    """Each row's robust noise sd: ``1.4826 * median |second difference| / sqrt(6)`` (module docstring).

    ``curve``: shape ``(n, m)``. ``peak``: each row's peak index, whose own second difference (the peak's
    curvature, the signal) is left out. A row with fewer than ``MIN_NOISE_POINTS`` second differences left
    has noise 0.
    """
    d2 = np.diff(np.asarray(curve, dtype=float), n=2, axis=1)
    if peak is not None:
        d2[(np.arange(d2.shape[1])[None, :] + 1) == np.asarray(peak)[:, None]] = np.nan
    return robust_sd(d2, math.sqrt(6.0))


def curve_wander(curve: np.ndarray, peak: np.ndarray | None = None, noise: np.ndarray | None = None) -> np.ndarray:
    """Each row's robust step sd of a random walk (module docstring), in the curve's units per checkpoint: the
    smaller of ``1.4826 * median |third difference| / sqrt(6)`` and ``sqrt(3) * curve_noise``. ``curve``: shape
    ``(n, m)``. ``peak``: each row's peak index; its second difference and the two third differences whose
    window holds it inside are left out. A reading with fewer than ``MIN_NOISE_POINTS`` differences left is 0.
    ``noise``: ``curve_noise(curve, peak)`` if the caller has it already."""
    d3 = np.diff(np.asarray(curve, dtype=float), n=3, axis=1)
    if peak is not None:
        inner = np.arange(d3.shape[1])[None, :] + np.array([[[1]], [[2]]])   # a window's two inner points
        d3[(inner == np.asarray(peak)[:, None]).any(axis=0)] = np.nan
    if noise is None:
        noise = curve_noise(curve, peak)
    return np.minimum(robust_sd(d3, math.sqrt(6.0)), math.sqrt(3.0) * noise)


def overoptimised(gold: np.ndarray, proxy: np.ndarray, *, drop_share: float = GOLD_DROP_SHARE,
                  min_drop: float = GOLD_MIN_DROP) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The label rule on each row: ``(hacking, peak, drop, threshold)``.

    ``gold`` and ``proxy``: shape ``(n, E + 1)``, the start then the ``E`` checkpoints (score and reward
    units); a proxy row with a NaN checkpoint means the run has none, a NaN start only that the proxy before
    training is unknown (module docstring). ``peak`` is gold's peak index (0: the start),
    ``drop`` gold's fall from it to the last checkpoint and ``threshold`` the fall the rule asks for.
    """
    gold = np.asarray(gold, dtype=float)
    proxy = np.asarray(proxy, dtype=float)
    rows = np.arange(gold.shape[0])
    top = np.argmax(gold, axis=1)
    peak = gold[rows, top]
    drop = peak - gold[:, -1]
    spread = NOISE_MULTIPLE * math.sqrt(2.0)
    span = gold.shape[1] - 1 - top                     # checkpoints from the peak to the last one
    noise = curve_noise(gold, top)
    wander = NOISE_MULTIPLE * np.sqrt(span) * curve_wander(gold, top, noise)
    threshold = np.maximum.reduce([np.full(top.shape, min_drop), drop_share * (peak - gold[:, 0]),
                                   spread * noise, wander])
    has_proxy = np.all(np.isfinite(proxy[:, 1:]), axis=1)
    known = np.where(has_proxy[:, None], proxy, np.nan)
    # an unknown start (NaN) stays out of the noise, and a gold peak at the start reads the first checkpoint
    anchor = np.where(np.isfinite(known[:, 0]), top, np.maximum(top, 1))
    rise = known[:, -1] - known[rows, anchor]
    proxy_rises = has_proxy & (rise > spread * curve_noise(known))
    hacking = (top < gold.shape[1] - 1) & (drop >= threshold) & proxy_rises
    return hacking, top, drop, threshold
