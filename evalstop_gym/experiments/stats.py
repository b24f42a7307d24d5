"""Statistics over seeds: mean and spread of a metric, and paired improvement tests.

Every arm of an experiment runs on the same seeds (the same workloads), so an
arm and its no-stopper baseline form pairs. An improvement is reported as the
mean per-seed relative reduction in percent with a 95% t-interval (a score such
as F1 as the mean per-seed difference, in its own unit), plus two
two-sided paired tests on the raw values: Student's paired t-test and the
Wilcoxon signed-rank test (which does not assume normal differences).
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass
from typing import Sequence

import numpy as np


def _scipy_stats():
    # imported on first use: scipy.stats takes most of a second to load, and the CLI
    # should report bad input before paying for it
    from scipy import stats

    return stats


@dataclass(frozen=True)
class Summary:
    """Mean, sample standard deviation and 95% CI of the mean over ``n`` seeds.

    Seeds where the metric is undefined (``None``, e.g. precision with no stops)
    are left out; ``n`` counts the seeds that remain. Fields are ``None`` when
    they cannot be computed (``n == 0``; ``std`` and the CI need ``n >= 2``).
    """

    n: int
    mean: float | None
    std: float | None
    ci_lo: float | None
    ci_hi: float | None


@functools.lru_cache(maxsize=None)
def _t_975(df: int) -> float:
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom. Kept per ``df``: one SciPy call
    costs about 45 us of CPU (``process_time`` over 3,000 calls), and the tables of ``reproduce`` ask for it
    thousands of times, always for the same few ``df`` (seeds - 1)."""
    return float(_scipy_stats().t.ppf(0.975, df))


def _t_interval(x: np.ndarray) -> tuple[float | None, float | None, float | None]:
    """Sample std and the 95% t-interval of the mean of ``x``."""
    if x.size < 2:
        return None, None, None
    std = float(np.std(x, ddof=1))
    half = _t_975(x.size - 1) * std / math.sqrt(x.size)
    mean = float(np.mean(x))
    return std, mean - half, mean + half


def summarize(values: Sequence[float | None]) -> Summary:
    """Summary of one metric over seeds (``None`` entries are dropped)."""
    x = np.array([v for v in values if v is not None], dtype=float)
    if x.size == 0:
        return Summary(0, None, None, None, None)
    std, lo, hi = _t_interval(x)
    return Summary(int(x.size), float(np.mean(x)), std, lo, hi)


@dataclass(frozen=True)
class PairedGain:
    """Improvement of a treated arm over its baseline on the same seeds.

    ``gain_pct``: mean over seeds of ``100 * (baseline - treated) / baseline``
    (positive when the treated arm is lower, i.e. better for JCT and waste),
    with its 95% CI. ``p_t`` and ``p_wilcoxon``: two-sided p-values of the
    paired t-test and the Wilcoxon signed-rank test on the raw per-seed values;
    ``None`` when undefined (fewer than 2 pairs, or all differences equal).
    """

    n: int
    gain_pct: float | None
    ci_lo: float | None
    ci_hi: float | None
    p_t: float | None
    p_wilcoxon: float | None


def paired_gain(baseline: Sequence[float], treated: Sequence[float]) -> PairedGain:
    """Paired relative reduction of ``treated`` against ``baseline`` (same seeds, same order)."""
    b, t = _pairs(baseline, treated)
    if b.size == 0:
        return PairedGain(0, None, None, None, None, None)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(b != 0, 100.0 * (b - t) / b, 0.0)
    _, lo, hi = _t_interval(rel)
    p_t, p_w = _paired_p(b - t)
    return PairedGain(int(b.size), float(np.mean(rel)), lo, hi, p_t, p_w)


@dataclass(frozen=True)
class PairedDifference:
    """Mean per-seed difference ``treated - baseline`` (same seeds), in the metric's own unit.

    ``diff``: the mean difference with its 95% t-interval ``ci_lo .. ci_hi``;
    ``p_t`` and ``p_wilcoxon`` as in :class:`PairedGain` (``None`` when undefined).
    """

    n: int
    diff: float | None
    ci_lo: float | None
    ci_hi: float | None
    p_t: float | None
    p_wilcoxon: float | None


def paired_difference(baseline: Sequence[float], treated: Sequence[float]) -> PairedDifference:
    """Paired absolute difference ``treated - baseline`` (for scores such as F1, where higher is better)."""
    b, t = _pairs(baseline, treated)
    if b.size == 0:
        return PairedDifference(0, None, None, None, None, None)
    d = t - b
    _, lo, hi = _t_interval(d)
    p_t, p_w = _paired_p(d)
    return PairedDifference(int(b.size), float(np.mean(d)), lo, hi, p_t, p_w)


def paired_relative_change(baseline: Sequence[float], treated: Sequence[float]) -> PairedDifference:
    """Mean per-seed % change ``100 * (treated - baseline) / baseline`` (0 where the baseline is 0), with its
    95% t-interval and the tests on those same per-seed changes, so the interval and the p-values always
    agree (unlike :func:`paired_gain`, whose tests are on the raw differences: over workloads of very
    different sizes those weigh the large ones most, and can call a change whose interval excludes 0 a tie)."""
    b, t = _pairs(baseline, treated)
    if b.size == 0:
        return PairedDifference(0, None, None, None, None, None)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(b != 0, 100.0 * (t - b) / b, 0.0)
    _, lo, hi = _t_interval(rel)
    p_t, p_w = _paired_p(rel)
    return PairedDifference(int(b.size), float(np.mean(rel)), lo, hi, p_t, p_w)


def _pairs(baseline: Sequence[float], treated: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    b = np.asarray(baseline, dtype=float)
    t = np.asarray(treated, dtype=float)
    if b.shape != t.shape:
        raise ValueError(f"paired samples differ in length: {b.size} and {t.size}")
    return b, t


def _paired_p(diff: np.ndarray) -> tuple[float | None, float | None]:
    """Two-sided p-values of the paired t-test and the Wilcoxon signed-rank test on differences ``diff``."""
    p_t = p_w = None
    if diff.size >= 2 and np.ptp(diff) > 0:   # the t statistic is undefined for constant differences
        p_t = float(_scipy_stats().ttest_1samp(diff, 0.0).pvalue)
    if diff.size >= 2 and np.any(diff != 0):
        with warnings.catch_warnings():     # scipy warns on ties / tiny samples; the p-value is still valid
            warnings.simplefilter("ignore")
            p_w = float(_scipy_stats().wilcoxon(diff).pvalue)
    return p_t, p_w
