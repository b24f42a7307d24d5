"""DropTest: stop when the eval score falls significantly below its best, with the noise taken from the eval's size.

Rule: at an eval checkpoint with scores ``s_1..s_m`` (``m > window``), let
``level`` be the mean of the last ``window`` scores and ``drop = max(s_1..s_{m-window}) - level``.
A score ``p`` measured on ``n`` items (``JobView.eval_items``) has sampling
error ``sqrt(p (1 - p) / n)``; the rule takes each score's noise as
``sigma = sqrt(factor**2 p (1 - p) / n + jitter**2)`` with ``p`` the level:
``factor`` allows for seed variance beyond sampling error (Madaan et al. 2024
find seed spread of the order of one to two sampling errors, arXiv:2406.10229)
and ``jitter`` for checkpoint-to-checkpoint training noise. It stops the job
when ``drop > z * sigma * sqrt(1 + 1 / window)`` (a one-sided test of the
difference of a score and a mean of ``window`` scores) and ``drop >= min_drop``
(a decline too small to matter is not over-optimisation). Where the eval-set
size is unknown (0), ``sigma`` is the pooled estimate of :mod:`evalstop_gym.baselines.noise`.
Works on every job type.

Unlike EvalStop's count of declines, the test scales with each job's own
noise: a job evaluated on 14,042 items is stopped at its first clear drop, one
evaluated on 30 items only when the drop is far beyond its sampling error.
Defaults (``window 1, z 2.0, min_drop 0.03, factor 1.5, jitter 0.01``) were
chosen on seeds 100-109 of the realistic world (``rlhf-heavy``, SRTF-Est base)
as the best F1 with a waste cut at least EvalStop k=2's; results are reported
on seeds 0-9 (docs/calibration.md).
"""

from __future__ import annotations

import math

from evalstop_gym.config import check_range
from evalstop_gym.policy import Stopper

from .noise import PooledNoise


FACTOR, JITTER = 1.5, 0.01   # the noise model's defaults (module docstring)


def drop_below_best(scores, window: int) -> tuple[float, float]:
    """``(drop, level)`` of ``scores`` (more than ``window`` of them): ``level`` the mean of the last ``window``,
    ``drop`` the best earlier score minus it."""
    level = sum(scores[-window:]) / window
    return max(scores[:-window]) - level, level


def eval_sigma(level: float, items: int, factor: float = FACTOR, jitter: float = JITTER) -> float:
    """The noise of a score at ``level`` measured on ``items`` items: ``sqrt(factor**2 p (1 - p) / items +
    jitter**2)`` with ``p`` the level clipped to [0, 1]."""
    p = min(max(level, 0.0), 1.0)
    return math.sqrt(factor ** 2 * p * (1.0 - p) / items + jitter ** 2)


class DropTest(Stopper):
    rule_name = "droptest"

    def __init__(self, base, window: int = 1, z: float = 2.0, min_drop: float = 0.03, factor: float = FACTOR,
                 jitter: float = JITTER):
        super().__init__(base)
        check_range("window", window, 1, 20, integer=True)
        check_range("z", z, 0.0, 20.0)
        check_range("min_drop", min_drop, 0.0, 1.0)
        check_range("factor", factor, 0.0, 10.0)
        check_range("jitter", jitter, 0.0, 1.0)
        self.window, self.z, self.min_drop, self.factor, self.jitter = window, z, min_drop, factor, jitter
        self.noise = PooledNoise()

    def reset(self) -> None:
        super().reset()
        self.noise.reset()

    def rule(self, job, cluster):
        if job.eval_items == 0:
            self.noise.observe(job)
        return self.dropped(job, self.window, self.z, self.min_drop)

    def dropped(self, job, window: int, z: float, min_drop: float) -> bool:
        """The drop test of the module docstring with the given parameters."""
        s = job.eval_scores
        if len(s) <= window:
            return False
        drop, level = drop_below_best(s, window)
        if drop < min_drop:
            return False
        if job.eval_items > 0:
            sigma = eval_sigma(level, job.eval_items, self.factor, self.jitter)
        else:
            sigma = self.noise.sigma
            if sigma is None:
                return False
        return drop > z * sigma * math.sqrt(1.0 + 1.0 / window)
