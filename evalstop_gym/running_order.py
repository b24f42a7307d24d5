"""Running jobs in priority order, kept across scheduling points.

A preemptive scheduler ranks running jobs against waiting ones at every
scheduling point. When a running job's priority can be written as
``key_at(K, cluster)`` with ``K`` fixed while the job runs (SRTF-Est: the
estimate minus attained service plus the clock is constant while the job
runs) and ``key_at`` non-decreasing in ``K``, the running jobs need no
re-keying: they stay sorted by ``K`` from their start to their preemption or
end. This keeps them so, with prefix sums of their GPU demands, which let the
allocator in :mod:`evalstop_gym.policy` skip over the long runs of running jobs
that simply keep their GPUs.

It learns about changes from the cluster alone, like
:class:`~evalstop_gym.waiting_queue.WaitingQueue`: ``ClusterView.running`` is in
start order, so jobs started since the last call are its tail; a run is
identified by the job's ``queued_seq`` (the stamp of the queue entry it started
from), so a job preempted and restarted in between is a new run; jobs that left
are found only when the count says some did.
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import accumulate
from typing import Callable

from .view import ClusterView, JobView


class RunningOrder:
    """The running jobs of one episode ordered by ``(K, start order)``.

    ``entries[i]`` is ``(K, seq, job_id, view)``; ``seq`` increases with the
    job's position in ``ClusterView.running`` (its start order), which is how
    the sorting allocator breaks ties. ``cum[i]`` is the total GPU demand of
    ``entries[:i]``.
    """

    def __init__(self, running_key: Callable[[JobView, ClusterView], object]):
        self._key = running_key
        self._cluster: ClusterView | None = None
        self.entries: list[tuple] = []
        self.keys: list = []                # entries[i][0], for bisection
        self.gpus: list[int] = []           # entries[i][3].gpus
        self._cum: list[int] | None = None  # None: to recompute
        self._runs: dict[int, tuple] = {}   # job id -> (queued_seq of its run, entry)
        self._ids: set[int] = set()         # its keys, kept as a set: set.difference is the fast scan
        self._seq = 0

    def sync(self, cluster: ClusterView) -> None:
        """Bring the order up to date with ``cluster.running``."""
        if cluster is not self._cluster:  # a new episode
            self._cluster, self._runs, self._ids, self._seq = cluster, {}, set(), 0
            self.entries, self.keys, self.gpus, self._cum = [], [], [], None
        running, runs = cluster.running, self._runs
        new = []
        for v in reversed(running.values()):
            run = runs.get(v.job_id)
            if run is not None and run[0] == v.queued_seq:
                break  # every job before it was running, in the same run, at the last call
            new.append(v)
        for v in reversed(new):
            old = runs.get(v.job_id)
            if old is not None:
                self._remove(v.job_id)  # preempted and restarted since the last call
            self._seq += 1
            e = (self._key(v, cluster), self._seq, v.job_id, v)
            i = bisect_left(self.entries, e[:2])  # (K, seq) is unique: views are never compared
            self.entries.insert(i, e)
            self.keys.insert(i, e[0])
            self.gpus.insert(i, v.gpus)
            runs[v.job_id] = (v.queued_seq, e)
            self._ids.add(v.job_id)
        if new:
            self._cum = None
        if len(runs) != len(running):  # some jobs were preempted or ended
            for j in self._ids.difference(running):
                self._remove(j)

    def _remove(self, job_id: int) -> None:
        _, e = self._runs.pop(job_id)
        self._ids.discard(job_id)
        i = bisect_left(self.entries, e[:2])
        del self.entries[i], self.keys[i], self.gpus[i]
        self._cum = None

    @property
    def cum(self) -> list[int]:
        """``cum[i]``: GPUs held by ``entries[:i]`` (``len(entries) + 1`` values)."""
        if self._cum is None:
            self._cum = list(accumulate(self.gpus, initial=0))
        return self._cum
