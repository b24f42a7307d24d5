"""Noise estimation for detectors whose tests are in units of a noise sigma.

A detector never reads the simulator's noise. :class:`PooledNoise` estimates a
series' noise sigma from what the detector has observed, pooled over the jobs
of the episode: the robust scale (median absolute value) of second differences
``s[i] - 2 s[i-1] + s[i-2]``. For independent noise a second difference has
standard deviation ``sqrt(6) sigma``, so ``sigma ~ median|d2| / (0.6745 sqrt(6))``.
Second differences cancel any linear trend, so a rising or falling run does
not inflate the estimate; the curves' remaining curvature biases it up a
little (on the paper world: 0.024 at sigma 0.02, 0.054 at 0.05, 0.108 at 0.10),
which only makes the tests a little more cautious. Whatever makes scores
wobble beyond sampling error (seed variance, training jitter, a judge's noise)
is in the estimate, at whatever size it has.

:class:`NoiseBySize` keeps one pool per eval-set size (``JobView.eval_items``,
public): jobs scored on the same number of items share a sampling error, and a
30-item eval is far noisier than a 14,042-item one. Until a size has pooled
``MIN_DIFFERENCES`` differences of its own, its jobs borrow from all sizes: the
same robust scale of scores measured in units of their size's largest sampling
error ``sqrt(0.25 / n)`` (a noise *factor*), times the job's own
``sqrt(0.25 / n)``. Jobs of unknown size (0, every job of the paper world)
share one pool. A user who knows the noise passes ``sigma`` to the detector
instead.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

from evalstop_gym.config import check_range
from evalstop_gym.policy import Stopper

_MAD_TO_SD = 0.6745  # median |z| of a standard normal
MIN_DIFFERENCES = 20  # pooled second differences needed before a detector trusts its estimate


class PooledNoise:
    """Running estimate of one noise sigma over the series observed in one episode."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self._abs_d2: list[float] = []    # kept sorted, so the median is a lookup
        self._seen: dict[int, int] = {}   # job id -> values already pooled

    def add(self, job_id: int, values: Sequence[float]) -> None:
        """Pool the second differences of job ``job_id``'s series ``values`` not seen before."""
        done = self._seen.get(job_id, 0)
        for i in range(max(done, 2), len(values)):
            bisect.insort(self._abs_d2, abs(values[i] - 2 * values[i - 1] + values[i - 2]))
        self._seen[job_id] = len(values)

    def observe(self, job) -> None:
        """Pool ``job``'s eval scores."""
        self.add(job.job_id, job.eval_scores)

    @property
    def sigma(self) -> float | None:
        """The estimate, or None until ``MIN_DIFFERENCES`` differences are pooled."""
        d, n = self._abs_d2, len(self._abs_d2)
        if n < MIN_DIFFERENCES:
            return None
        median = d[n // 2] if n % 2 else 0.5 * (d[n // 2 - 1] + d[n // 2])
        return median / (_MAD_TO_SD * math.sqrt(6))


class NoiseBySize:
    """One :class:`PooledNoise` of eval scores per eval-set size."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self._pools: dict[int, PooledNoise] = {}
        self._factor = PooledNoise()   # scores in units of their size's largest sampling error, all sizes

    def observe(self, job) -> None:
        n = job.eval_items
        self._pools.setdefault(n, PooledNoise()).observe(job)
        if n > 0:
            se = largest_sampling_error(n)
            self._factor.add(job.job_id, [s / se for s in job.eval_scores])

    def sigma(self, job) -> float | None:
        """The noise of ``job``'s scores: its size's pooled estimate, until that exists the pooled factor times
        its largest sampling error, None before either exists."""
        n = job.eval_items
        pool = self._pools.get(n)
        sigma = None if pool is None else pool.sigma
        if sigma is None and n > 0 and self._factor.sigma is not None:
            return self._factor.sigma * largest_sampling_error(n)
        return sigma


def largest_sampling_error(items: int) -> float:
    """``sqrt(0.25 / items)``: the sampling error of a score at 0.5 on ``items`` items, the largest at any score."""
    return math.sqrt(0.25 / items)


class NoiseAwareStopper(Stopper):
    """A stopper whose decline test is scaled by the eval-noise sigma.

    ``sigma`` (score units) is the noise if the user knows it; by default
    (None) it is estimated by :class:`NoiseBySize`, which is reset with the
    policy at each episode. Until the estimate exists the detector never stops.
    ``warmup`` / ``warmup_progress``: :class:`~evalstop_gym.policy.Stopper`.
    Subclasses implement :meth:`declined`.
    """

    def __init__(self, base, sigma: float | None = None, warmup: int = 0, warmup_progress: float = 0.0):
        super().__init__(base, warmup, warmup_progress)
        if sigma is not None:
            check_range("sigma", sigma, 0.0, 1.0, lo_open=True)
        self.sigma = sigma
        self.noise = NoiseBySize()

    def reset(self) -> None:
        super().reset()
        self.noise.reset()

    def job_sigma(self, job) -> float | None:
        """Pool ``job``'s scores, then return the noise its test uses (None: not known yet)."""
        self.noise.observe(job)
        return self.sigma if self.sigma is not None else self.noise.sigma(job)

    def observe(self, job) -> None:
        self.noise.observe(job)   # a job warming up still feeds the pooled estimate

    def rule(self, job, cluster):
        sigma = self.job_sigma(job)
        return sigma is not None and self.declined(job.eval_scores, sigma)

    def declined(self, scores: Sequence[float], sigma: float) -> bool:
        """True if ``scores`` (oldest first) show a decline beyond noise ``sigma``."""
        raise NotImplementedError
