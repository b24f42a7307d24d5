"""SmoothedDecline: a least-squares slope test over the last few eval scores.

Rule: fit a straight line by least squares to the job's last ``window``
observed scores (eval index as x); stop the job when the slope is negative by
more than ``threshold`` standard errors, ``slope < -threshold * sigma /
sqrt(sum (x - mean x)^2)``. A line through ``window`` points averages the
noise of all of them, where EvalStop looks at single steps; a healthy run,
which rises for all its length, keeps a positive slope. Sigma is estimated from
the observed scores of the episode's jobs with the same eval-set size
(:mod:`evalstop_gym.baselines.noise`) unless given. The test starts once
``window`` evals exist. Works on every job type.

Defaults ``window = 3`` evals and ``threshold = 1``, the choice of
``docs/select_detectors.py`` on validation seeds of the selection world
(``docs/detector_defaults.json``; docs/detectors.md): stop
when the best straight line through the last three scores (over three points
its slope is half the change from the first to the last) falls by more than
one standard error. With threshold 0 the rule would not depend on sigma's
size; a positive threshold asks for a decline beyond noise. A longer window
averages more noise at the price of delay, and relies on healthy runs still
rising over it; a run that has truly plateaued is stopped often at threshold
0 (each look is a coin flip on a flat run).
``warmup`` / ``warmup_progress``: no decision on the first ``warmup`` evals nor
below that fraction of the run (the scores still feed the noise estimate;
:class:`~evalstop_gym.policy.Stopper`).
Source: slope tests for trend change, e.g. Mann-Kendall/Sen; here the plain
least-squares t-test with a pooled noise estimate.
"""

from evalstop_gym.config import check_range

from .noise import NoiseAwareStopper


class SmoothedDecline(NoiseAwareStopper):
    rule_name = "smoothed"

    def __init__(self, base, window: int = 3, threshold: float = 1.0, sigma: float | None = None,
                 warmup: int = 0, warmup_progress: float = 0.0):
        super().__init__(base, sigma, warmup, warmup_progress)
        check_range("window", window, 3, 1000, integer=True)
        check_range("threshold", threshold, 0.0)
        self.window = window
        self.threshold = threshold
        centred = [i - (window - 1) / 2 for i in range(window)]
        self._x = centred
        self._sxx = sum(x * x for x in centred)

    def declined(self, scores, sigma):
        if len(scores) < self.window:
            return False
        recent = scores[-self.window:]
        slope = sum(x * y for x, y in zip(self._x, recent)) / self._sxx
        return slope < -self.threshold * sigma / self._sxx ** 0.5
