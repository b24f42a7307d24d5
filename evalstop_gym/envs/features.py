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


def _clip(x: float, lo: float, hi: float) -> float:
    return lo if x < lo else hi if x > hi else x


def job_row(v: JobView, total_gpus: int, decision: bool = False, cache: dict | None = None,
            now_ticks: int | None = None) -> list[float]:
    """The features of one job, in :data:`JOB_FEATURES` order (plain floats).

    ``cache`` (a dict the caller keeps for one episode): the parts of the row
    that change only at the job's eval checkpoints are computed once per
    checkpoint instead of at every step, and the whole row once per instant
    and state (the sub-steps of a scheduling decision share an instant); it
    needs ``now_ticks``, the cluster's clock.
    """
    n = len(v.eval_scores)
    parts = cache.get(v.job_id) if cache is not None else None
    if parts is None or parts[0] != n:
        parts = _checkpoint_parts(v, total_gpus, n)
        if cache is not None:
            cache[v.job_id] = parts
    running = v.status == RUNNING
    if cache is not None and parts[4] == (now_ticks, running, decision):  # same instant and state: same row
        return parts[5]
    _, head, est, tail, _, _ = parts
    ts = TIME_SCALE_H
    ticks = v.attained_ticks
    att = ticks / TICKS_PER_HOUR
    wait = v.waiting_h if now_ticks is None else (now_ticks - v.submit_ticks - ticks) / TICKS_PER_HOUR
    if wait < 0.0:  # float noise at the instant a job starts
        wait = 0.0
    rem = est - att if est > att else 0.0
    row = [*head, 1.0 if running else 0.0, 1.0 if decision else 0.0, v.gpus / total_gpus,
           est / (est + ts), att / (att + ts), rem / (rem + ts), wait / (wait + ts), *tail]
    if cache is not None:
        cache[v.job_id] = (n, head, est, tail, (now_ticks, running, decision), row)
    return row


def _checkpoint_parts(v: JobView, total_gpus: int, n: int) -> tuple:
    """``(evals seen, the row's head, the estimate in hours, the row's tail)``: what stays the same
    between two eval checkpoints of ``v``."""
    scores = v.eval_scores
    lo_s, hi_s = SCORE_RANGE
    if n:
        last = _clip(scores[-1], lo_s, hi_s)
        best = _clip(max(scores), lo_s, hi_s)
        d = [_clip(scores[-i] - scores[-i - 1], -1.0, 1.0) if n > i else 0.0 for i in (1, 2, 3)]
        losses = v.train_losses
        prev = losses[-2] if n > 1 else 0.0
        loss_trend = _clip((losses[-1] - prev) / abs(prev), -1.0, 1.0) if n > 1 and prev != 0.0 else 0.0
        proxy = v.proxy_rewards
        proxy_trend = _clip(proxy[-1] - proxy[-2], -1.0, 1.0) if len(proxy) > 1 else 0.0
    else:
        last = best = 0.0
        d = [0.0, 0.0, 0.0]
        loss_trend = proxy_trend = 0.0
    cd = v.consecutive_declines
    items = v.eval_items
    if items > 0 and n:
        p = _clip(scores[-1], 0.0, 1.0)
        se = (p * (1.0 - p) / items) ** 0.5
    else:
        se = 0.0
    tail = (n / v.evals_total, 1.0 if n else 0.0, last, best, best - last, d[0], d[1], d[2],
            (cd if cd < MAX_DECLINES else MAX_DECLINES) / MAX_DECLINES, loss_trend, proxy_trend,
            items / (items + ITEMS_SCALE), se)
    return n, (1.0, *_ONE_HOT[v.job_type]), v.est_length_h, tail, None, None


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
    (:class:`ObservationWriter` keeps one between steps)."""
    obs = np.zeros(slots * N_JOB + len(cluster), np.float32)
    rows = job_rows(views, slots, total_gpus, decision_id)
    obs[:len(rows)] = rows
    obs[slots * N_JOB:] = cluster
    return obs


class ObservationWriter:
    """:func:`observation` for one env, kept between steps: a job's row is written again only when it
    changed (a new instant, a start or preemption, a checkpoint; :func:`job_row`'s ``cache``), so a
    sub-step at the same instant costs the rows it changed. Call :meth:`reset` at each episode."""

    def __init__(self, slots: int, n_cluster: int):
        self.slots = slots
        self._buf = np.zeros(slots * N_JOB + n_cluster, np.float32)
        self.reset()

    def reset(self) -> None:
        self._buf[:] = 0.0
        self._rows: list = [None] * self.slots  # the row object written in each slot
        self.cache: dict = {}

    def __call__(self, views: Sequence[JobView], total_gpus: int, now_ticks: int, cluster: list[float],
                 decision_id: int | None = None) -> np.ndarray:
        buf, rows, cache = self._buf, self._rows, self.cache
        k = min(len(views), self.slots)
        for i in range(k):
            v = views[i]
            row = job_row(v, total_gpus, v.job_id == decision_id, cache, now_ticks)
            if rows[i] is not row:
                buf[i * N_JOB:(i + 1) * N_JOB] = row
                rows[i] = row
        for i in range(k, self.slots):
            if rows[i] is None:
                break
            buf[i * N_JOB:(i + 1) * N_JOB] = 0.0
            rows[i] = None
        buf[self.slots * N_JOB:] = cluster
        return buf.copy()


def cluster_row(cluster: ClusterView, *, shown_running: int = 0, shown_waiting: int = 0,
                eval_point: bool = False, schedule_point: bool = False) -> list[float]:
    """The cluster features, in :data:`CLUSTER_FEATURES` order.

    ``shown_running`` / ``shown_waiting``: how many running / waiting jobs the
    observation already shows in its job rows (the rest count as unseen).
    """
    g = cluster.total_gpus
    nw = len(cluster.waiting)
    wg = sum(v.gpus for v in cluster.waiting.values()) / g
    ur = len(cluster.running) - shown_running
    uw = nw - shown_waiting
    cs = COUNT_SCALE
    return [cluster.free_gpus / g, len(cluster.running) / g, nw / (nw + cs), wg / (wg + 1.0),
            ur / (ur + cs), uw / (uw + cs), 1.0 if eval_point else 0.0, 1.0 if schedule_point else 0.0]


def window(cluster: ClusterView, slots: int, first: JobView | None = None) -> list[JobView]:
    """Up to ``slots`` active jobs in the documented slot order.

    ``first`` (the job at an eval checkpoint), if given, takes slot 0. Then
    running jobs take up to ``max(free // 2, free - waiting)`` of the ``free``
    remaining slots, so both kinds stay visible when both are plentiful and no
    slot is left empty while jobs are hidden; waiting jobs fill the rest.
    Within each kind, jobs keep the order in which they entered that state.
    """
    out = [first] if first is not None else []
    free = slots - len(out)
    running = [v for v in cluster.running.values() if v is not first] if first is not None \
        else list(cluster.running.values())
    waiting = cluster.waiting
    n_run = min(len(running), max(free // 2, free - len(waiting)))
    out += running[:n_run]
    free -= n_run
    if free > 0 and waiting:
        if len(waiting) <= free:
            out += waiting.values()
        else:
            it = iter(waiting.values())
            out += [next(it) for _ in range(free)]
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
