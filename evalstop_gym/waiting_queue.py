"""Waiting jobs in priority order, kept across scheduling points.

For schedulers whose key of a job never changes while the job waits (FIFO,
SJF-Est, SRTF-Est, LossAware), re-sorting the whole queue at every scheduling
point makes an episode cost grow with (jobs x queue length). This keeps one heap
per GPU demand instead, so picking the best job that fits in ``free`` GPUs
looks only at the heads of the demand classes that fit.

It learns about new waiting jobs from ``JobView.queued_seq`` (a public stamp
the simulator gives a job each time it enters the queue; ``ClusterView.waiting``
is in stamp order). Stale entries (jobs that started, were stopped, or came
back with a new stamp) are popped when they are at a head, at :meth:`sync` and
after :meth:`take`, and only while the count of stale entries (entries held
less waiting jobs, counted at each sync) says some are left.
"""

from __future__ import annotations

import heapq
from typing import Callable

from .simulator import SimulationError
from .view import ClusterView, JobView


class WaitingQueue:
    """The waiting jobs of one episode ordered by ``(key, queued_seq)``.

    Every waiting job has exactly one valid entry in the heaps (or among the
    entries a plan took, until they are put back); the other entries are
    stale. So the stale entries number the entries held less the waiting
    jobs, and while there are none no head needs checking. Some are left
    only when a job leaves the queue while its entry is held: a driver
    starting or stopping waiting jobs outside the plans, or, on nodes, a
    start whose entry went back for the backfilling walk, which did not take it.
    """

    def __init__(self, key: Callable[[JobView, ClusterView], object]):
        self._key = key
        self._cluster: ClusterView | None = None
        self._heaps: dict[int, list] = {}
        self._classes: list[tuple[int, list]] = []  # (gpus, heap), by demand: best() stops early
        self._newest = -1
        self._taken: list[tuple] = []  # entries taken by the last plan, not yet put back
        self._held = 0   # entries in the heaps
        self._stale = 0  # of which stale, as counted at the last sync (less those dropped since)

    def sync(self, cluster: ClusterView) -> None:
        """Add the jobs that entered the queue since the last call, and drop stale heads.

        The cluster does not change until the next call, so every head stays
        a waiting job's until :meth:`take` removes it: :meth:`best` then
        compares heads without checking them again.
        """
        if cluster is not self._cluster:  # a new episode
            self._cluster, self._heaps, self._classes, self._newest, self._taken = cluster, {}, [], -1, []
            self._held = 0
        waiting, heaps = cluster.waiting, self._heaps
        if self._taken:  # what the last plan took goes back if its job still waits (that plan was not applied)
            for e in self._taken:
                if waiting.get(e[2]) is e[3] and e[3].queued_seq == e[1]:
                    heapq.heappush(heaps[e[3].gpus], e)
                    self._held += 1
            self._taken = []
        new = []
        for v in reversed(waiting.values()):
            if v.queued_seq <= self._newest:
                break
            new.append(v)
        if new:
            self._newest = new[0].queued_seq
            key = self._key
            for v in new:
                heap = heaps.get(v.gpus)
                if heap is None:
                    heap = heaps[v.gpus] = []
                    self._classes.append((v.gpus, heap))
                    self._classes.sort(key=lambda c: c[0])
                heapq.heappush(heap, (key(v, cluster), v.queued_seq, v.job_id, v))
            self._held += len(new)
        self._stale = self._held - len(waiting)
        if self._stale < 0:  # a waiting job without an entry would never be picked again
            raise SimulationError(f"the waiting queue holds {self._held} entries for {len(waiting)} waiting jobs: "
                                  "entries a plan took were neither applied nor put back")
        if self._stale:  # jobs left the queue while their entries were held (class docstring)
            for _, heap in self._classes:
                self._drop_stale(heap)

    def _drop_stale(self, heap: list) -> None:
        """Pop the head of ``heap`` while it is stale (its job left the queue since it was pushed)."""
        waiting = self._cluster.waiting
        while heap:
            e = heap[0]
            if waiting.get(e[2]) is e[3] and e[3].queued_seq == e[1]:
                return
            heapq.heappop(heap)
            self._held -= 1
            self._stale -= 1

    def largest_demand(self) -> int:
        """The GPUs of the largest waiting job (0 if none waits)."""
        for gpus, heap in reversed(self._classes):
            if heap:
                return gpus
        return 0

    def best(self, free: int) -> tuple | None:
        """The best entry ``(key, seq, job_id, view)`` among jobs needing <= ``free`` GPUs, if any."""
        best = None
        for gpus, heap in self._classes:
            if gpus > free:
                break
            if heap and (best is None or heap[0] < best):
                best = heap[0]
        return best

    def take(self, entry: tuple) -> None:
        """Remove ``entry`` (as returned by :meth:`best`) from its heap."""
        heap = self._heaps[entry[3].gpus]
        heapq.heappop(heap)
        self._held -= 1
        if self._stale:
            self._drop_stale(heap)

    def put_back(self, entries: list[tuple]) -> None:
        """Return taken entries: if a plan is not applied, its jobs still wait in order.

        They go back at the next :meth:`sync`, and only those whose jobs still
        wait then: the entry of a job the plan started is never pushed again
        only to be dropped as stale at the next scheduling point.
        """
        self._taken += entries
