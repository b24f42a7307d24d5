"""LossPlateau(window, tolerance): stop a job whose training loss has stopped improving.

Rule: at an eval checkpoint with at least ``window + 1`` losses observed,
stop the job when the relative improvement of its training loss over the
last ``window`` evals, ``(loss[-1-window] - loss[-1]) / loss[-1-window]``,
is below ``tolerance``. Applies to every job type. The improvement is
relative to ``|loss[-1-window]|`` (losses of RL objectives can be negative);
from a loss of exactly 0 there is no relative gain, so a loss that stays at
or above 0 has plateaued and one that goes below 0 has not.

Defaults ``window = 3`` evals and ``tolerance = 0.01`` (1%) are the usual
shape of a loss-plateau rule (as in Keras ``ReduceLROnPlateau``/
``EarlyStopping`` on the loss), chosen before measuring, not tuned. Training
loss keeps falling while a run hacks its proxy reward,
so this rule misses hacking runs by design: the paper's loss-plateau
baseline, which "misses more than half of hacking runs" (Zhang et al. 2026).
``warmup`` / ``warmup_progress``: no decision on the first ``warmup`` evals nor
below that fraction of the run (:class:`~evalstop_gym.policy.Stopper`).
"""

from evalstop_gym.config import check_range
from evalstop_gym.policy import Stopper


class LossPlateau(Stopper):
    rule_name = "lossplateau"

    def __init__(self, base, window: int = 3, tolerance: float = 0.01, warmup: int = 0, warmup_progress: float = 0.0):
        super().__init__(base, warmup, warmup_progress)
        check_range("window", window, 1, integer=True)
        check_range("tolerance", tolerance, 0.0, 1.0)
        self.window = window
        self.tolerance = tolerance

    def rule(self, job, cluster):
        losses = job.train_losses
        if len(losses) <= self.window:
            return False
        before, last = losses[-1 - self.window], losses[-1]
        if before == 0:
            return last >= 0
        return (before - last) / abs(before) < self.tolerance
