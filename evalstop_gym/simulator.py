"""Discrete-event simulator of a shared GPU cluster.

Events: job arrival, eval checkpoint (the last checkpoint is the completion),
and scheduler wake-ups. They are ordered by ``(time, counter)``, so
simultaneous events always resolve in the order they were pushed; arrivals
hold the counters ``0..n-1`` (job ids), before any other event. Arrivals are
known in advance, so they are read from a list sorted once by ``(submit
time, job id)`` and merged with a heap of the other events: the heap holds
about one checkpoint per running job instead of every job of the episode,
and each push and pop costs the logarithm of that.

The simulator is driven step by step: :meth:`Simulator.advance` processes
events until a decision is due and says which kind:

* ``EVAL``: a running job just reached an eval checkpoint (``decision_job``);
  the driver may call :meth:`stop` on it before advancing again.
* ``SCHEDULE``: every event of the current instant is processed and something
  changed (an arrival, a completion, a stop or a wake-up); the driver may
  :meth:`preempt` and :meth:`start` jobs. Starts and preemptions are the
  driver's own decision and raise no new decision point; a stop frees GPUs
  and so does.
* ``DONE``: every job has completed or been stopped.

Hand-coded policies run through :func:`run`; the Gymnasium and PettingZoo
environments drive the same methods, so both give identical results.
A preempted job resumes later from where it left off; in the realistic world
(:class:`~evalstop_gym.config.WorldModel`) the resume costs the job's
``restart_h`` of GPU time first, its checkpoints follow the workload's jittered
grid (``Workload.checkpoint_ticks``), and each includes its eval's GPU time.
A run preempted or stopped before its resume is over is charged only the part
of the resume it ran (on nodes, the work done at its rate): a job's progress,
its service less the resume time charged, never falls below what its last run
left; on the flat pool the charge is what the view's ``restore_ticks`` counts.

Time is exact: inside the simulator every instant is an integer number of
ticks (1 ms, :mod:`evalstop_gym.timebase`). A job's ``i``-th checkpoint falls
when its attained service reaches ``length * i // evals`` ticks, its completion
when it reaches ``length``; each event time is ``now + remaining work`` in
integers, so preemptions, resumes and the eval count never shift a completion,
and events of the same millisecond form one scheduling point. Hours appear at
the boundary only (views, :class:`Outcome`, metrics).

The cluster is the workload's :class:`~evalstop_gym.cluster.ClusterSpec`. On
the flat pool (one node, every speed 1) a job's work is its service. On nodes
or GPU types a started job is placed (:mod:`evalstop_gym.placement`) and runs
at an exact rational rate: the checkpoint targets above are work at full speed and
each event falls ``ceil(remaining work / rate)`` ticks ahead.
"""

from __future__ import annotations

import heapq
from array import array
from dataclasses import dataclass

import numpy as np

from .config import JOB_TYPES, ConfigError
from .placement import Placer
from .timebase import MAX_HOURS, TICKS_PER_HOUR, ceil_ticks, to_ticks
from .view import COMPLETED, RUNNING, STOPPED, WAITING, ClusterView, JobView
from .workload import Workload

DONE, EVAL, SCHEDULE = 0, 1, 2
_ARRIVAL, _CHECKPOINT, _WAKEUP = 0, 1, 2
_TIMER = -2  # the job field of the driver's timer (a wake-up that a new one replaces); -1: a plain wake-up
_NEVER = 1 << 63  # the tick of the "arrival" after the last one: later than any event (ticks fit int64)


class SimulationError(RuntimeError):
    """A driver asked for something the cluster cannot do."""


@dataclass(frozen=True)
class Outcome:
    """Per-job results of a finished episode (arrays indexed by job id).

    Times are integer ticks (1 ms); the ``*_h`` properties give hours.
    """

    workload: Workload
    submit_ticks: np.ndarray    # int64: submit time as the simulator saw it
    finish_ticks: np.ndarray    # int64: completion or stop time
    service_ticks: np.ndarray   # int64: time run in total
    stopped: np.ndarray         # bool: ended by a stop decision
    evals_seen: np.ndarray      # checkpoints reached
    delivered_ckpt: np.ndarray  # index of the delivered checkpoint (-1: the starting one)
    first_start_ticks: np.ndarray  # int64: first time started (-1: never started)
    preemptions: int
    peak_service_ticks: np.ndarray  # int64: time run when the true best checkpoint was out (-1: never)
    # topology accounting (integers): ticks each job ran spread over nodes; GPU-ticks run per
    # GPU type; the integral over time of free GPUs that no waiting job could use (GPU-ticks)
    spread_ticks: np.ndarray | None = None
    type_gpu_ticks: dict | None = None
    fragmentation_gpu_ticks: int | None = None  # None on the flat pool (not measured)

    @property
    def finish_h(self) -> np.ndarray:
        return self.finish_ticks / TICKS_PER_HOUR

    @property
    def service_h(self) -> np.ndarray:
        return self.service_ticks / TICKS_PER_HOUR

    @property
    def jct_h(self) -> np.ndarray:
        """Job completion times (finish minus submit), hours, exact to the tick."""
        return (self.finish_ticks - self.submit_ticks) / TICKS_PER_HOUR

    @property
    def first_start_h(self) -> np.ndarray:
        return np.where(self.first_start_ticks >= 0, self.first_start_ticks / TICKS_PER_HOUR, np.nan)


def _flat(table: np.ndarray, typecode: str) -> array:
    """``table`` flattened in row order into an ``array.array`` of ``typecode`` (``"d"`` float64, ``"q"`` int64)."""
    return array(typecode, np.ascontiguousarray(table, dtype=np.dtype(typecode)).tobytes())


class Simulator:
    """One episode over a :class:`Workload`. Not reusable: make a new one per episode."""

    _VOID_SLACK = 32  # void checkpoints the heap may hold beyond half of it (a small heap is not worth a pass)

    def __init__(self, workload: Workload, config_visible: bool = False):
        """``config_visible``: put each job's public configuration (:class:`~evalstop_gym.view.JobConfig`: what a
        platform sees when the job is submitted) into its view; off, views carry none (``config`` is None)."""
        w = workload
        self._w = w
        n, self._evals = w.n, w.evals_per_job
        self._n = n
        self._length = to_ticks(w.length_h).tolist()
        self._submit = to_ticks(w.submit_h).tolist()
        # an estimate beyond MAX_HOURS (only a wild guess gets there) counts as MAX_HOURS
        self._est = to_ticks(np.minimum(w.est_length_h, MAX_HOURS)).tolist()
        self._gpus = w.gpus.tolist()
        self._tenant = w.tenant.astype(np.int64).tolist()  # ints, as int(w.tenant[j]) gave them
        self._job_type = [JOB_TYPES[t] for t in w.job_type.tolist()]  # names, as views show them
        self._items = w.items.tolist()
        # the realistic world's checkpoint grid (speed jitter, eval time) and resume cost; None: none
        # per-checkpoint tables are flat arrays of machine numbers (job j's i-th entry at j * evals + i), copied
        # from NumPy's buffers: no Python object per entry to make, walk in the garbage collector's passes or
        # free (lists from tolist() cost most of a short episode's construction); an entry read is a Python
        # float (int) of the same value
        self._grid = _flat(w.checkpoint_ticks(), "q") if w.ckpt_service_h is not None else None
        self._restart = to_ticks(w.restart_h).tolist() if w.restart_h is not None else None
        self._overhead = [0] * n    # resume cost charged so far, ticks of work (shifts the job's checkpoints)
        self._peak = np.argmax(w.curves.gold, axis=1).tolist()
        self._peak_service = [-1] * n
        self._obs = _flat(w.observed, "d")
        self._loss = _flat(w.curves.loss, "d")
        self._proxy = _flat(w.curves.proxy, "d")
        self._rlhf = (w.job_type == JOB_TYPES.index("rlhf")).tolist()  # only RLHF jobs report proxy rewards
        if not isinstance(config_visible, bool):
            raise ConfigError("config_visible", config_visible, "must be True or False")
        self._config = w.job_configs() if config_visible else None
        if config_visible and self._config is None:
            raise ConfigError("config_visible", True, "needs a world whose curves come from latent causes (a "
                                                      "LatentModel): a label-first CurveModel draws no configuration")
        spec = w.spec
        self._placer = None if spec.trivial else Placer(spec)
        self.cluster = ClusterView(w.total_gpus, spec, self._placer)
        # runs at rates other than 1, or spread (else work is service: the flat pool's event path)
        self._rated = self._placer is not None and not self._placer.uniform_speed
        if self._rated:
            self._rate: list[tuple[int, int] | None] = [None] * n  # exact speed of the current run
            self._work = [0] * n                                  # work done, ticks at speed 1
            self._spread = [0] * n
            self._held: list = [None] * n  # (start tick, spread?, [(GPU type, GPUs), ...]) of the current run
            self._type_ticks = dict.fromkeys(spec.gpu_types, 0)
            self._checkpoint = self._checkpoint_on_nodes  # the flat pool's event path stays branch-free
            self._push_checkpoint = self._push_checkpoint_on_nodes
        self._waiting_demand: dict[int, int] = {}  # on nodes: GPU demand -> waiting jobs (for fragmentation)
        self._frag = 0
        self.views: list[JobView | None] = [None] * n
        self._epoch = [0] * n
        self._finish = [-1] * n
        self._first_start = [-1] * n
        self._stopped = [False] * n
        self._seen = [0] * n  # checkpoints reached (the simulator's own count: it never reads a view)
        self._best_idx = [-1] * n
        self._best_score = [-np.inf] * n
        self._preemptions = 0
        # arrivals by (submit tick, job id), then a sentinel; _next_arrival indexes the next one
        self._arrivals = sorted(range(n), key=self._submit.__getitem__)  # stable: ties by job id
        self._arrival_ticks = [self._submit[j] for j in self._arrivals] + [_NEVER]
        self._next_arrival = 0
        # checkpoints and wake-ups; tie-breaker: a plain int (picklable), bumped on every push
        self._heap: list[tuple] = []
        self._void = 0  # checkpoints in the heap voided by a preemption or stop (see _voided)
        self._seq = n
        self._queued = 0  # stamps of entries into the waiting queue
        self._dirty = False
        self._wakeups: set[int] = set()  # instants (ticks) with a plain wake-up pending
        self._timer_seq: int | None = None  # heap counter of the pending timer (set_timer); None: none
        self._timer_at = -1
        self._active = n
        self.decision_job: JobView | None = None

    # -- driving -----------------------------------------------------------------
    def advance(self) -> int:
        """Process events until the next decision; return ``EVAL``, ``SCHEDULE`` or ``DONE``."""
        heap, cluster, arrival_ticks = self._heap, self.cluster, self._arrival_ticks
        while True:
            at = arrival_ticks[self._next_arrival]  # _NEVER once every job has arrived
            if self._dirty and at > cluster.now_ticks and (not heap or heap[0][0] > cluster.now_ticks):
                self._dirty = False
                self.decision_job = None
                return SCHEDULE
            if heap and heap[0][0] < at:  # on equal times the arrival goes first: its counter is lower
                t, seq, kind, j, epoch = heapq.heappop(heap)
                if kind == _CHECKPOINT and epoch != self._epoch[j]:
                    self._void -= 1
                    continue  # the job was preempted or stopped since this was pushed
                if j == _TIMER:
                    if seq != self._timer_seq:
                        self._void -= 1
                        continue  # a timer replaced or withdrawn since it was set
                    self._timer_seq = None
            elif at != _NEVER:
                t, kind, j = at, _ARRIVAL, self._arrivals[self._next_arrival]
                self._next_arrival += 1
            else:
                if self._active:
                    raise SimulationError(
                        f"stalled at t={cluster.now_h:.4f} h: {len(cluster.waiting)} jobs wait, none runs "
                        "and no event is pending; the scheduler must start a job")
                self.decision_job = None
                return DONE
            if t != cluster.now_ticks:
                # on nodes, GPUs idle while jobs wait are fragmented if none of those jobs fits
                if self._placer is not None and cluster.free_gpus and self._waiting_demand:
                    self._account_fragmentation(t)
                cluster.now_ticks = t
                cluster.now_h = t / TICKS_PER_HOUR
            if kind == _CHECKPOINT:
                if self._checkpoint(j):
                    self.decision_job = self.views[j]
                    return EVAL
            elif kind == _ARRIVAL:
                self._arrive(j)
            else:
                self._wakeups.discard(t)
                self._dirty = True

    def _account_fragmentation(self, t: int) -> None:
        """Count free GPUs over [now, t) if no waiting job can be placed on them."""
        c = self.cluster
        # fitting is monotone in demand (placement.py): the smallest waiting demand decides
        least = min(self._waiting_demand)
        if least > c.free_gpus or least > c._nodes.cap():
            self._frag += (t - c.now_ticks) * c.free_gpus

    def _unwait(self, g: int) -> None:
        d = self._waiting_demand
        if d[g] == 1:
            del d[g]
        else:
            d[g] -= 1

    def _arrive(self, j: int) -> None:
        v = JobView(j, self._tenant[j], self._job_type[j], self._gpus[j], self._submit[j],
                    self._est[j], self._evals, self.cluster, self._items[j])
        if self._config is not None:
            v.config = self._config[j]
        self.views[j] = v
        self._enqueue(v)
        self._dirty = True

    def _enqueue(self, v: JobView) -> None:
        self._queued += 1
        v.queued_seq = self._queued
        v.status = WAITING
        self.cluster.waiting[v.job_id] = v
        if self._placer is not None:
            d = self._waiting_demand
            d[v.gpus] = d.get(v.gpus, 0) + 1

    def _checkpoint(self, j: int) -> bool:
        """Record eval checkpoint of job ``j``; True if a stop decision is due."""
        v = self.views[j]
        i = self._seen[j]
        at = j * self._evals + i
        score = self._obs[at]
        if i:
            v.consecutive_declines = v.consecutive_declines + 1 if score < self._obs[at - 1] else 0
        if score > self._best_score[j]:
            self._best_score[j], self._best_idx[j] = score, i
        # service at a checkpoint is exactly its grid point (length * i // evals without jitter)
        # plus the resume costs paid: integers, no drift
        now = self.cluster.now_ticks
        if v._restore_until:  # only a resume sets it; a checkpoint comes after the resume is over
            v._close_restore(now)
        v._service_ticks += now - v._run_since_ticks
        v._run_since_ticks = now
        loss, attained = self._loss[at], v._service_ticks / TICKS_PER_HOUR
        proxy = self._proxy[at] if self._rlhf[j] else None
        try:  # free until it raises: an array cannot grow while a policy holds a buffer on it (np.asarray)
            v.eval_scores.append(score)
            v.train_losses.append(loss)
            v.eval_attained_h.append(attained)
            if proxy is not None:
                v.proxy_rewards.append(proxy)
        except BufferError:
            v._record_copied(i, score, loss, attained, proxy)
        if i == self._peak[j]:
            self._peak_service[j] = v._service_ticks
        i += 1
        self._seen[j] = i
        if i == self._evals:
            self._end(j, COMPLETED)
            return False
        self._push_checkpoint(j)
        return True

    def _push_checkpoint(self, j: int) -> None:
        """Push job ``j``'s next checkpoint: when its service reaches ``length * (i + 1) // evals``
        (or the realistic world's grid point) plus the resume costs it has paid."""
        v = self.views[j]
        k = self._seen[j] + 1
        target = self._length[j] * k // self._evals if self._grid is None else self._grid[j * self._evals + k - 1]
        due = target + self._overhead[j] - v._service_ticks
        self._seq += 1
        heapq.heappush(self._heap, (self.cluster.now_ticks + due, self._seq, _CHECKPOINT, j, self._epoch[j]))

    # on nodes (bound in __init__ in place of the two methods above): work at the job's rate
    def _checkpoint_on_nodes(self, j: int) -> bool:
        # the event fell on the first tick at which work reached the checkpoint's target; at a
        # speed above 1 it may pass it by less than one tick's work, which is not carried over
        k = self._seen[j] + 1
        self._work[j] = (self._length[j] * k // self._evals if self._grid is None
                         else self._grid[j * self._evals + k - 1]) + self._overhead[j]
        return Simulator._checkpoint(self, j)

    def _push_checkpoint_on_nodes(self, j: int) -> None:
        """As :meth:`_push_checkpoint`, the target being work at full speed reached at the job's rate."""
        k = self._seen[j] + 1
        target = self._length[j] * k // self._evals if self._grid is None else self._grid[j * self._evals + k - 1]
        due = target + self._overhead[j] - self._work[j]
        rate = self._rate[j]
        if rate is not None:  # ceil(remaining work * den / num)
            due = -(-due * rate[1] // rate[0])
        self._seq += 1
        heapq.heappush(self._heap, (self.cluster.now_ticks + due, self._seq, _CHECKPOINT, j, self._epoch[j]))

    def _end(self, j: int, status: str) -> None:
        v = self.views[j]
        c = self.cluster
        if v.status == RUNNING:
            if self._placer is not None:
                if self._rated:
                    self._settle(j, v, c.now_ticks)
                self._release(v)
            if v._restore_until:
                self._cut_resume(j, v, c.now_ticks)
            v._service_ticks += c.now_ticks - v._run_since_ticks
            v._run_since_ticks = None
            del c.running[j]
            c.free_gpus += v.gpus
        else:
            del c.waiting[j]
            if self._placer is not None:
                self._unwait(v.gpus)
        voided = status == STOPPED and v.status == RUNNING  # a completion pops the job's last checkpoint
        v.status = status
        self._epoch[j] += 1
        if voided:
            self._voided()
        self._finish[j] = c.now_ticks
        self._active -= 1
        c.finished += 1
        self._dirty = True

    # -- decisions ---------------------------------------------------------------
    def _active_view(self, j: int, action: str) -> JobView:
        v = self.views[j] if 0 <= j < self._n else None
        if v is None or v.status not in (WAITING, RUNNING):
            raise SimulationError(f"cannot {action} job {j}: it is not an active job "
                                  f"(status {v.status if v else 'not arrived'})")
        return v

    def start(self, j: int, where: tuple | None = None) -> None:
        """Start (or resume) waiting job ``j`` on ``gpus`` free GPUs.

        On nodes, ``where`` (``((node, gpus), ...)``) says where; by default
        the cluster's placement policy chooses.
        """
        v = self._active_view(j, "start")
        c = self.cluster
        if v.status != WAITING:
            raise SimulationError(f"cannot start job {j}: it is already running")
        if v.gpus > c.free_gpus:
            raise SimulationError(f"cannot start job {j}: it needs {v.gpus} GPUs, {c.free_gpus} are free")
        if self._placer is not None:
            self._place(j, v, where)
            self._unwait(v.gpus)
        del c.waiting[j]
        c.running[j] = v
        c.free_gpus -= v.gpus
        v.status = RUNNING
        v._run_since_ticks = c.now_ticks
        if v.start_h is None:
            v.start_h = c.now_h
            self._first_start[j] = c.now_ticks
        elif self._restart is not None:  # a resume: save + restore + warm-up on the job's GPUs
            cost = self._restart[j]
            self._overhead[j] += cost
            rate = self._rate[j] if self._rated else None
            # the view's clock for it (JobView.restore_ticks): the first tick its work reaches the cost
            v._restore_until = c.now_ticks + (cost if rate is None else -(-cost * rate[1] // rate[0]))
        self._push_checkpoint(j)

    def preempt(self, j: int) -> None:
        """Suspend running job ``j``; it keeps its progress and waits again."""
        v = self._active_view(j, "preempt")
        c = self.cluster
        if v.status != RUNNING:
            raise SimulationError(f"cannot preempt job {j}: it is not running")
        if self._placer is not None:
            if self._rated:
                self._settle(j, v, c.now_ticks)
            self._release(v)
        if v._restore_until:  # only a resume sets it
            self._cut_resume(j, v, c.now_ticks)
        v._service_ticks += c.now_ticks - v._run_since_ticks
        v._run_since_ticks = None
        self._epoch[j] += 1
        self._voided()
        del c.running[j]
        c.free_gpus += v.gpus
        self._enqueue(v)
        self._preemptions += 1

    def _cut_resume(self, j: int, v: JobView, now: int) -> None:
        """The current run ends at ``now`` (a preemption or stop) while it may still be resuming: the job is
        charged only the part of the resume it ran (work at its rate), so its progress stays where its last
        run left it; then the view's resume clock is closed."""
        if now < v._restore_until:
            ran = now - v._run_since_ticks  # no checkpoint falls inside a resume: the run began it
            rate = self._rate[j] if self._rated else None
            if rate is not None:
                ran = ran * rate[0] // rate[1]  # below the cost: the resume's last tick is not reached
            self._overhead[j] -= self._restart[j] - ran
        v._close_restore(now)

    def _voided(self) -> None:
        """A running job's pending checkpoint (or the timer) was just voided. Void entries stay in
        the heap until their time (a pop skips them); once they are half of it, they are dropped at
        once, so the heap stays within twice the live events on contended episodes (Philly: 6x
        without). The order of the live events is untouched: their ``(time, counter)`` keys are unique."""
        self._void += 1
        heap = self._heap
        if self._void > self._VOID_SLACK and 2 * self._void > len(heap):
            epoch, timer = self._epoch, self._timer_seq
            heap[:] = [e for e in heap if (e[4] == epoch[e[3]] if e[2] == _CHECKPOINT
                                           else e[3] != _TIMER or e[1] == timer)]
            heapq.heapify(heap)
            self._void = 0

    # -- nodes -------------------------------------------------------------------------
    def _place(self, j: int, v: JobView, where: tuple | None) -> None:
        free = self.cluster.node_free
        if where is None:
            where = self._placer.place(free, v.gpus, None, self.cluster._nodes.counts)
            if where is None:
                raise SimulationError(f"cannot start job {j}: no placement of {v.gpus} GPUs on nodes "
                                      f"with {free} free under {self._placer.policy!r}")
        else:
            where = tuple(sorted((int(n), int(g)) for n, g in where))
            total, last = 0, -1
            for n, g in where:  # sorted by node: distinct nodes have increasing numbers
                if n <= last or n >= len(free) or not 0 < g <= free[n]:
                    total = -1
                    break
                total, last = total + g, n
            if total != v.gpus:
                raise SimulationError(f"cannot start job {j} on {where}: it needs {v.gpus} GPUs "
                                      f"on distinct nodes with room (free per node: {free})")
            if self._placer.strict and self._placer.is_spread(where):
                raise SimulationError(f"cannot start job {j} on {where}: placement 'consolidate' never spreads a "
                                      f"job over more nodes than its {v.gpus} GPUs need (use 'first-fit' or 'spread')")
        self.cluster._nodes.use(where)
        v.nodes = where
        if self._rated:
            rate, spread, held = self._placer.run_facts(self._job_type[j], where)
            self._rate[j] = rate
            self._held[j] = (self.cluster.now_ticks, spread, held)

    def _settle(self, j: int, v: JobView, now: int) -> None:
        """At the end of a run: work since the last checkpoint at the job's rate (checkpoints set
        work exactly), and the run's spread and per-type GPU time."""
        rate = self._rate[j]
        ran = now - v._run_since_ticks
        self._work[j] += ran if rate is None else ran * rate[0] // rate[1]
        start, spread, held = self._held[j]
        ran = now - start
        types = self._type_ticks
        for t, g in held:
            types[t] += ran * g
        if spread:
            self._spread[j] += ran

    def _release(self, v: JobView) -> None:
        self.cluster._nodes.use(v.nodes, +1)
        v.nodes = None

    def stop(self, j: int) -> None:
        """Stop job ``j`` for good: free its GPUs now, deliver its best observed checkpoint."""
        self._active_view(j, "stop")
        self._stopped[j] = True
        self._end(j, STOPPED)

    def request_wakeup(self, at_h: float) -> None:
        """Ask for a ``SCHEDULE`` decision at time ``at_h`` (hours) even if nothing happens.

        The wake-up falls on the first tick at or after ``at_h`` (never early),
        and at least one tick after now.
        """
        now = self.cluster.now_ticks
        if not at_h > self.cluster.now_h:
            raise SimulationError(f"wake-up at {at_h} h is not after now ({self.cluster.now_h} h)")
        at = max(ceil_ticks(at_h), now + 1)
        if at in self._wakeups:
            return  # one wake-up per instant is enough
        self._wakeups.add(at)
        self._seq += 1
        heapq.heappush(self._heap, (at, self._seq, _WAKEUP, -1, 0))

    def set_timer(self, at_h: float | None) -> None:
        """Set the driver's timer: a ``SCHEDULE`` decision at ``at_h`` (hours) that the next call replaces.

        Unlike :meth:`request_wakeup`, which adds a wake-up for good, the timer
        is one: setting it withdraws the pending one (``None`` only withdraws),
        so a scheduler whose next priority change moved (a job preempted
        before its queue jump) leaves no stale wake-up to fire. It falls on
        the first tick at or after ``at_h``, at least one tick after now.
        """
        now = self.cluster.now_ticks
        if at_h is not None and not at_h > self.cluster.now_h:
            raise SimulationError(f"timer at {at_h} h is not after now ({self.cluster.now_h} h)")
        at = -1 if at_h is None else max(ceil_ticks(at_h), now + 1)
        if self._timer_seq is not None:
            if at == self._timer_at:
                return  # the pending timer already falls there
            self._timer_seq = None
            self._voided()
        if at < 0:
            return
        self._seq += 1
        self._timer_seq, self._timer_at = self._seq, at
        heapq.heappush(self._heap, (at, self._seq, _WAKEUP, _TIMER, 0))

    def eval_due_now(self) -> bool:
        """True if a live, non-final eval checkpoint is due at the current instant.

        Then the next :meth:`advance` returns ``EVAL`` at this same instant,
        so a driver batching simultaneous decisions can wait for it without
        time passing. Read-only.
        """
        heap, now, epoch, seen = self._heap, self.cluster.now_ticks, self._epoch, self._seen
        stack = [0]
        while stack:  # the events at ``now`` form a subtree at the heap's root
            i = stack.pop()
            if i >= len(heap) or heap[i][0] > now:
                continue
            _, _, kind, j, ep = heap[i]
            if kind == _CHECKPOINT and ep == epoch[j] and seen[j] + 1 < self._evals:
                return True
            stack += (2 * i + 1, 2 * i + 2)
        return False

    # -- results -----------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self._active == 0

    @property
    def events(self) -> int:
        """Events scheduled so far: arrivals, checkpoints (with those a preemption or stop made
        void, which are skipped when their time comes) and wake-ups."""
        return self._seq

    def peak_service_ticks(self, j: int) -> int:
        """Hidden truth: job ``j``'s service (ticks) when its true best checkpoint was out, -1 while it has
        not got there. For the end-of-episode metrics and the env's simulation-only reward terms
        (``evalstop_gym/envs/supervision.py``); never part of a view."""
        return self._peak_service[j]

    def outcome(self) -> Outcome:
        if self._active:
            raise SimulationError(f"episode not finished: {self._active} jobs still active")
        service = np.array([v._service_ticks for v in self.views], dtype=np.int64)
        stopped, seen = np.array(self._stopped), np.array(self._seen)
        return Outcome(
            workload=self._w,
            submit_ticks=np.array(self._submit, dtype=np.int64),
            finish_ticks=np.array(self._finish, dtype=np.int64),
            service_ticks=service,
            stopped=stopped,
            evals_seen=seen,
            # a stopped job delivers its best observed checkpoint, any other its last
            delivered_ckpt=np.where(stopped, np.array(self._best_idx), seen - 1),
            first_start_ticks=np.array(self._first_start, dtype=np.int64),
            preemptions=self._preemptions,
            peak_service_ticks=np.array(self._peak_service, dtype=np.int64),
            spread_ticks=np.array(self._spread, dtype=np.int64) if self._rated else np.zeros(self._n, np.int64),
            type_gpu_ticks=(dict(self._type_ticks) if self._rated else
                            {self.cluster.spec.gpu_types[0]: int(np.sum(service * self._w.gpus))}),
            fragmentation_gpu_ticks=self._frag if self._placer is not None else None,
        )
