"""SRTF-Progress: shortest remaining time first on a remaining time estimated from progress. Preemptive.

Rule: before a job's first eval, rank it by the user's estimate minus attained
service (as SRTF-Est); after ``d`` of its ``T`` evals, estimate its length as
``a_d * T / d``, with ``a_d`` the attained hours when its last eval came out
(``JobView.eval_attained_h``), and rank it by that estimate minus attained
service (hours, floored at 0). Public signals only, the ones a learned agent
sees as features: where training speed jitters and evals and resumes take
time, the estimate is off by what the remaining segments differ from the past
ones (docs/calibration.md gives the error distribution). Ties keep running
jobs first (the base allocator's stable sort).

A waiting job's key is frozen (its attained service and evals do not change)
and a running job's only falls between evals, so, as for SRTF-Est, no wake-up
is needed. Source: SRPT/SRTF (Schrage 1968) with progress-based remaining-time
estimates, as used by progress-aware cluster schedulers.
"""

from evalstop_gym.policy import Scheduler


class SRTFProgress(Scheduler):
    name = "srtf-progress"
    preemptive = True
    static_key = True  # a waiting job's key is frozen

    def key(self, job, cluster):
        done = job.eval_attained_h
        if not done:
            return job.remaining_est_h
        return max(done[-1] * job.evals_total / len(done) - job.attained_h, 0.0)
