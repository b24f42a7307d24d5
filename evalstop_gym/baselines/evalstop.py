"""EvalStop(k): stop a job after k consecutive declines of its observed eval score.

The stop frees the job's GPUs at once and the tenant gets the best observed
checkpoint (the one before the declines). Wraps any base scheduler.
Source: Zhang, Sun, Sarkani, Fossaceca (2026), arXiv:2606.04145.
"""

from evalstop_gym.config import check_range
from evalstop_gym.policy import Stopper


class EvalStop(Stopper):
    rule_name = "evalstop"

    def __init__(self, base, k: int = 2):
        super().__init__(base)
        check_range("k", k, 1, integer=True)
        self.k = k

    def rule(self, job, cluster):
        return job.consecutive_declines >= self.k
