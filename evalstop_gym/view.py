"""The information boundary: the only objects a policy ever receives.

A :class:`JobView` holds the whitelisted public fields of one job and nothing
else; a :class:`ClusterView` holds the cluster state and the views of active
jobs. Neither holds a reference to the simulator, the workload or any hidden
array, so true lengths, hacking labels, true curves, peak positions and
noise-free scores are unreachable from them (from them only: code that shares
the simulator's process can reach the simulator through the interpreter, which
is why the bench plays outside policies in a process of their own;
docs/bench.md, *Trust model*). The simulator writes into views;
it never reads from them, so a policy that scribbles on a view changes only
its own picture, never the simulation.
"""

from __future__ import annotations

from array import array
from typing import NamedTuple

from .placement import BestFitPool, FlatPool, NodePool, place_preemptive
from .timebase import TICKS_PER_HOUR

WAITING, RUNNING, COMPLETED, STOPPED = "waiting", "running", "completed", "stopped"


class JobConfig(NamedTuple):
    """A job's public configuration: what a platform sees when a user submits the job (its training
    arguments), shown in :attr:`JobView.config` only when the simulator's ``config_visible`` is on.

    ``kl_coef``: the KL penalty's coefficient (0: no penalty); ``learning_rate``: relative to the world's
    typical rate (1); ``data_size``: preference pairs (or examples) and ``model_size``: parameters, NaN where
    the world does not model them (the latent worlds draw neither).
    """

    kl_coef: float
    learning_rate: float
    data_size: float
    model_size: float


class JobView:
    """Public view of one job. Times in hours, demand in GPUs.

    Hours are exact conversions of the simulator's integer ticks (1 ms, see
    :mod:`evalstop_gym.timebase`); ``submit_ticks``, ``est_length_ticks``,
    :attr:`attained_ticks`, :attr:`remaining_est_ticks` and :attr:`waiting_ticks` give the same
    quantities as integers, for keys that must tie exactly. :attr:`restore_ticks` is the part of
    the attained service spent resuming after preemptions rather than training.

    ``eval_items`` is the size of the job's eval set (0 where the world does
    not model it), so the sampling error of a score ``p`` is about
    ``sqrt(p (1 - p) / eval_items)``.
    ``eval_scores``, ``eval_attained_h`` (attained hours at each eval),
    ``train_losses`` and ``proxy_rewards`` are the histories
    observed so far, as arrays of doubles (``array.array("d")``: one entry per
    eval checkpoint reached; ``proxy_rewards`` is empty for non-RLHF jobs). They
    index, slice, iterate and convert (``np.array``, ``list``) like lists of
    floats, but an array never equals a list (compare ``list(h)``), does not
    concatenate with one, has no ``copy()`` and is not JSON-serializable
    (``list(h)`` is); unlike a list of floats they hold no Python object for
    the garbage collector's passes to walk, which on a big episode were most
    of its work. ``np.asarray(h)`` shares the array's memory rather than
    copying; a policy may keep it, and the view then gets a grown copy at the
    next checkpoint, so what the policy kept stays the
    snapshot it took, as a copy would.
    ``consecutive_declines`` counts the trailing run of strict declines of the
    observed eval score. ``config`` is the job's :class:`JobConfig` where the
    simulator shows it (``Simulator(workload, config_visible=True)``), else None.
    """

    __slots__ = ("job_id", "tenant", "job_type", "gpus", "submit_h", "est_length_h", "evals_total", "eval_items",
                 "eval_scores", "eval_attained_h", "train_losses", "proxy_rewards", "consecutive_declines", "status",
                 "start_h", "queued_seq", "submit_ticks", "est_length_ticks", "_service_ticks", "_run_since_ticks", "_cluster",
                 "nodes", "_restore_ticks", "_restore_until", "config")

    def __init__(self, job_id: int, tenant: int, job_type: str, gpus: int, submit_ticks: int,
                 est_length_ticks: int, evals_total: int, cluster: "ClusterView", eval_items: int = 0):
        self.job_id = job_id
        self.tenant = tenant
        self.job_type = job_type
        self.gpus = gpus
        self.submit_ticks = submit_ticks
        self.submit_h = submit_ticks / TICKS_PER_HOUR
        self.est_length_ticks = est_length_ticks
        self.est_length_h = est_length_ticks / TICKS_PER_HOUR
        self.evals_total = evals_total
        self.eval_items = eval_items
        self.eval_scores = array("d")
        self.eval_attained_h = array("d")   # attained service when each score came out, hours
        self.train_losses = array("d")
        self.proxy_rewards = array("d")
        self.consecutive_declines = 0
        self.status = WAITING
        self.start_h: float | None = None   # first time the job started running
        self.queued_seq = -1                # stamp of its last entry into the queue (increasing)
        self._service_ticks = 0             # attained service before the current run, ticks
        self._run_since_ticks: int | None = None
        self._restore_ticks = 0             # of the service before the current run, ticks spent resuming
        self._restore_until = 0             # tick at which the current run's resume ends (0: none)
        self._cluster = cluster
        self.nodes: tuple | None = None     # while running on nodes: ((node, gpus), ...); None on the flat pool
        self.config: JobConfig | None = None   # the job's public configuration, where the workload shows it

    @property
    def attained_ticks(self) -> int:
        """Attained service in ticks (1 ms): exact, for keys that must tie exactly."""
        if self._run_since_ticks is None:
            return self._service_ticks
        return self._service_ticks + (self._cluster.now_ticks - self._run_since_ticks)

    @property
    def restore_ticks(self) -> int:
        """Of :attr:`attained_ticks`, the ticks spent resuming after preemptions (saving, loading the
        checkpoint, warming up) rather than training, up to now: the time a platform sees between a
        resume and the job's first training step after it. 0 where resumes cost nothing."""
        since, until = self._run_since_ticks, self._restore_until
        if since is None or until <= since:
            return self._restore_ticks
        return self._restore_ticks + min(self._cluster.now_ticks, until) - since

    def _close_restore(self, now: int) -> None:
        """Count the current run's resume time up to ``now`` into the total: before the run is split or ends."""
        since = self._run_since_ticks
        if self._restore_until > since:
            self._restore_ticks += min(now, self._restore_until) - since
        self._restore_until = 0

    @property
    def attained_h(self) -> float:
        """Attained service: hours this job has run so far (up to now)."""
        return self.attained_ticks / TICKS_PER_HOUR

    @property
    def attained_gpu_h(self) -> float:
        """Attained GPU-time: ``attained_h * gpus`` (GPU-hours)."""
        return self.attained_h * self.gpus

    @property
    def evals_done(self) -> int:
        return len(self.eval_scores)

    @property
    def progress(self) -> float:
        """Fraction of the eval schedule reached (checkpoint index / evals_total)."""
        return len(self.eval_scores) / self.evals_total

    @property
    def remaining_est_ticks(self) -> int:
        """The user's estimate minus attained service, in ticks (never below 0): exact."""
        return max(self.est_length_ticks - self.attained_ticks, 0)

    @property
    def remaining_est_h(self) -> float:
        """The user's estimate minus attained service (hours, never below 0)."""
        return self.remaining_est_ticks / TICKS_PER_HOUR

    @property
    def waiting_ticks(self) -> int:
        """Ticks since submission not spent running: exact."""
        return self._cluster.now_ticks - self.submit_ticks - self.attained_ticks

    @property
    def waiting_h(self) -> float:
        """Hours since submission not spent running."""
        return self.waiting_ticks / TICKS_PER_HOUR

    def _record_copied(self, i: int, score: float, loss: float, attained_h: float, proxy: float | None) -> None:
        """Record checkpoint ``i`` (0-based) into fresh copies of the histories: the simulator's path when a
        policy holds a buffer on one (``np.asarray``, ``memoryview``), under which an array cannot resize.
        Appends made before the one that raised are dropped by taking each history's first ``i`` entries."""
        self.eval_scores = self.eval_scores[:i] + array("d", (score,))
        self.train_losses = self.train_losses[:i] + array("d", (loss,))
        self.eval_attained_h = self.eval_attained_h[:i] + array("d", (attained_h,))
        if proxy is not None:
            self.proxy_rewards = self.proxy_rewards[:i] + array("d", (proxy,))

    def __repr__(self) -> str:
        return (f"JobView(id={self.job_id}, {self.job_type}, gpus={self.gpus}, {self.status}, "
                f"evals={self.evals_done}/{self.evals_total})")


class ClusterView:
    """Public cluster state: clock, GPU counts, waiting and running jobs.

    The clock is ``now_ticks`` (integer ticks of 1 ms) and ``now_h`` (the same
    instant in hours); the simulator sets both together.

    ``waiting`` and ``running`` map job id to :class:`JobView`, in the order
    jobs entered each state (for ``waiting``, the order of ``JobView.queued_seq``).

    ``spec`` is the :class:`~evalstop_gym.cluster.ClusterSpec` (public: nodes,
    GPU types, throughputs, placement policy). On a cluster of several nodes
    (or GPU types) ``node_free`` lists the free GPUs of each node and a
    running job's ``JobView.nodes`` says where it runs; on the flat pool
    ``node_free`` is None. :meth:`pool` gives the allocator its tentative
    allocation state.
    """

    __slots__ = ("now_ticks", "now_h", "total_gpus", "free_gpus", "waiting", "running", "finished",
                 "spec", "node_free", "_placer", "_nodes", "_flat")

    def __init__(self, total_gpus: int, spec=None, placer=None):
        self.now_ticks = 0
        self.now_h = 0.0
        self.total_gpus = total_gpus
        self.free_gpus = total_gpus
        self.waiting: dict[int, JobView] = {}
        self.running: dict[int, JobView] = {}
        self.finished = 0
        self.spec = spec
        self._placer = placer
        # the simulator keeps _nodes (free GPUs per node and their counts) up to date; node_free is its list
        self._nodes = placer.empty() if placer else None
        self._flat = FlatPool(total_gpus)
        self.node_free: list[int] | None = self._nodes.free if placer else None

    def largest_fit(self) -> int:
        """The largest GPU demand that can be placed now (the free GPUs on the flat pool)."""
        return self.free_gpus if self._placer is None else self._nodes.cap()

    def job_speed(self, job: JobView) -> float:
        """Speed of a running ``job`` on its nodes, relative to the speed its length is measured at
        (GPU type and spread penalty, :mod:`evalstop_gym.placement`); 1.0 on the flat pool."""
        if self._placer is None or job.nodes is None:
            return 1.0
        rate = self._placer.rate(job.job_type, job.nodes)
        return 1.0 if rate is None else rate[0] / rate[1]

    def pool(self, prefer=None, nodes=None):
        """Tentative allocation state over the GPUs free now, for planning (:mod:`evalstop_gym.placement`).

        ``prefer(job, cluster)``: GPU type ranks for placing a job (or None).
        ``nodes`` (on nodes): plan on this node state instead (taken as it is),
        with every placement named (``placed``).
        """
        if nodes is not None:
            return NodePool(self._placer, nodes, self, prefer)
        if self._placer is None:
            pool = self._flat  # one reusable pool: plans are made one at a time
            pool.cap = self.free_gpus
            return pool
        if prefer is None and self._placer.strict:
            return BestFitPool(self._nodes)
        return NodePool(self._placer, self._nodes.copy(), self, prefer)

    def place_preemptive(self, starts, candidates, prefer=None, rank=None) -> tuple:
        """On nodes: place a preemptive plan's ``starts`` without moving running jobs.

        Returns ``(placed, preempted, after)``: where each placed start goes,
        the ids of the ``candidates`` (running jobs the plan would preempt)
        that do not keep running, and the node state once the plan is applied (for
        :meth:`pool`); see :func:`evalstop_gym.placement.place_preemptive`.
        """
        return place_preemptive(self._placer, self._nodes, starts, candidates,
                                prefer and (lambda v: prefer(v, self)), rank)

    @property
    def used_gpus(self) -> int:
        return self.total_gpus - self.free_gpus
