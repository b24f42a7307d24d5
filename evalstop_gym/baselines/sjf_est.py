"""SJF-Est: shortest job first on the user's length estimate. Non-preemptive.

Rule: whenever GPUs are free, start waiting jobs in increasing order of the
user's estimate ``est_length_h`` (hours; ties by submit time), skipping any
job that does not fit (first-fit). A running job is never preempted.
Source: the classic shortest-job-first rule (Smith 1956), used with users'
run-time estimates as in backfilling HPC schedulers (Mu'alem & Feitelson
2001) and as a baseline by Tiresias (Gu et al., NSDI 2019). The estimate is
noisy (``WorkloadConfig.estimate_error``); the true length is hidden.
"""

from evalstop_gym.policy import Scheduler


class SJFEst(Scheduler):
    name = "sjf-est"
    preemptive = False
    static_key = True  # a waiting job's key is frozen

    def key(self, job, cluster):
        return (job.est_length_h, job.submit_h)
