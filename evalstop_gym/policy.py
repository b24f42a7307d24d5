"""Policy interfaces and the driver loop that runs a policy on the simulator.

A :class:`Policy` answers two questions, both from public views only:

* ``schedule(cluster) -> Plan``: which jobs to preempt and which to start;
* ``should_stop(job, cluster) -> bool``: at an eval checkpoint, stop this job?

A base :class:`Scheduler` only orders jobs (``key``); the greedy allocation
lives here, once. A :class:`Stopper` wraps any policy, delegating scheduling to
it and adding a stop rule, so stoppers compose over every base scheduler.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from functools import partial
from operator import itemgetter
from typing import Mapping, NamedTuple, Sequence

from .checks import check_range
from .running_order import RunningOrder
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
    wakeup_h: float | None = None   # ask to be called again at this time (hours); replaces the last plan's
    placed: Mapping[int, tuple] | None = None

    def timer_h(self, now_h: float) -> float | None:
        """The driver's timer this plan sets at ``now_h`` (hours): ``wakeup_h`` if it is after now, else
        None, which withdraws the pending one (a wake-up asked for now or earlier is ignored). Every
        driver (:func:`apply_plan`, the envs' adapter) sets its timer through this."""
        w = self.wakeup_h
        return w if w is not None and w > now_h else None


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
    active job, keep the best set that fits in the cluster's GPU count
    (first-fit), preempt running jobs outside it and start waiting jobs inside
    it. Ties keep running jobs first, then waiting jobs in the order they
    started waiting.

    On nodes, "fits" for a non-preemptive scheduler is a placement under the
    cluster's placement policy on the free GPUs (``ClusterView.pool``,
    :mod:`evalstop_gym.placement`). A preemptive scheduler decides its keep
    set on the GPU count as above, then places it without moving running jobs,
    backfilling the GPUs of a job that cannot be placed (:meth:`_place_on_nodes`). A scheduler may rank GPU types per job
    (:meth:`type_preference`).
    """

    preemptive = False
    _ranks_types = False
    # True if a job's key never changes while it waits: the queue is then kept
    # sorted across scheduling points (``WaitingQueue``) instead of re-sorted.
    static_key = False
    # True (with ``static_key``, preemptive only) if a running job's key is
    # ``key_at(running_key(job, cluster), cluster)`` with ``running_key`` fixed
    # while the job runs: running jobs then stay sorted (``RunningOrder``)
    # instead of being re-keyed at every scheduling point.
    run_invariant_key = False

    def key(self, job: JobView, cluster: ClusterView):
        raise NotImplementedError

    def running_key(self, job: JobView, cluster: ClusterView):
        """A running job's key that stays the same for as long as it runs."""
        raise NotImplementedError

    def key_at(self, running_key, cluster: ClusterView):
        """``key`` of a running job from its ``running_key``, now; non-decreasing in ``running_key``.

        Must equal ``key(job, cluster)`` exactly (ties decide plans), so both
        are best computed from integers, such as the views' tick counts.
        """
        raise NotImplementedError

    def running_bound(self, key, cluster: ClusterView):
        """Optional speed-up: the running key ``b`` with ``key_at(k) <= key`` exactly when ``k <= b``.

        A waiting job with key ``key`` then ranks after the running jobs whose
        running key is at most ``b`` and before the others, found by one
        bisection on plain values. None (the default): bisect with ``key_at``.
        """
        return None

    def reset(self) -> None:
        self._queue = WaitingQueue(self.key) if self.static_key else None
        self._running = RunningOrder(self.running_key) if self._kept_running else None

    @property
    def _kept_running(self) -> bool:
        return self.static_key and self.preemptive and self.run_invariant_key

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
        if self.preemptive:  # the keep set on the GPU count, by the fastest path the key allows
            on_nodes = cluster.node_free is not None
            if not on_nodes:
                start = all_waiting_fit(cluster)
                if start is not None:  # every active job is kept: no key needed
                    return Plan([], start) if start else NO_CHANGE
            plan = (self._allocate_from_kept_orders(cluster, on_nodes) if self._kept_running
                    else self._allocate_from_queue(cluster) if self.static_key
                    else self._allocate_sorted(cluster))
            if not on_nodes or plan is NO_CHANGE:
                return plan
            return self._place_on_nodes(cluster, plan, self._kept_running)
        if cluster.free_gpus == 0 or not cluster.waiting:
            return NO_CHANGE
        prefer = self.type_preference if self._ranks_types else None
        start, pool = self._fill(cluster, cluster.largest_fit(), lambda: cluster.pool(prefer))
        return Plan((), start, None, pool.placed) if start else NO_CHANGE

    def _allocate_sorted(self, cluster: ClusterView) -> Plan:
        """Preemptive: every active job keyed and sorted, kept first-fit on the GPU count."""
        key = self.key
        cap, keep = cluster.total_gpus, set()
        active = [*cluster.running.values(), *cluster.waiting.values()]
        for v in sorted(active, key=lambda v: key(v, cluster)):
            if v.gpus <= cap:
                keep.add(v.job_id)
                cap -= v.gpus
                if cap == 0:
                    break
        return Plan([j for j in cluster.running if j not in keep], [j for j in cluster.waiting if j in keep])

    def _place_on_nodes(self, cluster: ClusterView, plan: Plan, keyed: bool = False) -> Plan:
        """A preemptive plan decided on the GPU count, placed on nodes without moving a running job.

        ``plan`` preempts the running jobs outside the keep set (candidates)
        and starts the waiting jobs inside it. Kept running jobs stay where
        they are; jobs to start are placed, in key order, on GPUs free now if
        they can be, otherwise on those plus the candidates' GPUs (a
        consolidated placement before a spread one); a job that cannot be
        placed waits, and lower-ranked waiting jobs that can be placed start
        instead (:meth:`_backfill`). A candidate whose GPUs no started job took
        keeps running (:func:`evalstop_gym.placement.place_preemptive`,
        ``docs/cluster.md``). ``keyed``: ``plan.start`` is in key order already.
        """
        key = self.key
        waiting, running = cluster.waiting, cluster.running
        # stable sorts: equal keys keep queue order (starts) and start order (candidates)
        starts = [waiting[j] for j in plan.start]
        if len(starts) > 1 and not keyed:
            starts.sort(key=lambda v: key(v, cluster))
        candidates = [running[j] for j in plan.preempt]
        prefer = self.type_preference if self._ranks_types else None
        placed, preempted, after = cluster.place_preemptive(starts, candidates, prefer, lambda v: key(v, cluster))
        start = [j for j in plan.start if j in placed] if placed else []
        if keyed and len(start) > 1:  # queue order, as the other paths give it
            start.sort(key=lambda j: waiting[j].queued_seq)
        cap = after.partial_cap() if len(placed) < len(starts) else 0
        if cap:  # a start waits, and partly used nodes have free GPUs: backfill them
            start += self._backfill(cluster, after, cap, plan.start, placed, prefer)
        if not placed:
            return NO_CHANGE
        return Plan([j for j in plan.preempt if j in preempted] if preempted else (), start, None, placed)

    def _backfill(self, cluster: ClusterView, after, cap: int, skip: Sequence[int], placed: dict,
                  prefer) -> list[int]:
        """Backfilling: start waiting jobs outside the plan, in key order, where they can be placed now.

        ``after``: the node state once the plan is applied (not changed); ``cap``: its free GPUs on partly
        used nodes (``after.partial_cap()``). A
        backfilled job takes GPUs only on partly used nodes: wholly free nodes
        are kept for the waiting start (one that needs more than a node), so
        they add up for it as running jobs end. The decision holds for this
        scheduling point only: the waiting start keeps its key, and at every
        later point it is placed before any lower-ranked job
        (``docs/cluster.md``). Adds the placements to ``placed``; returns the
        ids in key order.
        """
        started, pool = self._fill(cluster, cap, lambda: cluster.pool(prefer, after.partial()),
                                   set(skip))
        if pool:
            placed.update(pool.placed)
        return started

    def _fill(self, cluster: ClusterView, cap: int, make_pool, skip=()) -> tuple[list[int], object]:
        """Start waiting jobs (not in ``skip``) in key order, first fit, while any fits: the non-preemptive
        allocation, and backfilling.

        ``cap``: the largest demand that can be placed before any start; ``make_pool()``: the tentative
        state starts are placed in, made at the first start (none when nothing fits). With a static key
        the kept queue gives, again and again, the best-ranked job that fits in what is left: the same set
        as walking the sorted list. Returns the started ids in key order and the pool (or None).
        """
        started, pool = [], None
        if self.static_key:
            queue, taken = self._kept_queue(cluster), []
            e = queue.best(cap) if cap > 0 else None
            while e is not None:
                queue.take(e)
                taken.append(e)
                if e[2] not in skip:
                    if pool is None:
                        pool = make_pool()
                    pool.take(e[3])
                    started.append(e[2])
                left = pool.cap if pool else cap
                e = queue.best(left) if left > 0 else None
            queue.put_back(taken)
            return started, pool
        key = self.key
        for v in sorted(cluster.waiting.values(), key=lambda v: key(v, cluster)):
            if v.gpus <= (pool.cap if pool else cap) and v.job_id not in skip:
                if pool is None:
                    pool = make_pool()
                pool.take(v)
                started.append(v.job_id)
                if pool.cap == 0:
                    break
        return started, pool

    def _allocate_from_queue(self, cluster: ClusterView) -> Plan:
        """Preemptive, static key: the same keep set as :meth:`_allocate_sorted`, reading waiting jobs
        from the kept queue instead of sorting them."""
        queue = self._kept_queue(cluster)
        key = self.key
        # running jobs rank before waiting ones on equal keys, then in dict order
        running = [(key(v, cluster), i, v) for i, v in enumerate(cluster.running.values())]
        running.sort()  # (key, dict position): positions are unique, views never compared
        cap, r, n_run, keep, taken = cluster.total_gpus, 0, len(running), set(), []
        w = queue.best(cap)
        while cap > 0:
            # the GPU count only falls: a running job that no longer fits never will
            while r < n_run and running[r][2].gpus > cap:
                r += 1
            if r < n_run and (w is None or running[r][0] <= w[0]):  # ties: running first
                keep.add(running[r][2].job_id)
                cap -= running[r][2].gpus
                r += 1
                if w is not None and w[3].gpus > cap:
                    w = queue.best(cap)  # still fitting, w stays the best that fits
            elif w is not None:
                queue.take(w)
                taken.append(w)
                cap -= w[3].gpus
                w = queue.best(cap)
            else:
                break
        queue.put_back(taken)
        started = {e[2] for e in taken}
        return Plan([j for j in cluster.running if j not in keep], [j for j in cluster.waiting if j in started])

    def _kept_queue(self, cluster: ClusterView) -> WaitingQueue:
        if getattr(self, "_queue", None) is None:  # a subclass's reset() did not call ours
            Scheduler.reset(self)
        self._queue.sync(cluster)
        return self._queue

    def _allocate_from_kept_orders(self, cluster: ClusterView, keyed: bool = False) -> Plan:
        """The same allocation as the sorting path, with running jobs kept in ``running_key`` order.

        The sorting path walks all active jobs best first with first-fit. Here
        the walk has a position ``i`` in the running order and ``d``, the GPUs
        that would be left over if every running job from ``i`` on kept its
        GPUs (free GPUs are ``d`` plus what those jobs hold). While only running
        jobs are kept, ``d`` stays the same, so a whole run of them is passed
        at once: up to the first one ranked after the best waiting job that
        fits (one bisection), to where that waiting job stops fitting, or, with
        ``d < 0``, to the first running job that does not fit (both a few GPUs'
        worth from the end of the order, see :class:`RunningOrder`). A
        scheduling point so costs a few steps per change to the plan, and per
        demand class the best waiting job moves through, instead of one key
        per running job.

        Running jobs with equal keys but different running keys (SRTF-Est: two
        jobs past their estimates) are ranked by start order in the sorting
        path, not by running key; their order matters only where one of them
        does not fit, and there the group is walked job by job in start order.
        ``keyed``: list the starts in key order (to be placed on nodes), not queue order.
        """
        if not cluster.waiting:
            return NO_CHANGE  # every running job fits, as it runs
        queue = self._kept_queue(cluster)
        order = self._running
        order.sync(cluster)
        entries, keys = order.entries, order.keys
        n = len(entries)
        key_at = partial(self.key_at, cluster=cluster)
        cap = queue.largest_demand()  # free GPUs beyond the largest demand change nothing

        def best(k: int, base: int):
            """The best waiting job that fits in ``base`` GPUs plus those of running jobs from ``k`` on."""
            return queue.best(base if base >= cap else base + order.gpus_from(k, cap - base))

        d, i = cluster.free_gpus, 0  # at i = 0 every running job still holds its GPUs
        skipped, taken = [], []      # running entries not kept; waiting entries started
        w = queue.best(cluster.total_gpus)

        fits, group = order.fits, order.group
        running_bound = self.running_bound
        while i < n:
            if d <= 0 and not fits(1, i, d):  # no GPU left: the running jobs from i on lose theirs,
                if d == 0:         # unless their first one's group began before i
                    break
                a, b, gk = group(order.reach(-d), key_at)
                if a >= i:
                    break
                d, w = _walk_group(order, queue, best, a, b, gk, d, skipped, taken)
                i = b
                continue
            m = n if d >= 0 else order.reach(-d)  # the first running job that does not fit
            stop, p = m, n + 1
            if w is not None:
                if w[3].gpus > d:
                    p = order.reach(w[3].gpus - d) + 1  # w fits at positions before p
                    stop = min(m, p)
                bound = running_bound(w[0], cluster)
                j = (bisect_right(keys, w[0], i, stop, key=key_at) if bound is None  # the first running
                     else bisect_right(keys, bound, i, stop))                         # job ranked after w
                if j < stop:  # running jobs before j keep their GPUs, then w starts
                    d -= w[3].gpus
                    i = j
                    queue.take(w)
                    taken.append(w)
                    w = best(i, d)
                    continue
            i = stop  # running jobs before it keep their GPUs
            if stop == p:
                w = best(i, d)
            if stop != m or m == n:
                continue
            a, b, gk = group(m, key_at)
            if b - a == 1:
                skipped.append(entries[m])
                d += entries[m][3].gpus
                i = m + 1
            else:  # start order decides which of the group fit
                d, w = _walk_group(order, queue, best, a, b, gk, d, skipped, taken)
                i = b
        preempt = skipped + (order.valid_from(i) if i < n else [])  # no GPU left for these
        while d > 0 and w is not None:  # every running job is placed; w fits in the d free GPUs
            d -= w[3].gpus
            queue.take(w)
            taken.append(w)
            w = queue.best(d)
        queue.put_back(taken)
        if not preempt and not taken:
            return NO_CHANGE
        preempt.sort(key=itemgetter(1))
        if keyed:
            taken.sort()  # (key, queue order): entries are never equal
        else:
            taken.sort(key=itemgetter(1))
        return Plan([e[2] for e in preempt], [e[2] for e in taken])


def all_waiting_fit(cluster: ClusterView) -> list[int] | None:
    """The ids of the waiting jobs in queue order if together they fit in the free GPUs, else None.

    Then a preemptive allocation keeps every active job whatever the key (they all fit in the cluster's
    GPUs), so it starts every waiting job and preempts none, which is the plan the paths below give.
    It stops at the first job past the free GPUs: it costs no more steps than the jobs the plan would
    start, and one when no GPU is free."""
    free, ids = cluster.free_gpus, []
    for j, v in cluster.waiting.items():
        free -= v.gpus
        if free < 0:
            return None
        ids.append(j)
    return ids


def _walk_group(order: RunningOrder, queue: WaitingQueue, best, a: int, b: int, gk, d: int, skipped: list,
                taken: list) -> tuple[int, tuple | None]:
    """The kept-order walk through running jobs ``a..b-1``, of equal key ``gk``, job by job in start order.

    Only running jobs were kept since ``a``, so ``d`` (the walk's leftover
    GPUs, :meth:`Scheduler._allocate_from_kept_orders`) is the same there;
    ``best(k, base)`` is the walk's best waiting job that fits. Appends the
    members that lose their GPUs to ``skipped`` and the waiting jobs started
    to ``taken``; returns ``d`` and the best waiting job after the group.
    """
    fits = order.fits
    members = sorted((e for e in order.entries[a:b] if order.valid(e)), key=lambda e: e[1])
    rest = sum(e[3].gpus for e in members)  # GPUs of the members not walked yet
    w = best(b, d + rest)
    for e in members:
        g = e[3].gpus
        while w is not None and w[0] < gk and fits(g, b, d + rest):  # only where it begins
            d -= w[3].gpus
            queue.take(w)
            taken.append(w)
            w = best(b, d + rest)
        rest -= g
        if not fits(g, b, d + rest + g):
            skipped.append(e)
            d += g
        elif w is not None and not fits(w[3].gpus, b, d + rest):
            w = best(b, d + rest)
    return d, w


class Stopper(Policy):
    """Wraps a base policy: scheduling is the base's, ``should_stop`` is the stopper's.

    Stopping composes: if the wrapped policy would stop a job, so does this one.

    Warm-up, shared by every stopper that takes it (the same names on each): the
    rule makes no decision on a job's first ``warmup`` evals, nor while its
    ``progress`` (fraction of the run done, in [0, 1]) is below ``warmup_progress``
    (Optuna's ``n_warmup_steps``, Keras' ``start_from_epoch``). A job that reports
    no progress (a live run of unknown length: progress 0) is never judged under a
    positive ``warmup_progress``. While a job warms up the rule still sees its
    scores (:meth:`observe`), so a pooled noise estimate learns from them. The
    defaults (0, 0.0) judge every eval.
    """

    def __init__(self, base: Policy, warmup: int = 0, warmup_progress: float = 0.0):
        if not isinstance(base, Policy):
            raise TypeError(f"base must be a Policy, got {type(base).__name__}")
        check_range("warmup", warmup, 0, integer=True)
        check_range("warmup_progress", warmup_progress, 0.0, 1.0)
        self.base = base
        self.warmup, self.warmup_progress = warmup, warmup_progress

    @property
    def name(self) -> str:
        return f"{self.base.name}+{self.rule_name}"

    rule_name = "stopper"

    def reset(self) -> None:
        self.base.reset()

    def schedule(self, cluster: ClusterView) -> Plan:
        return self.base.schedule(cluster)

    def should_stop(self, job: JobView, cluster: ClusterView) -> bool:
        if (self.warmup or self.warmup_progress) and self.warming_up(job):
            self.observe(job)
            return self.base.should_stop(job, cluster)
        return self.rule(job, cluster) or self.base.should_stop(job, cluster)

    def warming_up(self, job: JobView) -> bool:
        """Whether ``job`` is still in its warm-up (class docstring): no decision of the rule yet."""
        return len(job.eval_scores) <= self.warmup or job.progress < self.warmup_progress

    def min_evals(self) -> int:
        """The fewest evals after which the rule can stop a job (a live run planning fewer is warned)."""
        return max(2, self.warmup + 1)

    def observe(self, job: JobView) -> None:
        """See ``job``'s data during its warm-up without deciding (a stopper with pooled state overrides it)."""

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
    sim.set_timer(plan.timer_h(sim.cluster.now_h))  # replaces the last plan's timer (None withdraws it)


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
