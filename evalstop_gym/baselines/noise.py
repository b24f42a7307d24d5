"""Eval-noise estimation for detectors whose tests are in units of the noise sigma.

A detector never reads the simulator's sigma. :class:`PooledNoise` estimates it
from the eval scores the detector has observed, pooled over every job of the
episode: the robust scale (median absolute value) of second differences
``s[i] - 2 s[i-1] + s[i-2]``. For independent noise a second difference has
standard deviation ``sqrt(6) sigma``, so ``sigma ~ median|d2| / (0.6745 sqrt(6))``.
Second differences cancel any linear trend, so a rising or falling run does
not inflate the estimate; the curves' remaining curvature biases it up by
about 0.005 (checked on the default workload: 0.024 at sigma 0.02, 0.054 at
0.05, 0.108 at 0.10), which only makes the tests a little more cautious.
Pooling assumes one noise level for all jobs of an episode (true of the
simulator); a user who knows better passes ``sigma`` to the detector.
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
    """Running estimate of the eval-noise sigma over the jobs observed in one episode."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self._abs_d2: list[float] = []    # kept sorted, so the median is a lookup
        self._seen: dict[int, int] = {}   # job id -> scores already pooled

    def observe(self, job) -> None:
        """Pool the second differences of ``job``'s scores not seen before."""
        s = job.eval_scores
        done = self._seen.get(job.job_id, 0)
        for i in range(max(done, 2), len(s)):
            bisect.insort(self._abs_d2, abs(s[i] - 2 * s[i - 1] + s[i - 2]))
        self._seen[job.job_id] = len(s)

    @property
    def sigma(self) -> float | None:
        """The estimate, or None until ``MIN_DIFFERENCES`` differences are pooled."""
        d, n = self._abs_d2, len(self._abs_d2)
        if n < MIN_DIFFERENCES:
            return None
        median = d[n // 2] if n % 2 else 0.5 * (d[n // 2 - 1] + d[n // 2])
        return median / (_MAD_TO_SD * math.sqrt(6))


class NoiseAwareStopper(Stopper):
    """A stopper whose decline test is scaled by the eval-noise sigma.

    ``sigma`` (score units) is the noise if the user knows it; by default
    (None) it is estimated by :class:`PooledNoise`, which is reset with the
    policy at each episode. Until the estimate exists the detector never stops.
    Subclasses implement :meth:`declined`.
    """

    def __init__(self, base, sigma: float | None = None):
        super().__init__(base)
        if sigma is not None:
            check_range("sigma", sigma, 0.0, 1.0, lo_open=True)
        self.sigma = sigma
        self.noise = PooledNoise()

    def reset(self) -> None:
        super().reset()
        self.noise.reset()

    def rule(self, job, cluster):
        self.noise.observe(job)
        sigma = self.sigma if self.sigma is not None else self.noise.sigma
        return sigma is not None and self.declined(job.eval_scores, sigma)

    def declined(self, scores: Sequence[float], sigma: float) -> bool:
        """True if ``scores`` (oldest first) show a decline beyond noise ``sigma``."""
        raise NotImplementedError
