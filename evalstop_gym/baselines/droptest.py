"""DropTest: stop when the eval score falls significantly below its best, in units of its estimated noise.

Rule: at an eval checkpoint with scores ``s_1..s_m`` (``m > window``), let
``level`` be the mean of the last ``window`` scores and ``drop = max(s_1..s_{m-window}) - level``.
Stop the job when ``drop > z * sigma * sqrt(1 + 1 / window)`` (a one-sided
test of the difference of a score and a mean of ``window`` scores) and
``drop >= min_drop`` (a decline too small to matter is not over-optimisation).

``sigma``, the noise of one score, is estimated from public data only
(:class:`~evalstop_gym.baselines.noise.NoiseBySize`): the robust scale of the
second differences of the scores of every job of the episode evaluated on the
same number of items (``JobView.eval_items``). It holds the eval's sampling
error together with whatever else moves the scores (seed variance, training
jitter), at whatever size the world gives them. Works on every job type.

Unlike EvalStop's count of declines, the test scales with each job's own
noise: a job evaluated on 14,042 items is stopped at its first clear drop, one
evaluated on 30 items only when the drop is far beyond its noise. Defaults
(``window``, ``z``, ``min_drop``) are the choice of ``docs/select_detectors.py``
on validation seeds of the selection world (``docs/detector_defaults.json``;
docs/detectors.md).
``warmup`` / ``warmup_progress``: no decision on the first ``warmup`` evals nor
below that fraction of the run (the scores still feed the noise estimate;
:class:`~evalstop_gym.policy.Stopper`).
"""

from __future__ import annotations

import math

from evalstop_gym.config import check_range

from .noise import NoiseAwareStopper


def drop_below_best(scores, window: int) -> tuple[float, float]:
    """``(drop, level)`` of ``scores`` (more than ``window`` of them): ``level`` the mean of the last ``window``,
    ``drop`` the best earlier score minus it."""
    level = sum(scores[-window:]) / window
    return max(scores[:-window]) - level, level


class DropTest(NoiseAwareStopper):
    rule_name = "droptest"

    def __init__(self, base, window: int = 1, z: float = 1.5, min_drop: float = 0.08, sigma: float | None = None,
                 warmup: int = 0, warmup_progress: float = 0.0):
        super().__init__(base, sigma, warmup, warmup_progress)
        check_range("window", window, 1, 20, integer=True)
        check_range("z", z, 0.0, 20.0)
        check_range("min_drop", min_drop, 0.0, 1.0)
        self.window, self.z, self.min_drop = window, z, min_drop

    def declined(self, scores, sigma):
        return self.dropped(scores, sigma, self.window, self.z, self.min_drop)

    @staticmethod
    def dropped(scores, sigma: float, window: int, z: float, min_drop: float) -> bool:
        """The drop test of the module docstring with the given parameters."""
        if len(scores) <= window:
            return False
        drop, _ = drop_below_best(scores, window)
        return drop >= min_drop and drop > z * sigma * math.sqrt(1.0 + 1.0 / window)
