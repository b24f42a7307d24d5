"""MaxThroughput: FIFO order, each job placed on the GPU type it is relatively best at. Non-preemptive.

Rule: jobs start in order of submission (first-fit, like FIFO). When a job
starts, the placement policy looks first at nodes of the GPU type where the
job's throughput, relative to the average throughput of all job types on that
GPU type, is highest (its comparative advantage), then at the next type, and
so on; among nodes of one type the cluster's placement policy decides. On a
cluster of one GPU type this is FIFO.

Why comparative advantage: with two types, sending every job to the faster one
first fills it with whatever arrived first. Sending the jobs that lose least on
the older type there (LoRA in the default matrix: 0.80 of the newer type's speed
against 0.55 for RLHF) keeps the newer GPUs for the jobs that gain most from
them, which raises the cluster's total throughput.
Source: Gavel (Narayanan, Santhanam, Kazhamiaka, Phanishayee & Zaharia,
"Heterogeneity-Aware Cluster Scheduling Policies for Deep Learning Workloads",
OSDI 2020), whose max-throughput policy solves for this with a linear program
over the throughput matrix; this is a greedy heuristic in its spirit, not its LP.
"""

from evalstop_gym.config import JOB_TYPES
from evalstop_gym.policy import Scheduler


class MaxThroughput(Scheduler):
    name = "max-throughput"
    static_key = True  # a waiting job's key is frozen

    def reset(self) -> None:
        super().reset()
        self._ranks: dict = {}  # (cluster spec, job type) -> {GPU type: rank}

    def key(self, job, cluster):
        return job.submit_ticks

    def type_preference(self, job, cluster):
        spec = cluster.spec
        if len(spec.gpu_types) < 2:
            return None
        ranks = getattr(self, "_ranks", None)
        if ranks is None:
            ranks = self._ranks = {}
        k = (spec, job.job_type)
        if k not in ranks:
            def advantage(gpu_type):
                mean = sum(spec.speed(gpu_type, t) for t in JOB_TYPES) / len(JOB_TYPES)
                return spec.speed(gpu_type, job.job_type) / mean
            order = sorted(spec.gpu_types, key=lambda u: (-advantage(u), spec.gpu_types.index(u)))
            ranks[k] = {u: i for i, u in enumerate(order)}
        return ranks[k]
