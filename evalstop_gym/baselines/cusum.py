"""CUSUM: one-sided cumulative-sum test for a downward shift of the eval deltas.

Rule: with ``d_i = s_i - s_{i-1}`` the job's successive observed score changes
and ``sd = sqrt(2) * sigma`` their noise, Page's one-sided CUSUM
``S_i = max(0, S_{i-1} - d_i / sd - drift)``, ``S_0 = 0``, stops the job when
``S_i > threshold``. ``drift`` (the reference value) and ``threshold`` are in
units of ``sd``: a decline counts only beyond ``drift`` per eval, and the stop
needs accumulated evidence ``threshold``; rises drain the sum. Sigma is
estimated from the observed scores of the episode's jobs with the same
eval-set size (:mod:`evalstop_gym.baselines.noise`) unless given.
Works on every job type.

Defaults ``drift = 0`` and ``threshold = 1.5``, the choice of
``docs/select_detectors.py`` on validation seeds of the selection world
(``docs/detector_defaults.json``; docs/detectors.md): with
about ten evals per job the test sees a handful of deltas, too few for the
textbook ``drift = 0.5, threshold = 4-5`` (made for long streams) to fire
before a run ends. With ``drift = 0`` the sum since its last reset is the drop
from the highest recent score, so the rule reads "the score fell more than
``1.5 * sqrt(2)`` noise sigmas below a recent high".
``warmup`` / ``warmup_progress``: no decision on the first ``warmup`` evals nor
below that fraction of the run (the scores still feed the noise estimate;
:class:`~evalstop_gym.policy.Stopper`).
Source: Page, "Continuous Inspection Schemes", Biometrika 1954.
"""

import math

from evalstop_gym.config import check_range

from .noise import NoiseAwareStopper


class CUSUM(NoiseAwareStopper):
    rule_name = "cusum"

    def __init__(self, base, threshold: float = 1.5, drift: float = 0.0, sigma: float | None = None,
                 warmup: int = 0, warmup_progress: float = 0.0):
        super().__init__(base, sigma, warmup, warmup_progress)
        check_range("threshold", threshold, 0.0)
        check_range("drift", drift, 0.0)
        self.threshold = threshold
        self.drift = drift

    def declined(self, scores, sigma):
        # in score units, so a zero sigma (noise-free scores) means "any decline"
        sd = math.sqrt(2.0) * sigma
        s = 0.0
        for prev, cur in zip(scores, scores[1:]):
            s = max(0.0, s - (cur - prev) - self.drift * sd)
        return s > self.threshold * sd
