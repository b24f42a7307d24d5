"""Divergence: stop when the eval score drops while the proxy reward still rises (RLHF), else DropTest.

Over-optimisation is the proxy reward and the true score parting ways: the
proxy is about linear in ``d = sqrt(KL)`` and keeps rising while the true
score passes its peak and falls (Gao, Schulman, Hilton 2023, arXiv:2210.10760).
So for a job with a public proxy reward (RLHF) the rule stops at a *weaker*
eval-drop test (:class:`~evalstop_gym.baselines.droptest.DropTest` with window 1,
``fast_z`` and ``fast_min_drop``) while the proxy still rises: its rise over the
last ``lag`` evals exceeds ``proxy_z`` times the noise of such a rise,
``sqrt(2) * proxy_sigma``. ``proxy_sigma`` is estimated like the eval noise, from
the second differences of the proxy readings of every RLHF job of the episode
(:class:`~evalstop_gym.baselines.noise.PooledNoise`), so the test does not depend
on the reward model's scale. Otherwise, and for a job without a proxy (LoRA,
DPO), the plain DropTest decides.

A healthy run whose KL keeps growing while its score sits on a plateau also
has a rising proxy; there the weaker test costs precision (E10, "healthy KL
grows"). Defaults are the choice of ``docs/select_detectors.py`` on validation
seeds of the selection world (recorded in ``docs/detector_defaults.json``;
docs/detectors.md): while the proxy rose over the last two evals by more than
``sqrt(2)`` times its noise (``proxy_z = 1``, ``lag = 2``), a last score 0.04
and ``1.5 * sqrt(2)`` sigmas below the best earlier one stops the job; otherwise
the mean of the last two scores must fall 0.04 and ``1.5 * sqrt(1.5)`` sigmas
below the best before them (``window = 2``, ``z = 1.5``, ``min_drop = 0.04``).
``warmup`` / ``warmup_progress``: no decision on the first ``warmup`` evals nor
below that fraction of the run (the scores still feed the noise estimates;
:class:`~evalstop_gym.policy.Stopper`).
"""

from __future__ import annotations

import math

from evalstop_gym.config import check_range

from .droptest import DropTest
from .noise import PooledNoise


class Divergence(DropTest):
    rule_name = "divergence"

    def __init__(self, base, window: int = 2, z: float = 1.5, min_drop: float = 0.04, fast_z: float = 1.5,
                 fast_min_drop: float = 0.04, proxy_z: float = 1.0, lag: int = 2, sigma: float | None = None,
                 warmup: int = 0, warmup_progress: float = 0.0):
        super().__init__(base, window, z, min_drop, sigma, warmup, warmup_progress)
        check_range("fast_z", fast_z, 0.0, 20.0)
        check_range("fast_min_drop", fast_min_drop, 0.0, 1.0)
        check_range("proxy_z", proxy_z, 0.0, 20.0)
        check_range("lag", lag, 1, 20, integer=True)
        self.fast_z, self.fast_min_drop, self.proxy_z, self.lag = fast_z, fast_min_drop, proxy_z, lag
        self.proxy_noise = PooledNoise()

    def reset(self) -> None:
        super().reset()
        self.proxy_noise.reset()

    def observe(self, job) -> None:
        super().observe(job)
        self.proxy_noise.add(job.job_id, job.proxy_rewards)

    def proxy_rising(self, job) -> bool:
        """Pool ``job``'s proxy readings; True if they rose significantly over the last ``lag`` evals."""
        proxy = job.proxy_rewards
        self.proxy_noise.add(job.job_id, proxy)
        sd = self.proxy_noise.sigma
        return sd is not None and len(proxy) > self.lag and \
            proxy[-1] - proxy[-1 - self.lag] > self.proxy_z * sd * math.sqrt(2.0)

    def rule(self, job, cluster):
        sigma = self.job_sigma(job)
        if sigma is None:
            return False
        if self.proxy_rising(job):
            return self.dropped(job.eval_scores, sigma, 1, self.fast_z, self.fast_min_drop)
        return self.declined(job.eval_scores, sigma)
