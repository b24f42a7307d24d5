"""Public view -> float32 features, shared by every environment.

Everything here reads :class:`~evalstop_gym.view.JobView` and
:class:`~evalstop_gym.view.ClusterView` objects only, so an observation can
carry nothing the information boundary hides. The encoders are generic over a
list of job views: the single-agent envs pass a window of the cluster's jobs,
a multi-tenant env can pass one tenant's jobs.

Bounds are honest: every feature lies in the closed interval given by
:func:`job_bounds` / :func:`cluster_bounds`. Unbounded non-negative
quantities (hours, counts) are squashed with ``x / (x + scale)`` into
``[0, 1)``, which keeps their order and never clips; score-like quantities
are clipped to a documented range. Empty slots are all zeros (``present = 0``).
"""

from __future__ import annotations

import struct
from itertools import islice
from typing import Sequence

import numpy as np

from ..config import JOB_TYPES
from ..timebase import TICKS_PER_HOUR
from ..view import RUNNING, ClusterView, JobView

TIME_SCALE_H = 6.0      # hours; squash(x) = x / (x + 6): 6 h -> 0.5 (the median RLHF run)
COUNT_SCALE = 16.0      # jobs; 16 waiting jobs -> 0.5
MAX_DECLINES = 10       # consecutive declines are reported as min(d, 10) / 10
SCORE_RANGE = (-1.0, 2.0)  # observed eval scores (0..1 scale plus noise) are clipped to this
ITEMS_SCALE = 500.0     # eval items; squash(500) = 0.5 (MATH-500, IFEval size)

# name -> (low, high, meaning)
JOB_FEATURES: dict[str, tuple[float, float, str]] = {
    "present": (0.0, 1.0, "1 if the slot holds a job, else the whole row is 0"),
    **{f"type_{t}": (0.0, 1.0, f"job type is {t} (one-hot)") for t in JOB_TYPES},
    "running": (0.0, 1.0, "1 if running, 0 if waiting"),
    "decision": (0.0, 1.0, "1 for the job at the current eval checkpoint"),
    "gpus": (0.0, 1.0, "GPU demand / cluster GPUs"),
    "est_length": (0.0, 1.0, "squash(user's length estimate, h)"),
    "attained": (0.0, 1.0, "squash(attained service, h)"),
    "remaining_est": (0.0, 1.0, "squash(estimate - attained, floored at 0, h)"),
    "waiting": (0.0, 1.0, "squash(hours since submission not spent running)"),
    "progress": (0.0, 1.0, "eval checkpoints reached / checkpoints in the schedule"),
    "has_eval": (0.0, 1.0, "1 once the job has reached an eval checkpoint"),
    "last_score": (*SCORE_RANGE, "last observed eval score, clipped"),
    "best_score": (*SCORE_RANGE, "best observed eval score so far, clipped"),
    "drawdown": (0.0, SCORE_RANGE[1] - SCORE_RANGE[0], "best_score - last_score"),
    "delta_1": (-1.0, 1.0, "last change of the observed eval score, clipped (0 if undefined)"),
    "delta_2": (-1.0, 1.0, "the change before that"),
    "delta_3": (-1.0, 1.0, "the change before that"),
    "declines": (0.0, 1.0, f"min(consecutive declines, {MAX_DECLINES}) / {MAX_DECLINES}"),
    "loss_trend": (-1.0, 1.0, "relative change of training loss at the last checkpoint, clipped"),
    "proxy_trend": (-1.0, 1.0, "change of proxy reward at the last checkpoint (RLHF only), clipped"),
    "eval_items": (0.0, 1.0, f"squash(eval-set size, scale {ITEMS_SCALE:g}); 0 where the world does not "
                             "model it"),
    "eval_se": (0.0, 0.5, "sampling error of the last score, sqrt(p (1 - p) / eval-set size) with p the "
                          "score clipped to [0, 1]; 0 before the first eval or where the size is unknown"),
}

CLUSTER_FEATURES: dict[str, tuple[float, float, str]] = {
    "free_gpus": (0.0, 1.0, "free GPUs / cluster GPUs"),
    "running_jobs": (0.0, 1.0, "running jobs / cluster GPUs (each runs on >= 1 GPU)"),
    "waiting_jobs": (0.0, 1.0, f"squash(waiting jobs, scale {COUNT_SCALE:g})"),
    "waiting_gpus": (0.0, 1.0, "squash(GPUs demanded by waiting jobs / cluster GPUs, scale 1)"),
    "unseen_running": (0.0, 1.0, f"squash(running jobs not in the window, scale {COUNT_SCALE:g})"),
    "unseen_waiting": (0.0, 1.0, f"squash(waiting jobs not in the window, scale {COUNT_SCALE:g})"),
    "eval_point": (0.0, 1.0, "1 at an eval checkpoint decision"),
    "schedule_point": (0.0, 1.0, "1 at a scheduling decision"),
}

N_JOB = len(JOB_FEATURES)
N_CLUSTER = len(CLUSTER_FEATURES)
_ONE_HOT = {t: [1.0 if u == t else 0.0 for u in JOB_TYPES] for t in JOB_TYPES}


def job_bounds() -> tuple[np.ndarray, np.ndarray]:
    """``(low, high)`` float32 arrays of one job row."""
    lo, hi, _ = zip(*JOB_FEATURES.values())
    return np.array(lo, np.float32), np.array(hi, np.float32)


def cluster_bounds() -> tuple[np.ndarray, np.ndarray]:
    """``(low, high)`` float32 arrays of the cluster features."""
    lo, hi, _ = zip(*CLUSTER_FEATURES.values())
    return np.array(lo, np.float32), np.array(hi, np.float32)


def job_row(v: JobView, total_gpus: int, decision: bool = False) -> list[float]:
    """The features of one job, in :data:`JOB_FEATURES` order (plain floats), built from scratch
    (:class:`JobTable` keeps the rows of a whole episode and gives the same values)."""
    return [*_head(v, total_gpus, 1.0 if decision else 0.0), *_clock_part(v), *_tail(v, len(v.eval_scores))]


def _head(v: JobView, total_gpus: int, decision: float) -> tuple:
    """The columns of ``v``'s row before its clock columns, with its decision flag as given: what changes
    only when the job starts or is preempted."""
    est = v.est_length_h
    return (*_HEAD[v.job_type], 1.0 if v.status == RUNNING else 0.0, decision, v.gpus / total_gpus,
            est / (est + TIME_SCALE_H))


def _clock_part(v: JobView) -> tuple[float, float, float]:
    """The columns of ``v``'s row that move with the clock: squashed attained, remaining estimate and
    waiting hours.

    Attained and waiting ticks are :attr:`JobView.attained_ticks` and :attr:`JobView.waiting_ticks`, the
    same integer operations read from the view's fields in one pass instead of three property calls:
    this runs for every shown job at every instant (``tests/test_envs_step_info.py`` checks it against
    the properties)."""
    ts = TIME_SCALE_H
    est = v.est_length_h
    now = v._cluster.now_ticks
    a = v._service_ticks
    since = v._run_since_ticks
    if since is not None:
        a += now - since
    att = a / TICKS_PER_HOUR
    wait = (now - v.submit_ticks - a) / TICKS_PER_HOUR
    if wait < 0.0:  # float noise at the instant a job starts
        wait = 0.0
    rem = est - att if est > att else 0.0
    return att / (att + ts), rem / (rem + ts), wait / (wait + ts)


# the head of a row (present, the job type one-hot) by job type
_HEAD = {t: (1.0, *_ONE_HOT[t]) for t in JOB_TYPES}
_LO, _HI = SCORE_RANGE


def _tail(v: JobView, n: int) -> tuple:
    """The columns of ``v``'s row from ``progress`` on (``n`` evals seen): what stays the same between two of
    its eval checkpoints. Clipping is written out (``lo if x < lo else hi if x > hi else x``):
    this runs at every checkpoint of every job."""
    lo, hi = _LO, _HI
    if n:
        scores = v.eval_scores
        s = scores[-1]
        last = lo if s < lo else hi if s > hi else s
        b = max(scores)
        best = lo if b < lo else hi if b > hi else b
        d1 = d2 = d3 = 0.0
        if n > 1:
            x = s - scores[-2]
            d1 = -1.0 if x < -1.0 else 1.0 if x > 1.0 else x
            if n > 2:
                x = scores[-2] - scores[-3]
                d2 = -1.0 if x < -1.0 else 1.0 if x > 1.0 else x
                if n > 3:
                    x = scores[-3] - scores[-4]
                    d3 = -1.0 if x < -1.0 else 1.0 if x > 1.0 else x
            losses = v.train_losses
            prev = losses[-2]
            if prev != 0.0:
                x = (losses[-1] - prev) / abs(prev)
                loss_trend = -1.0 if x < -1.0 else 1.0 if x > 1.0 else x
            else:
                loss_trend = 0.0
        else:
            loss_trend = 0.0
        proxy = v.proxy_rewards
        if len(proxy) > 1:
            x = proxy[-1] - proxy[-2]
            proxy_trend = -1.0 if x < -1.0 else 1.0 if x > 1.0 else x
        else:
            proxy_trend = 0.0
        items = v.eval_items
        if items > 0:
            p = 0.0 if s < 0.0 else 1.0 if s > 1.0 else s
            se = (p * (1.0 - p) / items) ** 0.5
        else:
            se = 0.0
        has = 1.0
    else:
        last = best = d1 = d2 = d3 = loss_trend = proxy_trend = se = has = 0.0
        items = v.eval_items
    cd = v.consecutive_declines
    return (n / v.evals_total, has, last, best, best - last, d1, d2, d3,
            (cd if cd < MAX_DECLINES else MAX_DECLINES) / MAX_DECLINES, loss_trend, proxy_trend,
            items / (items + ITEMS_SCALE), se)


def job_rows(views: Sequence[JobView], slots: int, total_gpus: int,
             decision_id: int | None = None) -> list[float]:
    """Flat features of the first ``slots`` of ``views`` (no padding: see :func:`observation`)."""
    out: list[float] = []
    for v in views[:slots]:
        out += job_row(v, total_gpus, v.job_id == decision_id)
    return out


def observation(views: Sequence[JobView], slots: int, total_gpus: int, cluster: list[float],
                decision_id: int | None = None) -> np.ndarray:
    """``slots`` job rows (empty rows all 0) then the ``cluster`` features, as one float32 vector
    (:class:`JobTable` keeps the rows between steps)."""
    obs = np.zeros(slots * N_JOB + len(cluster), np.float32)
    rows = job_rows(views, slots, total_gpus, decision_id)
    obs[:len(rows)] = rows
    obs[slots * N_JOB:] = cluster
    return obs


# columns of a job row that JobTable writes at every observation (the rest change only at the job's
# checkpoints, starts and preemptions); attained, remaining_est and waiting are adjacent
_RUNNING = list(JOB_FEATURES).index("running")
_DECISION = list(JOB_FEATURES).index("decision")
_TIMED = list(JOB_FEATURES).index("attained")
if list(JOB_FEATURES)[_TIMED:_TIMED + 3] != ["attained", "remaining_est", "waiting"] or _RUNNING >= _TIMED:
    raise RuntimeError("JobTable writes attained, remaining_est and waiting as three adjacent columns after running")

# a row's bytes (float32, native order; float64 -> float32 by a C cast, as NumPy's): the columns before the
# clock columns, the clock columns, the columns after them
_PACK_HEAD = struct.Struct(f"={_TIMED}f").pack
_PACK_CLOCK = struct.Struct("=3f").pack
_PACK_TAIL = struct.Struct(f"={N_JOB - _TIMED - 3}f").pack
_F32 = {x: struct.pack("=f", x) for x in (0.0, 1.0)}
_ROW_BYTES = 4 * N_JOB


class JobTable:
    """The job rows of one episode, kept per job and read again only where a job changed.

    Each job's row is kept as float32 bytes: the columns before its clock columns (:func:`_clock_part`:
    attained, remaining estimate, waiting), those, and the columns after them. The clock columns are
    computed once per instant and job, for the jobs shown. An observation joins the rows of the shown
    jobs and writes them into its slots in one memory copy, zeroes the slots emptied since the last one
    and writes the ``extra`` (cluster) features only if they changed.

    The driver calls :meth:`update` when a job reaches an eval checkpoint and :meth:`moved` when it
    starts or is preempted. Jobs that arrived since the last observation are read from their views:
    arrivals enter the waiting queue last, and only :meth:`~evalstop_gym.simulator.Simulator.advance`
    makes them. Every value is :func:`job_row`'s (the same float64 operations, then float32). Call
    :meth:`reset` at each episode.
    """

    def __init__(self, slots: int, n_extra: int):
        self.slots = slots
        self._buf = np.zeros(slots * N_JOB + n_extra, np.float32)
        self._copy = True       # an observation is a fresh array (write_into: the buffer itself)
        self._views_of_buffers()

    def write_into(self, buf: np.ndarray) -> None:
        """Build every observation in ``buf`` (float32, C-contiguous, the observation's length; a row of a
        vector env's batch) and return ``buf`` itself instead of a copy: its caller copies it out."""
        if buf.dtype != np.float32 or buf.shape != self._buf.shape or not buf.flags.c_contiguous:
            raise ValueError(f"write_into needs a C-contiguous float32 array of shape {self._buf.shape}, "
                             f"got {buf.dtype} {buf.shape}")
        buf[:] = self._buf
        self._buf, self._copy = buf, False
        self._views_of_buffers()

    def _views_of_buffers(self) -> None:
        # the buffer as flat float32 values and as bytes: a value or the shown rows are written without a
        # NumPy call; the extra features are packed by a Struct (float64 -> float32 by a C cast, as NumPy's)
        self._mv = memoryview(self._buf)
        self._bytes = self._mv.cast("B")
        self._pack_extra = struct.Struct(f"={len(self._buf) - self.slots * N_JOB}f").pack_into

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("_mv", "_bytes", "_pack_extra")}

    def __setstate__(self, state: dict) -> None:  # memoryviews and bound methods of a Struct do not pickle
        self.__dict__.update(state)
        self._views_of_buffers()

    def reset(self, views: list, total_gpus: int) -> None:
        """A new episode over ``views`` (the simulator's list of job views, ``None`` before arrival)."""
        n = len(views)
        self._views, self._total = views, total_gpus
        self._head = [b""] * n  # per job: the bytes of the columns before the clock columns, decision 0
        self._tail = [b""] * n  # the bytes of the columns after them
        self._row = [b""] * n   # the whole row, clock columns as at _at
        self._at = [-1] * n     # the tick at which each job's clock columns were computed (-1: to compute)
        self._shown = 0         # bytes of the buffer holding rows
        self._extra: list[float] = []
        self._arrived = 0
        self._buf[:] = 0.0

    def update(self, v: JobView) -> None:
        """Read job ``v``'s view again (a new job, or one at a new eval checkpoint)."""
        j = v.job_id
        if not self._head[j]:  # a new job; at a checkpoint a job runs, and moved() keeps its head
            self._head[j] = _PACK_HEAD(*_head(v, self._total, 0.0))
        self._tail[j] = _PACK_TAIL(*_tail(v, len(v.eval_scores)))
        self._at[j] = -1  # clock columns: at the next call

    def moved(self, v: JobView) -> None:
        """Job ``v`` started or was preempted."""
        j, c = v.job_id, 4 * _RUNNING
        h = self._head[j]
        self._head[j] = h[:c] + _F32[1.0 if v.status == RUNNING else 0.0] + h[c + 4:]
        self._at[j] = -1

    def __call__(self, cluster: ClusterView, ids: list[int], extra: list[float],
                 decision: bool = False) -> np.ndarray:
        """The observation of the window ``ids`` (job ids in slot order; ``decision``: slot 0 is the job at
        an eval checkpoint) on ``cluster``, then the ``extra`` features."""
        waiting, views = cluster.waiting, self._views
        arrived = len(cluster.running) + len(waiting) + cluster.finished
        if arrived != self._arrived:
            for j in islice(reversed(waiting), arrived - self._arrived):
                self.update(views[j])
            self._arrived = arrived
        now, at, row = cluster.now_ticks, self._at, self._row
        for j in ids:
            if at[j] != now:
                at[j] = now
                row[j] = self._head[j] + _PACK_CLOCK(*_clock_part(views[j])) + self._tail[j]
        o = _ROW_BYTES * len(ids)
        self._bytes[:o] = b"".join([row[j] for j in ids])
        if o < self._shown:
            self._bytes[o:self._shown] = bytes(self._shown - o)
        self._shown = o
        if decision:
            self._mv[_DECISION] = 1.0
        if extra != self._extra:
            self._pack_extra(self._mv, self.slots * _ROW_BYTES, *extra)
            self._extra = extra
        return self._buf.copy() if self._copy else self._buf


def cluster_row(cluster: ClusterView, shown_running: int = 0, shown_waiting: int = 0,
                eval_point: bool = False, schedule_point: bool = False, waiting_gpus: int | None = None) -> list[float]:
    """The cluster features, in :data:`CLUSTER_FEATURES` order.

    ``shown_running`` / ``shown_waiting``: how many running / waiting jobs the
    observation already shows in its job rows (the rest count as unseen).
    ``waiting_gpus``: the GPUs the waiting jobs demand, if the caller has summed them already.
    """
    g = cluster.total_gpus
    nw = len(cluster.waiting)
    if waiting_gpus is None:
        waiting_gpus = sum([v.gpus for v in cluster.waiting.values()]) if nw else 0  # often none waits
    wg = waiting_gpus / g
    ur = len(cluster.running) - shown_running
    uw = nw - shown_waiting
    cs = COUNT_SCALE
    return [cluster.free_gpus / g, len(cluster.running) / g, nw / (nw + cs), wg / (wg + 1.0),
            ur / (ur + cs), uw / (uw + cs), 1.0 if eval_point else 0.0, 1.0 if schedule_point else 0.0]


def window_ids(cluster: ClusterView, slots: int, first: int | None = None) -> tuple[list[int], int]:
    """The ids of :func:`window` and how many of them (a prefix) are running: ``first`` (the id of the
    job at an eval checkpoint, a running job) counts as running."""
    running, waiting = cluster.running, cluster.waiting
    if len(running) + len(waiting) <= slots:  # every active job is shown (the usual case): in the same order
        if first is None:
            return [*running, *waiting], len(running)
        if first in running:
            return [first, *[j for j in running if j != first], *waiting], len(running)
    out = [first] if first is not None else []
    free = slots - len(out)
    run = list(running)
    if first in running:
        run.remove(first)
    n_run = min(len(run), max(free // 2, free - len(waiting)))
    out += run[:n_run]
    n_run = len(out)
    free = slots - n_run
    if free > 0 and waiting:
        out += waiting if len(waiting) <= free else islice(waiting, free)
    return out, n_run


def window(cluster: ClusterView, slots: int, first: JobView | None = None) -> list[JobView]:
    """Up to ``slots`` active jobs in the documented slot order.

    ``first`` (the job at an eval checkpoint), if given, takes slot 0. Then
    running jobs take up to ``max(free // 2, free - waiting)`` of the ``free``
    remaining slots, so both kinds stay visible when both are plentiful and no
    slot is left empty while jobs are hidden; waiting jobs fill the rest.
    Within each kind, jobs keep the order in which they entered that state.
    """
    ids, n_run = window_ids(cluster, slots, None if first is None else first.job_id)
    running, waiting = cluster.running, cluster.waiting
    out = [running[j] for j in ids[:n_run]] if first is None else [first, *(running[j] for j in ids[1:n_run])]
    out += [waiting[j] for j in ids[n_run:]]
    return out


def feature_names(slots: int, spec=None) -> list[str]:
    """Names of the flat observation entries: ``slot{i}.{feature}``, ``cluster.{feature}``, then
    on a cluster of nodes (``spec``) the node block (:func:`topology_names`)."""
    return [f"slot{i}.{f}" for i in range(slots) for f in JOB_FEATURES] + \
        [f"cluster.{f}" for f in CLUSTER_FEATURES] + \
        (topology_names(spec, slots) if topology_shape(spec) else [])


# -- nodes (clusters of several nodes or GPU types; absent on the flat pool) --------
# the node block: free GPUs / GPUs per node for every node, then these per slot (high of speed: the spec's top)
TOPOLOGY_SLOT_FEATURES: dict[str, str] = {
    "spread": "1 if the job runs spread over more nodes than it needs, else 0",
    "speed": "the job's speed on its nodes (0 for waiting jobs and empty slots)",
}
N_TOPO_SLOT = len(TOPOLOGY_SLOT_FEATURES)
_NO_TOPO_SLOT = (0.0,) * N_TOPO_SLOT  # a waiting job or an empty slot


def topology_shape(spec) -> int | None:
    """Nodes shown in the node block of a cluster spec's observations; None on the flat pool."""
    return None if spec is None or spec.trivial else spec.nodes


def topology_bounds(spec, slots: int) -> tuple[np.ndarray, np.ndarray]:
    """``(low, high)`` of the node block: free GPUs per node, then per slot :data:`TOPOLOGY_SLOT_FEATURES`."""
    top = max([1.0, *(float(spec.speed(t, j)) for t in spec.gpu_types for j in JOB_TYPES)])
    high = {"spread": 1.0, "speed": top}
    lo = np.zeros(spec.nodes + N_TOPO_SLOT * slots, np.float32)
    hi = np.concatenate([np.ones(spec.nodes), np.tile([high[f] for f in TOPOLOGY_SLOT_FEATURES], slots)])
    return lo, hi.astype(np.float32)


def topology_row(cluster: ClusterView, views: Sequence[JobView], slots: int) -> list[float]:
    """Free GPUs / GPUs per node, for each node; then, per slot, :data:`TOPOLOGY_SLOT_FEATURES` in order."""
    per = cluster.spec.gpus_per_node
    out = [f / per for f in cluster.node_free]
    for v in views[:slots]:
        if v.nodes is None:
            out += _NO_TOPO_SLOT
        else:  # in _ROW_ORDER
            out += (1.0 if len(v.nodes) > -(-v.gpus // per) else 0.0, cluster.job_speed(v))
    out += _NO_TOPO_SLOT * (slots - min(len(views), slots))
    return out


# topology_row writes a slot's values as one tuple, cheaper than looking each up by name; its order must be
# the one the names and bounds take from TOPOLOGY_SLOT_FEATURES
_ROW_ORDER = ("spread", "speed")
if tuple(TOPOLOGY_SLOT_FEATURES) != _ROW_ORDER:
    raise RuntimeError(f"topology_row writes {_ROW_ORDER}, TOPOLOGY_SLOT_FEATURES names "
                       f"{tuple(TOPOLOGY_SLOT_FEATURES)}")


def topology_names(spec, slots: int) -> list[str]:
    return [f"node{n}.free_gpus" for n in range(spec.nodes)] + \
        [f"slot{i}.{f}" for i in range(slots) for f in TOPOLOGY_SLOT_FEATURES]
