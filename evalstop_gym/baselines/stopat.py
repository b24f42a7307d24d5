"""StopAtProgress(p): stop every RLHF job once it reaches a fixed fraction of its training.

Rule: at an eval checkpoint, stop an RLHF job when ``job.progress >= p``
(progress = evals reached / evals scheduled). Other job types are never
stopped. It ignores the scores entirely, so it stops healthy RLHF runs as
readily as hacking ones: the paper's "fixed-progress stop" baseline
(StopAt-0.65, about 65% false-positive rate), Zhang et al. (2026),
arXiv:2606.04145. ``p = 1`` never fires: the last checkpoint is the completion.
"""

from evalstop_gym.config import check_range
from evalstop_gym.policy import Stopper


class StopAtProgress(Stopper):
    rule_name = "stopat"

    def __init__(self, base, p: float = 0.65):
        super().__init__(base)
        check_range("p", p, 0.0, 1.0, lo_open=True)
        self.p = p

    def rule(self, job, cluster):
        return job.job_type == "rlhf" and job.progress >= self.p
