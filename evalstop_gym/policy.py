"""Policy interfaces and the driver loop that runs a policy on the simulator.

A :class:`Policy` answers two questions, both from public views only:

* ``schedule(cluster) -> Plan``: which jobs to preempt and which to start;
* ``should_stop(job, cluster) -> bool``: at an eval checkpoint, stop this job?

A base :class:`Scheduler` only orders jobs (``key``); the greedy allocation
lives here, once. A :class:`Stopper` wraps any policy, delegating scheduling to
it and adding a stop rule, so stoppers compose over every base scheduler.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple, Sequence

from .simulator import DONE, EVAL, Outcome, Simulator
from .view import ClusterView, JobView
from .waiting_queue import WaitingQueue


class Plan(NamedTuple):
    """Scheduling decision: preemptions are applied before starts.

    ``placed`` (on nodes): job id -> ``((node, gpus), ...)`` for started jobs;
    a started job without an entry is placed by the cluster's placement policy.
    """

    preempt: Sequence[int] = ()
    start: Sequence[int] = ()
    wakeup_h: float | None = None   # ask to be called again at this time (hours)
    placed: Mapping[int, tuple] | None = None


NO_CHANGE = Plan()


class Policy:
    """Base of every hand-coded policy. Subclasses override one or both methods."""

    name = "policy"

    def reset(self) -> None:
        """Forget per-episode state (called before each episode)."""

    def schedule(self, cluster: ClusterView) -> Plan:
        return NO_CHANGE

    def should_stop(self, job: JobView, cluster: ClusterView) -> bool:
        return False


class Scheduler(Policy):
    """A base scheduler: orders jobs by ``key`` (lowest first) and allocates greedily.

    Non-preemptive schedulers start waiting jobs in key order, skipping any job
    that does not fit in the free GPUs (first-fit). Preemptive ones rank every
    active job, keep the best set that fits, preempt running jobs outside it
    and start waiting jobs inside it. Ties keep running jobs first, then
    waiting jobs in the order they started waiting.

    "Fits" is the cluster's: on the flat pool, enough free GPUs; on nodes,
    a placement under the cluster's placement policy (``ClusterView.pool``,
    :mod:`evalstop_gym.placement`), where a running job is kept only on its
    own nodes. A scheduler may rank GPU types per job (:meth:`type_preference`).
    """

    preemptive = False
    _ranks_types = False
    # True if a job's key never changes while it waits: the queue is then kept
    # sorted across scheduling points (``WaitingQueue``) instead of re-sorted.
    static_key = False

    def key(self, job: JobView, cluster: ClusterView):
        raise NotImplementedError

    def reset(self) -> None:
        self._queue = WaitingQueue(self.key) if self.static_key else None

    def type_preference(self, job: JobView, cluster: ClusterView) -> dict[str, int] | None:
        """GPU type -> rank (lower preferred) for placing ``job``; None: no preference."""
        return None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # only a scheduler that ranks GPU types is asked for its ranking (one attribute read per plan)
        cls._ranks_types = cls.type_preference is not Scheduler.type_preference

    def wakeup(self, cluster: ClusterView, plan: Plan) -> float | None:
        """Time (hours) at which priorities change by themselves, if any.

        Asked once the plan is made; ``plan`` says which jobs it is about to
        preempt and start (``cluster`` still shows the state before it).
        """
        return None

    def schedule(self, cluster: ClusterView) -> Plan:
        plan = self.allocate(cluster)
        wakeup_h = self.wakeup(cluster, plan)
        return plan if wakeup_h is None else plan._replace(wakeup_h=wakeup_h)

    def allocate(self, cluster: ClusterView) -> Plan:
        """The greedy allocation in ``key`` order (see the class docstring)."""
        if self.static_key:
            return self._allocate_from_queue(cluster)
        key = self.key
        if not self.preemptive:
            if cluster.free_gpus == 0 or not cluster.waiting:
                return NO_CHANGE
            pool = cluster.pool(self.type_preference if self._ranks_types else None)
            start = []
            for v in sorted(cluster.waiting.values(), key=lambda v: key(v, cluster)):
                if v.gpus <= pool.cap:
                    start.append(v.job_id)
                    pool.take(v)
                    if pool.cap == 0:
                        break
            return Plan((), start, None, pool.placed)
        pool = cluster.pool(self.type_preference if self._ranks_types else None, empty=True)
        keep = set()
        active = [*cluster.running.values(), *cluster.waiting.values()]
        running = cluster.running
        for v in sorted(active, key=lambda v: key(v, cluster)):
            if v.job_id in running:
                if pool.holds(v):
                    keep.add(v.job_id)
                    pool.keep(v)
            elif v.gpus <= pool.cap:
                keep.add(v.job_id)
                pool.take(v)
            if pool.cap == 0:
                break
        return Plan([j for j in cluster.running if j not in keep],
                    [j for j in cluster.waiting if j in keep], None, pool.placed)

    def _allocate_from_queue(self, cluster: ClusterView) -> Plan:
        """The same allocation as the sorting path, reading waiting jobs from the kept queue.

        Taking, again and again, the best-ranked job that fits in what is left
        gives the same set as walking the sorted list with first-fit.
        """
        queue = getattr(self, "_queue", None)
        if queue is None:
            queue = self._queue = WaitingQueue(self.key)
        queue.sync(cluster)
        if not self.preemptive:
            if not cluster.free_gpus:
                return NO_CHANGE
            pool = cluster.pool(self.type_preference if self._ranks_types else None)
            taken = []
            while pool.cap > 0:
                e = queue.best(pool.cap)
                if e is None:
                    break
                queue.take(e)
                taken.append(e)
                pool.take(e[3])
            queue.put_back(taken)
            return Plan((), [e[2] for e in taken], None, pool.placed) if taken else NO_CHANGE
        key = self.key
        # running jobs rank before waiting ones on equal keys, then in dict order
        running = [(key(v, cluster), i, v) for i, v in enumerate(cluster.running.values())]
        running.sort()  # (key, dict position): positions are unique, views never compared
        pool = cluster.pool(self.type_preference if self._ranks_types else None, empty=True)
        r, n_run, keep, taken = 0, len(running), set(), []
        w = queue.best(pool.cap)
        while pool.cap > 0:
            # a running job stays on its own nodes: once it no longer fits, it never will
            while r < n_run and not pool.holds(running[r][2]):
                r += 1
            if r < n_run and (w is None or running[r][0] <= w[0]):  # ties: running first
                keep.add(running[r][2].job_id)
                pool.keep(running[r][2])
                r += 1
                if w is not None and w[3].gpus > pool.cap:
                    w = queue.best(pool.cap)  # still fitting, w stays the best that fits
            elif w is not None:
                queue.take(w)
                taken.append(w)
                pool.take(w[3])
                w = queue.best(pool.cap)
            else:
                break
        queue.put_back(taken)
        started = {e[2] for e in taken}
        return Plan([j for j in cluster.running if j not in keep],
                    [j for j in cluster.waiting if j in started], None, pool.placed)


class Stopper(Policy):
    """Wraps a base policy: scheduling is the base's, ``should_stop`` is the stopper's.

    Stopping composes: if the wrapped policy would stop a job, so does this one.
    """

    def __init__(self, base: Policy):
        if not isinstance(base, Policy):
            raise TypeError(f"base must be a Policy, got {type(base).__name__}")
        self.base = base

    @property
    def name(self) -> str:
        return f"{self.base.name}+{self.rule_name}"

    rule_name = "stopper"

    def reset(self) -> None:
        self.base.reset()

    def schedule(self, cluster: ClusterView) -> Plan:
        return self.base.schedule(cluster)

    def should_stop(self, job: JobView, cluster: ClusterView) -> bool:
        return self.rule(job, cluster) or self.base.should_stop(job, cluster)

    def rule(self, job: JobView, cluster: ClusterView) -> bool:
        raise NotImplementedError


def apply_plan(sim: Simulator, plan: Plan) -> None:
    """Apply a :class:`Plan` to the simulator (preemptions first)."""
    for j in plan.preempt:
        sim.preempt(j)
    placed = plan.placed
    if placed:
        for j in plan.start:
            sim.start(j, placed.get(j))
    else:
        for j in plan.start:
            sim.start(j)
    if plan.wakeup_h is not None and plan.wakeup_h > sim.cluster.now_h:
        sim.request_wakeup(plan.wakeup_h)


def drive(sim: Simulator, policy: Policy) -> Outcome:
    """Run ``policy`` on ``sim`` until every job has ended; return the outcome."""
    policy.reset()
    cluster = sim.cluster
    should_stop, schedule = policy.should_stop, policy.schedule
    while True:
        kind = sim.advance()
        if kind == EVAL:
            job = sim.decision_job
            if should_stop(job, cluster):
                sim.stop(job.job_id)
        elif kind == DONE:
            return sim.outcome()
        else:
            apply_plan(sim, schedule(cluster))
