"""Running jobs in priority order, kept across scheduling points.

A preemptive scheduler ranks running jobs against waiting ones at every
scheduling point. When a running job's priority can be written as
``key_at(K, cluster)`` with ``K`` fixed while the job runs (SRTF-Est: the
estimate minus attained service plus the clock is constant while the job
runs) and ``key_at`` non-decreasing in ``K``, the running jobs need no
re-keying: they stay sorted by ``K`` from their start to their preemption or
end. This keeps them so; the allocator in :mod:`evalstop_gym.policy` then
reads it at a few positions per scheduling point instead of keying every job.

It learns about changes from the cluster alone, like
:class:`~evalstop_gym.waiting_queue.WaitingQueue`: ``ClusterView.running`` is in
start order, so jobs started since the last call are its tail; a run is
identified by the job's ``queued_seq`` (the stamp of the queue entry it started
from), so a job preempted and restarted in between is a new run. Runs that
ended are not searched for (that would cost a pass over every running job):
their entries stay, *stale*, until a scan passes over them or they make up half
of the list, when it is rebuilt. Every count of GPUs it gives is over valid
entries only.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Callable

from .view import ClusterView, JobView

_PAST_END = -(1 << 62)  # below -position of any entry
_ALL = float("inf")     # more GPUs than any scan can count


class RunningOrder:
    """The running jobs of one episode ordered by ``(K, start order)``, with stale entries.

    ``entries[i]`` is ``(K, seq, job_id, view, queued_seq)``; ``seq`` increases
    with the job's position in ``ClusterView.running`` (its start order), which
    is how the sorting allocator breaks ties. ``keys[i]`` is ``entries[i][0]``.

    GPU counts are suffix sums, gathered from the end of the list: the
    allocator only ever asks how a few GPUs' worth of the lowest-ranked
    running jobs compares with what waiting jobs need, so a question costs about
    as many steps as the GPUs it is about, not one per running job. The answers
    gathered in one scheduling point are kept until the next :meth:`sync`.
    """

    def __init__(self, running_key: Callable[[JobView, ClusterView], object]):
        self._key = running_key
        self._cluster: ClusterView | None = None
        self.entries: list[tuple] = []
        self.keys: list = []
        self._runs: dict[int, int] = {}  # job id -> queued_seq of its tracked run
        self._seq = 0
        self._reset_scan()

    def _reset_scan(self) -> None:
        # entries[_scan:] are scanned; the valid ones are in the two lists below, after a first item that
        # stands for "past the end" (no position, 0 GPUs), so no lookup needs a case for "none scanned"
        self._scan = len(self.entries)
        self._tail_neg_pos: list[int] = [_PAST_END]  # -position of each valid scanned entry (increasing)
        self._tail_sum: list[int] = [0]  # GPUs of the valid entries from that one to the end (increasing)
        self._stale: list[int] = []         # positions of stale entries met by the scan

    def sync(self, cluster: ClusterView) -> None:
        """Bring the order up to date with ``cluster.running`` (new runs; stale ones stay)."""
        if cluster is not self._cluster:  # a new episode
            self._cluster, self._runs, self._seq, self.entries, self.keys = cluster, {}, 0, [], []
            self._reset_scan()
        if self._stale:
            self._purge()
        running, runs = cluster.running, self._runs
        new = []
        for v in reversed(running.values()):
            if runs.get(v.job_id) == v.queued_seq:
                break  # every job before it was running, in the same run, at the last call
            new.append(v)
        entries, keys = self.entries, self.keys
        for v in reversed(new):
            self._seq += 1
            k = self._key(v, cluster)
            i = bisect_right(keys, k)  # after every equal K: their seq are all smaller
            entries.insert(i, (k, self._seq, v.job_id, v, v.queued_seq))
            keys.insert(i, k)
            runs[v.job_id] = v.queued_seq
        if len(entries) > 2 * len(running) + 64:
            valid = [e for e in entries if running.get(e[2]) is e[3] and e[3].queued_seq == e[4]]  # valid(e)
            self.entries, self.keys = valid, [e[0] for e in valid]
            self._runs = {e[2]: e[4] for e in valid}
        self._reset_scan()

    def valid(self, e: tuple) -> bool:
        """True if ``e`` is a run still going on (not preempted, stopped or completed since)."""
        return self._cluster.running.get(e[2]) is e[3] and e[3].queued_seq == e[4]

    def _extend(self, k: int, x: int) -> None:
        """Scan from the end until the valid entries at positions >= ``k`` are all seen or hold ``x`` GPUs."""
        entries, neg, sums, stale = self.entries, self._tail_neg_pos, self._tail_sum, self._stale
        acc = sums[-1]
        scan = self._scan
        running = self._cluster.running
        while acc < x and scan > k:
            scan -= 1
            e = entries[scan]
            if running.get(e[2]) is e[3] and e[3].queued_seq == e[4]:  # valid(e), inlined: the hot loop
                acc += e[3].gpus
                neg.append(-scan)
                sums.append(acc)
            else:
                stale.append(scan)
        self._scan = scan

    def gpus_from(self, k: int, cap: int) -> int:
        """``min(S, cap)``, where ``S`` is the GPUs held by the running jobs at positions ``>= k``."""
        sums = self._tail_sum
        if self._scan > k and sums[-1] < cap:  # else _extend would not move
            self._extend(k, cap)
        if self._scan > k:  # the scan stopped early: S >= what it counted >= cap
            return cap
        s = sums[bisect_right(self._tail_neg_pos, -k) - 1]  # the valid entries at positions >= k hold s
        return s if s < cap else cap

    def fits(self, g: int, k: int, base: int) -> bool:
        """True if ``g`` GPUs fit in ``base`` GPUs plus those of the running jobs at positions ``>= k``."""
        return g <= base or self.gpus_from(k, g - base) >= g - base

    def group(self, m: int, key_at: Callable) -> tuple[int, int, object]:
        """``(a, b, key)``: the positions ``a..b-1`` of the entries whose key ``key_at(K)`` equals entry ``m``'s."""
        keys = self.keys
        gk = key_at(keys[m])
        a = m if m == 0 or key_at(keys[m - 1]) < gk else bisect_left(keys, gk, 0, m - 1, key=key_at)
        n = len(keys)
        b = m + 1 if m + 1 == n or key_at(keys[m + 1]) > gk else bisect_right(keys, gk, m + 2, n, key=key_at)
        return a, b, gk

    def reach(self, x: int) -> int:
        """Position of the valid entry at which the GPUs counted from the end first reach ``x`` (>= 1).

        The caller knows the running jobs hold at least ``x`` GPUs.
        """
        sums = self._tail_sum
        if sums[-1] < x:  # else the scan has counted x GPUs already
            self._extend(0, x)
        t = bisect_left(sums, x)
        return -self._tail_neg_pos[t]

    def valid_from(self, k: int) -> list[tuple]:
        """The valid entries at positions ``>= k`` (scans them all: for short tails)."""
        if self._scan > k:
            self._extend(k, _ALL)
        t = bisect_right(self._tail_neg_pos, -k)
        entries = self.entries
        return [entries[-p] for p in self._tail_neg_pos[1:t]]

    def _purge(self) -> None:
        """Drop the stale entries the last scan met (positions are still those of that scan)."""
        for i in self._stale:  # met in decreasing order (scans only move towards the front), so
            del self.entries[i], self.keys[i]  # each deletion leaves the positions still to go as they were
        self._stale = []
