"""FIFO: start jobs in order of submission (first-fit: a job that does not fit
in the free GPUs is skipped, so smaller jobs behind it may start). Non-preemptive."""

from evalstop_gym.policy import Scheduler


class FIFO(Scheduler):
    name = "fifo"
    static_key = True  # a waiting job's key is frozen

    def key(self, job, cluster):
        return job.submit_h
