"""LossAware: SLAQ-like, favour the jobs whose training loss is falling fastest. Preemptive.

Rule: a job's priority is its recent normalized loss reduction, the mean
relative drop of its training loss per eval over the last ``window`` evals,
``(loss[-1-w] - loss[-1]) / (w * loss[-1-w])`` with ``w = min(window, evals - 1)``.
At every scheduling point all active jobs are ranked by it (largest first),
the best-ranked set that fits keeps or gets the GPUs and the rest wait.
A job with fewer than two losses observed has no reduction yet and goes
first, in submit order: early in training is where the loss falls fastest,
which is SLAQ's reason to favour new jobs too.

Source: SLAQ (Zhang, Stafman, Or & Freedman, SoCC 2017), which allocates
resources to the jobs with the largest normalized loss reduction. Loss falls
for hacking runs as well as healthy ones, so this scheduler cannot see
reward hacking. It must be preemptive to differ from
FIFO: jobs that never ran have no loss history. Priorities change only at
eval checkpoints, which are not scheduling points, so a job keeps its GPUs
at least until the next arrival, completion or stop.

A loss that is not positive (an RL trainer's surrogate loss, e.g. TRL's GRPO / RLOO, sits near 0 and
changes sign) has no scale of its own: its drop is measured relative to ``|loss[-1-w]|``, and an
exactly zero earlier loss counts as no reduction.
"""

from evalstop_gym.config import check_range
from evalstop_gym.policy import Scheduler


class LossAware(Scheduler):
    name = "lossaware"
    preemptive = True
    static_key = True  # a waiting job's key is frozen

    def __init__(self, window: int = 3):
        check_range("window", window, 1, integer=True)
        self.window = window

    def key(self, job, cluster):
        losses = job.train_losses
        if len(losses) < 2:
            return (0, 0.0, job.submit_h)
        w = min(self.window, len(losses) - 1)
        before = losses[-1 - w]
        reduction = (before - losses[-1]) / (w * abs(before)) if before else 0.0
        return (1, -reduction, job.submit_h)
