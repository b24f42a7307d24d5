"""EvalStop(k): stop a job after k consecutive declines of its observed eval score.

The stop frees the job's GPUs at once and the tenant gets the best observed
checkpoint (the one before the declines). Wraps any base scheduler.
``min_delta`` (score units, default 0): a fall of at most ``min_delta`` from
the previous score is not a decline (Keras' and Lightning's ``min_delta``), so
eval noise below it never counts. ``warmup`` / ``warmup_progress``: no
decision on the first ``warmup`` evals nor below that fraction of the run
(:class:`~evalstop_gym.policy.Stopper`).
Source: Zhang, Sun, Sarkani, Fossaceca (2026), arXiv:2606.04145.
"""

from evalstop_gym.config import check_range
from evalstop_gym.policy import Stopper


def trailing_declines(scores, min_delta: float) -> int:
    """How many of the last scores each fell more than ``min_delta`` below the one before it."""
    n = 0
    for i in range(len(scores) - 1, 0, -1):
        if scores[i] >= scores[i - 1] - min_delta:
            break
        n += 1
    return n


class EvalStop(Stopper):
    rule_name = "evalstop"

    def __init__(self, base, k: int = 2, min_delta: float = 0.0, warmup: int = 0, warmup_progress: float = 0.0):
        super().__init__(base, warmup, warmup_progress)
        check_range("k", k, 1, integer=True)
        check_range("min_delta", min_delta, 0.0, 1.0)
        self.k, self.min_delta = k, min_delta

    def min_evals(self) -> int:
        return max(self.k + 1, self.warmup + 1)

    def rule(self, job, cluster):
        if not self.min_delta:   # the simulator's count: a decline is any fall
            return job.consecutive_declines >= self.k
        return trailing_declines(job.eval_scores, self.min_delta) >= self.k
