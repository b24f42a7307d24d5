"""Divergence: stop when the eval score drops while the proxy reward still rises (RLHF), else DropTest.

Over-optimisation is the proxy reward and the true score parting ways: the
proxy is about linear in ``d = sqrt(KL)`` and keeps rising while the true
score passes its peak and falls (Gao, Schulman, Hilton 2023, arXiv:2210.10760).
A healthy run whose eval score wobbles on a plateau has a flat proxy. So for
a job with a public proxy reward (RLHF) the rule stops at a *weaker* eval-drop
test (:class:`~evalstop_gym.baselines.droptest.DropTest` with ``fast_z`` and ``fast_min_drop``)
provided the proxy rose by more than ``proxy_rise`` over the last ``lag``
evals; a job without a proxy (LoRA, DPO) gets the plain DropTest.

Defaults (``fast_z 1.5, fast_min_drop 0.02, proxy_rise 0.05, lag 2`` plus
DropTest's ``window 2, z 2.5, min_drop 0.08``) were chosen on seeds 100-109 of
the realistic world (``rlhf-heavy``, SRTF-Est base) as the best F1 with a waste
cut at least EvalStop k=2's; results are reported on seeds 0-9
(docs/calibration.md). How much this rule gains rests on the proxy carrying
the run's KL growth, a modelling choice of the realistic world documented there.
"""

from __future__ import annotations

from evalstop_gym.config import check_range

from .droptest import DropTest


class Divergence(DropTest):
    rule_name = "divergence"

    def __init__(self, base, window: int = 2, z: float = 2.5, min_drop: float = 0.08, factor: float = 1.5,
                 jitter: float = 0.01, fast_z: float = 1.5, fast_min_drop: float = 0.02,
                 proxy_rise: float = 0.05, lag: int = 2):
        super().__init__(base, window, z, min_drop, factor, jitter)
        check_range("fast_z", fast_z, 0.0, 20.0)
        check_range("fast_min_drop", fast_min_drop, 0.0, 1.0)
        check_range("proxy_rise", proxy_rise, 0.0)
        check_range("lag", lag, 1, 20, integer=True)
        self.fast_z, self.fast_min_drop, self.proxy_rise, self.lag = fast_z, fast_min_drop, proxy_rise, lag

    def rule(self, job, cluster):
        proxy = job.proxy_rewards
        if len(proxy) > self.lag and proxy[-1] - proxy[-1 - self.lag] > self.proxy_rise:
            return self.dropped(job, 1, self.fast_z, self.fast_min_drop)
        return super().rule(job, cluster)
