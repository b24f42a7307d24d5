"""Tiresias: discretized two-dimensional least-attained-service (2D-LAS). Preemptive.

Rule (Gu et al., NSDI 2019, section 3.2; its reference simulator
``SymbioticLab/Tiresias``, ``simulator/run_sim.py``, ``dlas-gpu``): a job's
attained service is its GPU-time, ``gpus * time run`` (GPU-hours), where time
run is time spent training: a resume's time (saving, restoring the checkpoint,
warming up: :attr:`JobView.restore_ticks`) is left out. The reference's resumes
are free, so its time run (``executed_time``) is the job's progress; counted as
service, a resume dearer than the first threshold sent the job down before it
trained, and two such jobs could swap places forever without progress. There are
``len(thresholds_gpu_h) + 1`` queues, each an ordered list:

* an arriving job is appended to queue 0;
* a running job whose GPU-time (counted since its last promotion) reaches
  the threshold of its queue is moved to the end of the next queue;
* at every scheduling point the queues are walked in order, each list from its
  head, and every job that fits in the GPUs not yet given out keeps or gets
  them (first-fit); the others wait, running ones are preempted;
* then each queue's waiting jobs move behind its running ones, both in list
  order. So a running job is never overtaken by a job that was already
  waiting in its queue ("no preemption within a queue"); a job that enters the
  queue later (a demoted one, at the end) can be.

Starvation guard (``promote_knob``, the paper's PROMOTEKNOB; the reference's
``dlas-gpu-K``): a waiting job below queue 0 whose waiting time since its last
promotion (counted from its first run after it) reaches ``promote_knob``
times its run time since that promotion is moved to the end of queue 0, and
its run time restarts from 0, so it climbs the thresholds again. The reference's
``dlas-gpu`` has no guard: ``promote_knob=None``. Here run time is the time the
job held its GPUs, resumes included: a job that spent them resuming was not
starved. Counting its training only, a job with a long resume came back to queue
0 after a short wait and preempted another into a long resume, again and again
(``order="arrival"``, 24-hour resumes, 60 RLHF jobs: 54,617 preemptions).

Tie rule: ``order="queue"`` (default) is the reference's list order above.
``order="arrival"`` reads the paper's "FIFO within a queue" as arrival order:
a queue's jobs rank by arrival whether they run or wait, so an older waiting
job preempts a younger running one of its queue (many more preemptions on
Philly). Both rank queue 0 first.

Every remaining difference from the reference simulator:

* Time is exact to the millisecond (the reference counts whole seconds) and
  a job is demoted at the first tick its GPU-time reaches the threshold, except
  after a costly resume: how long it takes is not known ahead, so the demotion
  may come later, by less than the resume's time (:meth:`_push_demotion`; with
  ``demotion_timer="reference"`` a resuming job's timer is that check). The
  reference's timer for a multi-GPU job's next demotion is
  ``(threshold - seconds run) // gpus`` seconds ahead (GPU-seconds less
  seconds), later than the crossing once the job has run; its demotion then
  waits for that timer or the next arrival or completion.
* The guard compares exact times (``waited >= promote_knob * run``); the
  reference truncates ``run * knob`` to whole seconds.
* On nodes the keep set is decided on the GPU count as above, then placed
  without moving running jobs (:meth:`Scheduler._place_on_nodes`); the
  reference's ``dlas-gpu`` only counts GPUs.

Defaults:
* ``thresholds_gpu_h = (4, 32)`` GPU-hours, three queues. They sit between the
  job types' typical sizes (``config.DEFAULT_JOB_TYPES``): most LoRA jobs
  (1-4 GPUs, about 1 h) finish in queue 0, DPO jobs (4-8 GPUs, about 2.5 h)
  mostly finish in queue 1, RLHF jobs (8-16 GPUs, about 6 h) end in queue 2.
  The reference's own are 3,250 and 7,200 GPU-seconds (``jobs.py``).
* ``promote_knob = 2``: our choice, documented, not taken from the paper.

Speed: the lists are kept across scheduling points and only changes are
applied (arrivals, ends, starts, preemptions, the queue jumps that are due,
from two heaps of due times), so a scheduling point costs a few steps per
change plus one look per GPU-demand class, not a sort of every active job.
Source: Gu, Chowdhury, Shin, Zhu, Jeon, Qian, Liu & Guo, "Tiresias: A GPU
Cluster Manager for Distributed Deep Learning", NSDI 2019 (Discretized 2D-LAS).
"""

from __future__ import annotations

import heapq
import math

from evalstop_gym.config import ConfigError, check_range
from evalstop_gym.policy import NO_CHANGE, Plan, Scheduler
from evalstop_gym.timebase import TICKS_PER_HOUR, ceil_ticks
from evalstop_gym.view import WAITING

ORDERS = ("queue", "arrival")
TIMERS = ("exact", "reference")
_TICKS_PER_S = TICKS_PER_HOUR // 3600
_RUN, _PEND, _DEMOTED = 0, 1, 2  # a job's tier in its queue's list: running, waiting, moved in at this point


class Tiresias(Scheduler):
    name = "tiresias"
    preemptive = True

    def __init__(self, thresholds_gpu_h: tuple[float, ...] = (4.0, 32.0), promote_knob: float | None = 2.0,
                 order: str = "queue", demotion_timer: str = "exact"):
        thresholds_gpu_h = tuple(thresholds_gpu_h)
        for t in thresholds_gpu_h:
            check_range("thresholds_gpu_h", t, 0.0, lo_open=True)
        if list(thresholds_gpu_h) != sorted(set(thresholds_gpu_h)):
            raise ConfigError("thresholds_gpu_h", thresholds_gpu_h, "must be strictly increasing")
        if promote_knob is not None:
            check_range("promote_knob", promote_knob, 0.0, lo_open=True)
        if order not in ORDERS:
            raise ConfigError("order", order, f"must be one of {', '.join(ORDERS)}")
        if demotion_timer not in TIMERS:
            raise ConfigError("demotion_timer", demotion_timer, f"must be one of {', '.join(TIMERS)}")
        self.thresholds_gpu_h = thresholds_gpu_h
        self.demotion_timer = demotion_timer
        self.promote_knob = promote_knob
        self.order = order
        # thresholds in GPU-ticks: demotion compares integers
        self._limits = [round(t * TICKS_PER_HOUR) for t in thresholds_gpu_h]
        self.reset()

    def reset(self) -> None:
        self._cluster = None  # the episode's state is built at its first scheduling point

    def _begin(self, cluster) -> None:
        n_q = len(self._limits) + 1
        self._cluster = cluster
        self._run = [{} for _ in range(n_q)]         # per queue: its running jobs (id -> view), in list order
        self._run_gpus = [0] * n_q                   # GPUs those hold
        self._demoted: list[list] = [[] for _ in range(n_q)]  # running jobs moved in at this point
        self._rank: dict[int, tuple] = {}            # job id -> (queue, tier, stamp): its place in the lists
        self._heaps: dict[int, list] = {}            # GPU demand -> heap of (queue, stamp, id, view), waiting
        self._classes: list[tuple[int, list]] = []   # (demand, heap), by demand
        self._taken: list[tuple] = []                # heap entries the last walk took
        self._running: dict[int, object] = {}        # the jobs the lists count as running
        self._up, self._down = 0, 0                  # stamps for the end / the head of a list
        self._newest = -1                            # newest queued_seq seen
        self._arrival: dict[int, int] = {}           # job id -> arrival rank
        self._arrived = 0
        self._offset: dict[int, int] = {}            # job id -> trained ticks at its last promotion
        self._held: dict[int, int] = {}              # job id -> attained ticks (resumes included) then
        self._resuming: dict[int, int] = {}          # running job id -> its next demotion check, while resuming
        self._mark: dict[int, int] = {}              # job id -> its waiting ticks when it first ran since then
        # (tick, rank, id, run's queued_seq, queue, tick its checks began, trained ticks at the push)
        self._demote_due: list[tuple] = []
        self._promote_due: list[tuple] = []          # (tick, rank, id, queued_seq, queue)

    def key(self, job, cluster):
        """The job's place: ``(queue, tier, stamp)`` in list order, or ``(queue, arrival rank)``."""
        rank = self._rank[job.job_id]
        return (rank[0], self._arrival[job.job_id]) if self.order == "arrival" else rank

    def queue(self, job) -> int:
        """Index of the job's queue (0 is the top) as of the last scheduling point."""
        return self._rank[job.job_id][0]

    # -- bookkeeping ---------------------------------------------------------------------
    def _put_waiting(self, q: int, stamp: int, v) -> None:
        j = v.job_id
        self._rank[j] = (q, _PEND, stamp)
        heap = self._heaps.get(v.gpus)
        if heap is None:
            heap = self._heaps[v.gpus] = []
            self._classes.append((v.gpus, heap))
            self._classes.sort(key=lambda c: c[0])
        heapq.heappush(heap, (q, stamp, j, v))

    def _put_running(self, q: int, v) -> None:
        j = v.job_id
        self._up += 1
        self._rank[j] = (q, _RUN, self._up)
        self._run[q][j] = v
        self._run_gpus[q] += v.gpus
        self._running[j] = v

    @staticmethod
    def _trained(v) -> int:
        """The job's attained service in Tiresias' sense: ticks run training, a resume's time left out."""
        return v.attained_ticks - v.restore_ticks

    def _left(self, v, q: int) -> int:
        """GPU-ticks of training that running job ``v`` has left before queue ``q``'s threshold."""
        return self._limits[q] - (v.attained_ticks - v.restore_ticks - self._offset.get(v.job_id, 0)) * v.gpus

    def _push_demotion(self, v, q: int, now: int, since: int | None = None, trained: int | None = None) -> None:
        """Push the job's demotion check: due when its training reaches the threshold if it trains from now
        on. How long a resume takes is not known ahead: a check that finds the job short of the threshold
        (it was resuming) looks again then if it has trained since the last push (``trained``), as its
        resume is over; if not, at least as far ahead as the checks began (``since``). So a resume costs a
        few checks and may delay a demotion by less than its own time; where resumes cost nothing the
        first check is exact."""
        if q < len(self._limits):
            j = v.job_id
            now_trained = v.attained_ticks - v.restore_ticks  # _trained, once: a push per start
            wait = max(-(-(self._limits[q] - (now_trained - self._offset.get(j, 0)) * v.gpus) // v.gpus), 0)
            if since is not None and now_trained == trained:  # still resuming
                wait = max(wait, now - since)
                self._resuming[j] = now + wait
            else:
                since = now
                self._resuming.pop(j, None)
            heapq.heappush(self._demote_due, (now + wait, self._arrival[j], j, v.queued_seq, q, since, now_trained))

    def _promotion_in(self, v, now: int) -> int:
        """Ticks until waiting job ``v`` (below queue 0, run since its last promotion) is promoted."""
        j = v.job_id
        run = v.attained_ticks - self._held.get(j, 0)
        waited = now - v.submit_ticks - v.attained_ticks - self._mark[j]
        return max(math.ceil(self.promote_knob * run - waited), 0)

    def _push_promotion(self, v, q: int, now: int) -> None:
        j = v.job_id
        if self.promote_knob is not None and q > 0 and j in self._mark:
            heapq.heappush(self._promote_due, (now + self._promotion_in(v, now), self._arrival[j], j,
                                               v.queued_seq, q))

    def _forget(self, j: int) -> None:
        for d in (self._rank, self._arrival, self._offset, self._held, self._mark, self._resuming):
            d.pop(j, None)

    def _sync(self, cluster) -> None:
        """Apply what happened since the last point: its list moves, then ends, arrivals and due jumps."""
        if cluster is not self._cluster:
            self._begin(cluster)
        now, running, waiting = cluster.now_ticks, cluster.running, cluster.waiting
        mine, rank = self._running, self._rank
        for e in self._taken:  # entries the last walk took go back if their jobs still wait there
            if waiting.get(e[2]) is e[3] and rank.get(e[2]) == (e[0], _PEND, e[1]):
                heapq.heappush(self._heaps[e[3].gpus], e)
        self._taken = []
        # the last point's partition: each queue's waiting jobs behind its running ones, in list order
        left, started = mine.keys() - running.keys(), running.keys() - mine.keys()
        front: dict[int, list] = {}
        resuming = self._resuming
        for j in left:
            v = mine.pop(j)
            if resuming:
                resuming.pop(j, None)
            q, tier, s = rank[j]
            if tier == _RUN:
                del self._run[q][j]
                self._run_gpus[q] -= v.gpus
                if v.status == WAITING:
                    front.setdefault(q, []).append((s, v))
                else:
                    self._forget(j)
        for q, jobs in front.items():  # preempted from the running part: the head of the waiting part
            for s, v in sorted(jobs, key=lambda e: -e[0]):
                self._down -= 1
                self._put_waiting(q, self._down, v)
                self._push_promotion(v, q, now)
        by_queue: dict[int, list] = {}
        for j in started:
            v = running[j]
            if j not in rank:  # started by the driver before a point saw it wait
                self._arrive(v)
            q, _, s = rank[j]
            by_queue.setdefault(q, []).append((s, v))
        for q in range(len(self._run)):
            for s, v in sorted(by_queue.get(q, ()), key=lambda e: e[0]):
                self._put_running(q, v)
                j = v.job_id
                if j not in self._mark:
                    self._mark[j] = now - v.submit_ticks - v.attained_ticks
                self._push_demotion(v, q, now)
            for v in self._demoted[q]:
                j = v.job_id
                if running.get(j) is v:
                    self._put_running(q, v)
                elif v.status == WAITING:  # moved in and preempted: the end of the waiting part
                    self._up += 1
                    self._put_waiting(q, self._up, v)
                    self._push_promotion(v, q, now)
                else:
                    self._forget(j)
            self._demoted[q] = []
        # arrivals, in queue order, then the queue jumps due now in arrival order (the reference's order)
        new = []
        for v in reversed(waiting.values()):
            if v.queued_seq <= self._newest:
                break
            if v.job_id not in rank:
                new.append(v)
        if waiting:
            self._newest = max(self._newest, next(reversed(waiting.values())).queued_seq)
        for v in reversed(new):
            self._arrive(v)
        due = []
        heap = self._demote_due
        while heap and heap[0][0] <= now:
            t, r, j, seq, q, since, trained = heapq.heappop(heap)
            v = running.get(j)
            if v is not None and v.queued_seq == seq and rank[j][:2] == (q, _RUN) and j in mine:
                if self._left(v, q) > 0:  # it spent part of the wait resuming
                    self._push_demotion(v, q, now, since, trained)
                else:
                    due.append((r, j, v, q, True))
        heap = self._promote_due
        while heap and heap[0][0] <= now:
            t, r, j, seq, q = heapq.heappop(heap)
            v = waiting.get(j)
            if v is not None and v.queued_seq == seq and rank[j][0] == q:
                due.append((r, j, v, q, False))
        for _, j, v, q, demote in sorted(due, key=lambda e: e[0]):
            if demote:
                del self._run[q][j]
                self._run_gpus[q] -= v.gpus
                self._up += 1
                rank[j] = (q + 1, _DEMOTED, self._up)
                self._demoted[q + 1].append(v)
                self._push_demotion(v, q + 1, now)
            else:
                self._offset[j] = self._trained(v)
                self._held[j] = v.attained_ticks
                del self._mark[j]
                self._up += 1
                self._put_waiting(0, self._up, v)

    def _arrive(self, v) -> None:
        self._arrived += 1
        self._arrival[v.job_id] = self._arrived
        self._up += 1
        self._put_waiting(0, self._up, v)

    # -- the plan ----------------------------------------------------------------------------
    def schedule(self, cluster) -> Plan:
        self._sync(cluster)
        return super().schedule(cluster)

    def allocate(self, cluster) -> Plan:
        plan = self._allocate_sorted(cluster) if self.order == "arrival" else self._walk(cluster)
        if cluster.node_free is None or plan is NO_CHANGE:
            return plan
        return self._place_on_nodes(cluster, plan)

    def _walk(self, cluster) -> Plan:
        """First-fit down the lists: each queue's running part, its waiting part, its moved-in jobs."""
        waiting, rank = cluster.waiting, self._rank
        cap, preempt, start, taken = cluster.total_gpus, [], [], self._taken
        classes = self._classes
        for q, run in enumerate(self._run):
            if self._run_gpus[q] <= cap:
                cap -= self._run_gpus[q]
            else:
                for j, v in run.items():
                    if v.gpus <= cap:
                        cap -= v.gpus
                    else:
                        preempt.append(j)
            while cap > 0:
                best = None
                for g, heap in classes:
                    if g > cap:
                        break
                    while heap:  # drop heads whose jobs left or moved since they were pushed
                        e = heap[0]
                        if waiting.get(e[2]) is e[3] and rank.get(e[2]) == (e[0], _PEND, e[1]):
                            break
                        heapq.heappop(heap)
                    if heap and heap[0][0] == q and (best is None or heap[0] < best):
                        best = heap[0]
                if best is None:
                    break
                heapq.heappop(self._heaps[best[3].gpus])
                taken.append(best)
                start.append(best[2])
                cap -= best[3].gpus
            for v in self._demoted[q]:
                if v.gpus <= cap:
                    cap -= v.gpus
                else:
                    preempt.append(v.job_id)
        return Plan(preempt, start) if preempt or start else NO_CHANGE

    def wakeup(self, cluster, plan: Plan) -> float | None:
        """Hours of the earliest queue jump after ``plan``: a demotion of a job it keeps or starts, or a
        promotion of a job it leaves waiting or preempts."""
        now, running, waiting = cluster.now_ticks, cluster.running, cluster.waiting
        preempt, start = set(plan.preempt), set(plan.start)
        best = math.inf
        exact = self.demotion_timer == "exact"
        for j in start if exact else ():
            v = waiting[j]
            q = self._rank[j][0]
            if q < len(self._limits):
                best = min(best, now + max(-(-self._left(v, q) // v.gpus), 1))
        if not exact:
            best = self._reference_timer(cluster, preempt, start)
        for j in preempt:
            v = running[j]
            if self.promote_knob is not None and self._rank[j][0] > 0 and j in self._mark:
                best = min(best, now + max(self._promotion_in(v, now), 1))
        if exact:
            best = min(best, self._first_due(self._demote_due, running, preempt))
        best = min(best, self._first_due(self._promote_due, waiting, start))
        if best == math.inf:
            return None
        best = max(best, now + 1)
        h = best / TICKS_PER_HOUR
        while ceil_ticks(h) > best:  # the hours whose first tick is ``best``
            h = math.nextafter(h, -math.inf)
        return h

    def _reference_timer(self, cluster, preempt: set, start: set) -> float:
        """The reference simulator's next demotion timer: ``(threshold - seconds run) // gpus`` seconds
        from now (whole seconds, GPU-seconds less seconds), the earliest over the jobs running after
        the plan. One pass over them: for fidelity runs only."""
        now, limits, offset, rank = cluster.now_ticks, self._limits, self._offset, self._rank
        best, tps = math.inf, _TICKS_PER_S
        jobs = [v for j, v in cluster.running.items() if j not in preempt]
        jobs += [cluster.waiting[j] for j in start]
        for v in jobs:
            q = rank[v.job_id][0]
            if q < len(limits):
                check = self._resuming.get(v.job_id)
                if check is not None:  # it trains after its resume, not now: its own check, not every tick
                    best = min(best, check)
                    continue
                run_s = (self._trained(v) - offset.get(v.job_id, 0)) // tps
                best = min(best, now + max((limits[q] // tps - run_s) // v.gpus * tps, 1))
        return best

    def _first_due(self, heap: list, jobs: dict, leaving: set) -> float:
        """The earliest valid due time in ``heap`` whose job is in ``jobs`` and not ``leaving``."""
        held, best = [], math.inf
        while heap:
            e = heap[0]
            v = jobs.get(e[2])
            if v is None or v.queued_seq != e[3] or self._rank[e[2]][0] != e[4]:
                heapq.heappop(heap)  # its job moved on: never due again
            elif e[2] in leaving:
                held.append(heapq.heappop(heap))
            else:
                best = e[0]
                break
        for e in held:
            heapq.heappush(heap, e)
        return best
