"""SRTF-Est: shortest remaining time first on the user's estimate. Preemptive.

Rule: at every scheduling point, rank all active jobs by their remaining
estimated time (the estimate minus attained service, floored at 0; compared
in integer ticks so that equal remaining times tie exactly), keep the
best-ranked set that fits on the cluster, preempt running jobs outside it and
start waiting jobs inside it. Source: SRPT/SRTF (Schrage 1968); the paper's
headline base scheduler, "SRTF with estimated run times" (Zhang et al. 2026).

No thrash: the key is the bare estimate, so ties (for example two jobs that
overran their estimates, both at 0) keep running jobs first, as
:class:`~evalstop_gym.policy.Scheduler` sorts running jobs before waiting
ones and its sort is stable. A running job's remaining time only falls and a
waiting job's is frozen, so a waiting job can only overtake a running one at
an arrival, completion or stop, which are scheduling points already: no
wake-up is needed.

While a job runs, its estimate minus attained service plus the clock stays
the same (both grow by the time it runs), so that sum, fixed at its start, is
its ``running_key`` and running jobs need no re-ranking between scheduling
points; in integer ticks, ``key_at`` gives back exactly its key.
"""

from evalstop_gym.policy import Scheduler


class SRTFEst(Scheduler):
    name = "srtf-est"
    preemptive = True
    static_key = True  # a waiting job's key is frozen
    run_invariant_key = True

    def key(self, job, cluster):
        return job.remaining_est_ticks  # integers: equal remaining times tie exactly

    def running_key(self, job, cluster):
        return job.est_length_ticks - job.attained_ticks + cluster.now_ticks

    def key_at(self, running_key, cluster):
        return max(running_key - cluster.now_ticks, 0)  # = remaining_est_ticks, exactly

    def running_bound(self, key, cluster):
        return key + cluster.now_ticks  # key >= 0: max(k - now, 0) <= key exactly when k <= key + now
