"""The compiled episode: the simulator's event loop and the supported built-in policies in one numba function.

It is a transcription of :class:`~evalstop_gym.simulator.Simulator` driven by
:func:`~evalstop_gym.policy.drive`, for the policies listed in
:mod:`evalstop_gym.compiled.pairs`; the Python code stays the reference and the
tests compare the two outcome by outcome (``tests/test_compiled.py``). What
keeps them bit for bit equal:

* time is integer ticks in both, and every float the policies compare (keys in
  hours, eval scores) is computed by the same IEEE operations in the same
  order: ``int / int`` is a correctly rounded division in Python and here
  (both operands are exact in float64 below 2**53 ticks); no fastmath;
* events are ordered by the same unique ``(time, counter)`` keys, the counter
  bumped at the same pushes, arrivals first on equal times;
* plans are the sorting allocator's (:meth:`~evalstop_gym.policy.Scheduler._allocate_sorted`
  and :meth:`~evalstop_gym.policy.Scheduler._fill`), which the Python fast
  paths equal by their own tests: waiting jobs in ``(key, queue stamp)``
  order, running jobs before waiting ones on equal keys and among themselves
  in start order; preemptions applied before starts, in running order, and
  starts in the order the Python plan lists them.
* on nodes, placements are :meth:`~evalstop_gym.placement.Placer.place`'s
  general path (its fast paths equal it), preemptive plans are placed as
  :meth:`~evalstop_gym.policy.Scheduler._place_on_nodes` places them, and a
  run's rate is the exact fraction ``num / den`` of
  :meth:`~evalstop_gym.placement.Placer.run_facts`: event times
  ``ceil(work * den / num)`` and work ``ticks * num // den`` in int64, with a
  check that the product fits (else the status OVERFLOW and the Python path).

* the stop rules (the last part of this module) transcribe
  :class:`~evalstop_gym.policy.Stopper`'s warm-up and the rules of EvalStop,
  Patience, StopAtProgress, CUSUM, SmoothedDecline, DropTest and Divergence
  with their pooled noise estimates (:mod:`evalstop_gym.baselines.noise`) in
  the same operation order: sums left to right, ``max`` keeping the first of
  equal values, the pools' medians those of CPython's sorted lists (kept as two heaps).

* Tiresias keeps its own lists, heaps of due queue jumps and timer as its
  Python class does (the Tiresias section of this module): the same list moves
  at each scheduling point, the same walk, and its wake-up set as
  :meth:`~evalstop_gym.simulator.Simulator.set_timer` sets it, a heap entry
  that takes a counter as the Python path's does. Resume time
  (:attr:`~evalstop_gym.view.JobView.restore_ticks`), which its attained
  service leaves out, is kept per job as the views keep it.

Voided checkpoints stay in the heap until popped, as in Python; when the heap
is full they are dropped, which cannot reorder live events (their keys are
unique).

A job's history is read in place: its scores are ``obs[j * evals : j * evals + count]`` and its
proxy readings ``proxy[...]`` likewise (RLHF jobs). A stopper's parameters come as ``ip`` (integers)
and ``fp`` (floats), laid out by the ``I_*`` / ``F_*`` positions of :mod:`.pairs`. The noise pools
hold absolute second differences as two heaps per pool whose tops are its middle values (pool ``q``:
its lower half negated in ``pool[0, off[q]:off[q] + cnt[q, 0]]``, its upper half in ``pool[1, off[q]:
off[q] + cnt[q, 1]]``; :func:`_insort`), so the median is the one Python's sorted list gives: one pool per
eval-set size, then the pool of scores in units of their size's largest sampling error, then the proxy
pool.

Everything compiled is in this one module on purpose: numba's cache
(``cache=True``) is keyed on the source file of each function, not on the
files its callees come from, so a callee in another module could be served
from machine code built from its older version. The constants read from
:mod:`.pairs` and :mod:`~evalstop_gym.timebase` are frozen into the machine
code too: a change to them must come with a change to this file.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..timebase import TICKS_PER_HOUR
from .pairs import (CUSUM_CODE, DIVERGENCE_CODE, DROPTEST_CODE, EVALSTOP_CODE, F_DELTA, F_DRIFT, F_FAST_MIN_DROP,
                    F_FAST_Z, F_MIN_DROP, F_P, F_PROXY_Z, F_SIGMA, F_SQRT_SXX, F_SXX, F_THRESHOLD, F_WARMUP_PROGRESS,
                    F_TOLERANCE, F_X, F_Z, I_K, I_LAG, I_WARMUP, LOSSPLATEAU_CODE, NO_STOP_CODE, SMOOTHED_CODE,
                    STOPAT_CODE)
from .pairs import FIFO_CODE as FIFO
from .pairs import LOSSAWARE_CODE as LOSSAWARE
from .pairs import MAX_THROUGHPUT_CODE as MAX_THROUGHPUT
from .pairs import SJF_EST_CODE as SJF_EST
from .pairs import SRTF_EST_CODE as SRTF_EST
from .pairs import TIRESIAS_CODE as TIRESIAS

# job states
_NEW, _WAITING, _RUNNING, _ENDED = 0, 1, 2, 3
NEVER = np.int64(1 << 62)   # the tick of the "arrival" after the last one: later than any event
STALLED = 1                 # the kernel's status when jobs wait and nothing will happen


@njit(cache=True)
def _before(t1, s1, t2, s2):
    return t1 < t2 or (t1 == t2 and s1 < s2)


@njit(cache=True)
def _heap_push(ht, hs, hj, he, size, t, s, j, e):
    i = size
    while i > 0:
        p = (i - 1) >> 1
        if not _before(t, s, ht[p], hs[p]):
            break
        ht[i], hs[i], hj[i], he[i] = ht[p], hs[p], hj[p], he[p]
        i = p
    ht[i], hs[i], hj[i], he[i] = t, s, j, e
    return size + 1


@njit(cache=True)
def _sift_down(ht, hs, hj, he, size, i):
    t, s, j, e = ht[i], hs[i], hj[i], he[i]
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and _before(ht[c + 1], hs[c + 1], ht[c], hs[c]):
            c += 1
        if not _before(ht[c], hs[c], t, s):
            break
        ht[i], hs[i], hj[i], he[i] = ht[c], hs[c], hj[c], he[c]
        i = c
    ht[i], hs[i], hj[i], he[i] = t, s, j, e


@njit(cache=True)
def _heap_pop(ht, hs, hj, he, size):
    """Remove the root (read it before calling); returns the new size."""
    size -= 1
    if size > 0:
        ht[0], hs[0], hj[0], he[0] = ht[size], hs[size], hj[size], he[size]
        _sift_down(ht, hs, hj, he, size, np.int64(0))
    return size


@njit(cache=True)
def _drop_void(ht, hs, hj, he, size, epoch):
    """Keep the live checkpoints only, then restore the heap order."""
    k = np.int64(0)
    for i in range(size):
        if he[i] == epoch[hj[i]]:
            ht[k], hs[k], hj[k], he[k] = ht[i], hs[i], hj[i], he[i]
            k += 1
    for i in range(k // 2 - 1, -1, -1):
        _sift_down(ht, hs, hj, he, k, i)
    return k


@njit(cache=True)
def _less(a, ia, b, ib):
    """``a[ia] < b[ib]`` for keys of three floats (rows), compared as Python compares tuples."""
    for m in range(3):
        if a[ia, m] != b[ib, m]:
            return a[ia, m] < b[ib, m]
    return False


@njit(cache=True)
def _bisect(wk, wq, count, keys, kj, q):
    """The first waiting position whose ``(key, queue stamp)`` is not below ``(keys[kj], q)``."""
    lo, hi = 0, count
    while lo < hi:
        mid = (lo + hi) >> 1
        if _less(wk, mid, keys, kj) or (not _less(keys, kj, wk, mid) and wq[mid] < q):
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def _enqueue(wk, wq, wj, count, keys, q, j, g, demand):
    """Insert job ``j`` (of ``g`` GPUs, key ``keys[j]``, queue stamp ``q``) into the sorted waiting arrays;
    returns the new count.

    ``demand[g]``: waiting jobs of ``g`` GPUs; ``demand[0]``: the least demand of a waiting job (more GPUs than
    the cluster has when none waits), so a first-fit walk stops once no waiting job can fit.
    """
    demand[g] += 1
    if g < demand[0]:
        demand[0] = g
    pos = _bisect(wk, wq, count, keys, j, q)
    for m in range(count, pos, -1):
        wk[m, 0], wk[m, 1], wk[m, 2], wq[m], wj[m] = wk[m - 1, 0], wk[m - 1, 1], wk[m - 1, 2], wq[m - 1], wj[m - 1]
    wk[pos, 0], wk[pos, 1], wk[pos, 2], wq[pos], wj[pos] = keys[j, 0], keys[j, 1], keys[j, 2], q, j
    return count + 1


@njit(cache=True)
def _dequeue(wk, wq, wj, count, keys, j, q, g, demand):
    """Remove the entry ``(keys[j], q)`` of job ``j`` (of ``g`` GPUs) from the sorted waiting arrays; returns the
    new count (``demand``: :func:`_enqueue`)."""
    demand[g] -= 1
    if g == demand[0]:
        while demand[0] < demand.shape[0] - 1 and demand[demand[0]] == 0:
            demand[0] += 1
    for m in range(_bisect(wk, wq, count, keys, j, q), count - 1):
        wk[m, 0], wk[m, 1], wk[m, 2], wq[m], wj[m] = wk[m + 1, 0], wk[m + 1, 1], wk[m + 1, 2], wq[m + 1], wj[m + 1]
    return count - 1


@njit(cache=True)
def _run_at(run, count, run_key, run_stamp, key, stamp):
    """The first position of the running list whose ``(run_key, run_stamp)`` is not below ``(key, stamp)``."""
    lo, hi = 0, count
    while lo < hi:
        mid = (lo + hi) >> 1
        j = run[mid]
        if run_key[j] < key or (run_key[j] == key and run_stamp[j] < stamp):
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def _run_in(run, count, run_key, run_stamp, j):
    """Insert job ``j`` (its stamp the newest) into the running list; returns the new count."""
    pos = _run_at(run, count, run_key, run_stamp, run_key[j], run_stamp[j])
    for m in range(count, pos, -1):
        run[m] = run[m - 1]
    run[pos] = j
    return count + 1


@njit(cache=True)
def _run_out(run, count, run_key, run_stamp, j):
    """Remove job ``j`` from the running list; returns the new count."""
    for m in range(_run_at(run, count, run_key, run_stamp, run_key[j], run_stamp[j]), count - 1):
        run[m] = run[m + 1]
    return count - 1


@njit(cache=True)
def _push_checkpoint(ht, hs, hj, he, size, epoch, now, j, c, grid, evals, overhead, service, seq):
    """Push job ``j``'s checkpoint ``c`` (1-based) with counter ``seq``: due when its service reaches the grid
    point plus the resume costs paid. Drops voided entries first if the heap is full; returns the new size."""
    target = grid[j * evals + c - 1]
    if size == ht.shape[0]:
        size = _drop_void(ht, hs, hj, he, size, epoch)
    return _heap_push(ht, hs, hj, he, size, now + target + overhead[j] - service[j], seq, j, epoch[j])


@njit(cache=True)
def _attained(j, now, service, run_since, status):
    if status[j] == _RUNNING:
        return service[j] + (now - run_since[j])
    return service[j]


@njit(cache=True)
def _key(sched, j, now, submit, est, service, run_since, status, seen, last_att, evals, loss, window, out, row):
    """Write the scheduler's key of job ``j`` now into ``out[row]``: three floats compared as a tuple (0 where
    unused)."""
    out[row, 0], out[row, 1], out[row, 2] = 0.0, 0.0, 0.0
    if sched == FIFO:
        out[row, 0] = submit[j] / TICKS_PER_HOUR
    elif sched == MAX_THROUGHPUT:
        out[row, 0] = float(submit[j])   # ticks: exact in float64
    elif sched == SJF_EST:
        out[row, 0], out[row, 1] = est[j] / TICKS_PER_HOUR, submit[j] / TICKS_PER_HOUR
    elif sched == TIRESIAS:   # its own lists rank jobs (the waiting list is kept in queue order, for demand only)
        return
    elif sched == LOSSAWARE:
        count = seen[j]
        out[row, 2] = submit[j] / TICKS_PER_HOUR
        if count >= 2:
            w = min(window, count - 1)
            before, last = loss[j * evals + count - 1 - w], loss[j * evals + count - 1]
            out[row, 0], out[row, 1] = 1.0, -((before - last) / (w * abs(before)) if before else 0.0)
    else:
        att = _attained(j, now, service, run_since, status)
        rem = max(est[j] - att, 0)
        if sched == SRTF_EST:
            out[row, 0] = float(rem)   # ticks: exact in float64
        elif seen[j] == 0:
            out[row, 0] = rem / TICKS_PER_HOUR
        else:
            out[row, 0] = max(last_att[j] / TICKS_PER_HOUR * evals / seen[j] - att / TICKS_PER_HOUR, 0.0)


_SHORT = 32  # up to this many items an insertion sort is quicker than merging


@njit(cache=True)
def _stable_order(keys, count, perm, tmp):
    """``perm[:count]``: positions ``0..count-1`` sorted by the rows ``keys[i]`` (compared as tuples), equal
    keys in position order (insertion sort when short, else a bottom-up merge sort through ``tmp``; numba's
    own stable argsort would add seconds to the compile)."""
    for i in range(count):
        perm[i] = i
    if count <= _SHORT:
        for i in range(1, count):
            m = i
            while m > 0 and _less(keys, i, keys, perm[m - 1]):
                perm[m] = perm[m - 1]
                m -= 1
            perm[m] = i
        return
    src, dst, in_perm, width = perm, tmp, True, 1
    while width < count:
        for lo in range(0, count, 2 * width):
            mid, hi = min(lo + width, count), min(lo + 2 * width, count)
            a, b = lo, mid
            for o in range(lo, hi):
                if a < mid and (b >= hi or not _less(keys, src[b], keys, src[a])):  # the left one on ties
                    dst[o] = src[a]
                    a += 1
                else:
                    dst[o] = src[b]
                    b += 1
        src, dst, in_perm, width = dst, src, not in_perm, 2 * width
    if not in_perm:
        perm[:count] = tmp[:count]


@njit(cache=True)
def _first_fit(wj, n_wait, gpus, left, out, least):
    """Write to ``out`` the waiting jobs that fit in ``left`` GPUs, first fit in key order (``least``: the least
    waiting demand); returns how many."""
    count = np.int64(0)
    for m in range(n_wait):
        if left < least:
            break
        j = wj[m]
        if gpus[j] <= left:
            out[count] = j
            count += 1
            left -= gpus[j]
            if left == 0:
                break
    return count


@njit(cache=True)
def _plan(sched, preemptive, now, submit, est, service, run_since, status, seen, last_att, evals, loss, window,
          gpus, qseq, run, n_run, run_key, run_stamp, wk, wj, n_wait, free, total_gpus, demand, preempt, start, rkey,
          perm, tmp, kept, queue_order):
    """The plan at a scheduling point: ``preempt[:a]`` in running order and ``start[:b]`` in the order the
    Python plan lists them (``queue_order``; else in key order, as a plan placed on nodes takes them); returns
    ``(a, b)``.

    Non-preemptive: first fit of the waiting jobs in key order on the free GPUs (Scheduler._fill).
    Preemptive: first fit of every active job in key order on all GPUs, running jobs first on equal keys
    and in start order among themselves (Scheduler._allocate_sorted). Running jobs ranked no later than the
    best waiting job come first in that walk and all fit (they hold their GPUs now), so only the others
    are sorted and walked with the waiting jobs. For SRTF-Est those are a tail of the running list, found by
    one bisection: its running jobs are sorted by a key fixed while they run (the Python path's RunningOrder).
    """
    if not preemptive:
        return 0, _first_fit(wj, n_wait, gpus, free, start, demand[0])
    left, n_high = total_gpus, np.int64(0)
    if sched == SRTF_EST:  # key max(K - now, 0) > w0 >= 0 exactly when K > w0 + now; in key order already
        left = free
        for r in range(_run_at(run, n_run, run_key, run_stamp, np.int64(wk[0, 0]) + now + 1, np.int64(0)), n_run):
            j = run[r]
            preempt[n_high] = j
            rkey[n_high, 0], rkey[n_high, 1], rkey[n_high, 2] = float(run_key[j] - now), 0.0, 0.0
            kept[n_high] = False
            perm[n_high] = n_high
            left += gpus[j]
            n_high += 1
    for r in range(n_run if sched != SRTF_EST else 0):
        j = run[r]
        _key(sched, j, now, submit, est, service, run_since, status, seen, last_att, evals, loss, window, rkey,
             n_high)
        if not _less(wk, 0, rkey, n_high):  # kept: ranked before (or tied with, running first) every waiting job
            left -= gpus[j]
        else:        # kept or not by the walk below; listed in running order
            preempt[n_high] = j
            kept[n_high] = False
            n_high += 1
    n_start = np.int64(0)
    if n_high == 0:
        n_start = _first_fit(wj, n_wait, gpus, left, start, demand[0])
    else:
        if sched != SRTF_EST:
            _stable_order(rkey, n_high, perm, tmp)
        r, w = 0, 0
        while left > 0 and (r < n_high or (w < n_wait and left >= demand[0])):
            if r < n_high and (w >= n_wait or not _less(wk, w, rkey, perm[r])):  # ties: running first
                j = preempt[perm[r]]
                if gpus[j] <= left:
                    kept[perm[r]] = True
                    left -= gpus[j]
                r += 1
            else:
                j = wj[w]
                if gpus[j] <= left:
                    start[n_start] = j
                    n_start += 1
                    left -= gpus[j]
                w += 1
    n_pre = np.int64(0)
    for i in range(n_high):
        if not kept[i]:
            preempt[n_pre] = preempt[i]
            n_pre += 1
    if sched == SRTF_EST and n_pre > 1:  # in key order: preemptions go in start order
        _reorder(preempt, n_pre, run_stamp, rkey, perm, tmp)
    if n_start > 1 and queue_order:  # starts in queue order, as the Python plan lists them
        _reorder(start, n_start, qseq, rkey, perm, tmp)
    return n_pre, n_start


@njit(cache=True)
def _reorder(jobs, count, stamp, scratch, perm, tmp):
    """Sort ``jobs[:count]`` by their ``stamp`` (counts below 2**53: exact as floats)."""
    for i in range(count):
        scratch[i, 0], scratch[i, 1], scratch[i, 2] = stamp[jobs[i]], 0.0, 0.0
    _stable_order(scratch, count, perm, tmp)
    for i in range(count):
        perm[i] = jobs[perm[i]]
    jobs[:count] = perm[:count]


# -- the stop rules --------------------------------------------------------------------------------------
_MAD_TO_SD = 0.6745      # baselines/noise.py
MIN_DIFFERENCES = 20     # baselines/noise.py


@njit(cache=True)
def _min_heap_in(h, base, size, x):
    """Push ``x`` into the min-heap ``h[base:base + size]``."""
    i = size
    while i > 0:
        p = (i - 1) >> 1
        if not x < h[base + p]:
            break
        h[base + i] = h[base + p]
        i = p
    h[base + i] = x


@njit(cache=True)
def _min_heap_out(h, base, size):
    """Pop and return the least value of the min-heap ``h[base:base + size]``."""
    top = h[base]
    size -= 1
    x, i = h[base + size], 0
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and h[base + c + 1] < h[base + c]:
            c += 1
        if not h[base + c] < x:
            break
        h[base + i] = h[base + c]
        i = c
    h[base + i] = x
    return top


@njit(cache=True)
def _insort(pool, off, cnt, q, x):
    """Add ``x`` to pool ``q``, held as two heaps whose tops are the pool's middle values: ``pool[0]`` the
    lower half (negated: a max-heap), ``pool[1]`` the upper half, the lower one as large or one larger.
    The median is then the one Python's sorted list gives (its values are the same; callers keep NaN out)."""
    base, lo, hi = off[q], cnt[q, 0], cnt[q, 1]
    low, high = pool[0], pool[1]
    if lo == 0 or x <= -low[base]:
        _min_heap_in(low, base, lo, -x)
        lo += 1
    else:
        _min_heap_in(high, base, hi, x)
        hi += 1
    if lo > hi + 1:
        _min_heap_in(high, base, hi, -_min_heap_out(low, base, lo))
        lo, hi = lo - 1, hi + 1
    elif hi > lo:
        _min_heap_in(low, base, lo, -_min_heap_out(high, base, hi))
        lo, hi = lo + 1, hi - 1
    cnt[q, 0], cnt[q, 1] = lo, hi


@njit(cache=True)
def _add(pool, off, cnt, q, seen, j, values, start, count, scale):
    """PooledNoise.add: pool the second differences of ``values[start:start + count]`` (each divided by
    ``scale`` first where ``scale`` is not 0) not pooled before; ``seen[j]``: values already pooled."""
    for i in range(max(seen[j], 2), count):
        a, b, c = values[start + i], values[start + i - 1], values[start + i - 2]
        if scale != 0.0:
            a, b, c = a / scale, b / scale, c / scale
        _insort(pool, off, cnt, q, abs(a - 2 * b + c))
    seen[j] = count


@njit(cache=True)
def _sigma(pool, off, cnt, q):
    """PooledNoise.sigma: ``(known, value)``."""
    n = cnt[q, 0] + cnt[q, 1]
    if n < MIN_DIFFERENCES:
        return False, 0.0
    base = off[q]
    below = -pool[0, base]   # sorted, the pool's value at n // 2 (odd n) or n // 2 - 1 (even n)
    median = below if n % 2 else 0.5 * (below + pool[1, base])
    return True, median / (_MAD_TO_SD * math.sqrt(6))


@njit(cache=True)
def _observe(j, count, evals, obs, items, pool_of, factor_pool, pool, off, cnt, seen_eval, seen_factor):
    """NoiseBySize.observe: pool job ``j``'s ``count`` scores in its size's pool and, with a known size, in
    the factor pool."""
    start = j * evals
    _add(pool, off, cnt, pool_of[j], seen_eval, j, obs, start, count, 0.0)
    if items[j] > 0:
        _add(pool, off, cnt, factor_pool, seen_factor, j, obs, start, count, math.sqrt(0.25 / items[j]))


@njit(cache=True)
def _job_sigma(j, fp, items, pool_of, factor_pool, pool, off, cnt):
    """NoiseAwareStopper.job_sigma after the observation: the user's sigma, else NoiseBySize.sigma."""
    if not math.isnan(fp[F_SIGMA]):
        return True, fp[F_SIGMA]
    known, sigma = _sigma(pool, off, cnt, pool_of[j])
    if not known and items[j] > 0:
        f_known, f_sigma = _sigma(pool, off, cnt, factor_pool)
        if f_known:
            return True, f_sigma * math.sqrt(0.25 / items[j])
    return known, sigma


@njit(cache=True)
def _dropped(obs, start, count, sigma, window, z, min_drop):
    """DropTest.dropped on ``obs[start:start + count]``."""
    if count <= window:
        return False
    level = 0.0
    for m in range(count - window, count):
        level += obs[start + m]
    level = level / window
    best = obs[start]
    for m in range(1, count - window):
        if obs[start + m] > best:
            best = obs[start + m]
    drop = best - level
    return drop >= min_drop and drop > z * sigma * math.sqrt(1.0 + 1.0 / window)


@njit(cache=True)
def _declined(stop, obs, start, count, sigma, ip, fp):
    """NoiseAwareStopper.declined of CUSUM, SmoothedDecline and DropTest (Divergence's plain test)."""
    if stop == CUSUM_CODE:
        sd = math.sqrt(2.0) * sigma
        s = 0.0
        for m in range(1, count):
            x = s - (obs[start + m] - obs[start + m - 1]) - fp[F_DRIFT] * sd
            s = x if x > 0.0 else 0.0   # max(0.0, x)
        return s > fp[F_THRESHOLD] * sd
    if stop == SMOOTHED_CODE:
        window = ip[I_K]
        if count < window:
            return False
        slope = 0.0
        for m in range(window):
            slope += fp[F_X + m] * obs[start + count - window + m]
        slope = slope / fp[F_SXX]
        return slope < -fp[F_THRESHOLD] * sigma / fp[F_SQRT_SXX]
    return _dropped(obs, start, count, sigma, ip[I_K], fp[F_Z], fp[F_MIN_DROP])


@njit(cache=True)
def _warming_up(count, evals, ip, fp):
    """Stopper.warming_up, behind its guard (no warm-up set: never)."""
    warmup, warmup_progress = ip[I_WARMUP], fp[F_WARMUP_PROGRESS]
    return (warmup or warmup_progress) and (count <= warmup or count / evals < warmup_progress)


@njit(cache=True)
def rule_stop(stop, j, i, evals, obs, loss, declines, rlhf, ip, fp):
    """EvalStop's, Patience's, StopAtProgress' and LossPlateau's decision at job ``j``'s checkpoint ``i``
    (``i + 1`` scores)."""
    count = i + 1
    if stop == STOPAT_CODE:   # no warm-up
        return rlhf[j] and count / evals >= fp[F_P]
    if _warming_up(count, evals, ip, fp):
        return False
    start, delta = j * evals, fp[F_DELTA]
    if stop == LOSSPLATEAU_CODE:
        window = ip[I_K]
        if count <= window:
            return False
        before, last = loss[start + count - 1 - window], loss[start + count - 1]
        if before == 0:
            return last >= 0
        return (before - last) / abs(before) < fp[F_TOLERANCE]
    if stop == EVALSTOP_CODE:
        if not delta:
            return declines[j] >= ip[I_K]
        n = 0
        for m in range(i, 0, -1):
            if obs[start + m] >= obs[start + m - 1] - delta:
                break
            n += 1
        return n >= ip[I_K]
    best, wait = obs[start], 0   # Patience
    for m in range(1, count):
        s = obs[start + m]
        if s - delta > best:
            best, wait = s, 0
        else:
            wait += 1
    return wait >= ip[I_K]


@njit(cache=True)
def noise_stop(stop, j, i, evals, obs, proxy, rlhf, items, pool_of, factor_pool, proxy_pool, ip, fp, pool, off, cnt,
               seen_eval, seen_factor, seen_proxy):
    """CUSUM's, SmoothedDecline's, DropTest's and Divergence's decision at job ``j``'s checkpoint ``i``."""
    count, start = i + 1, j * evals
    _observe(j, count, evals, obs, items, pool_of, factor_pool, pool, off, cnt, seen_eval, seen_factor)
    if _warming_up(count, evals, ip, fp):  # its scores still feed the pooled estimates (Stopper.observe)
        if stop == DIVERGENCE_CODE:
            _add(pool, off, cnt, proxy_pool, seen_proxy, j, proxy, start, count if rlhf[j] else 0, 0.0)
        return False
    known, sigma = _job_sigma(j, fp, items, pool_of, factor_pool, pool, off, cnt)
    if not known:
        return False
    if stop != DIVERGENCE_CODE:
        return _declined(stop, obs, start, count, sigma, ip, fp)
    # Divergence: the weaker drop test while the proxy still rises, else DropTest's
    n_proxy = count if rlhf[j] else 0
    _add(pool, off, cnt, proxy_pool, seen_proxy, j, proxy, start, n_proxy, 0.0)
    p_known, sd = _sigma(pool, off, cnt, proxy_pool)
    lag = ip[I_LAG]
    if p_known and n_proxy > lag and \
            proxy[start + n_proxy - 1] - proxy[start + n_proxy - 1 - lag] > fp[F_PROXY_Z] * sd * math.sqrt(2.0):
        return _dropped(obs, start, count, sigma, np.int64(1), fp[F_FAST_Z], fp[F_FAST_MIN_DROP])
    return _declined(stop, obs, start, count, sigma, ip, fp)



# -- nodes -----------------------------------------------------------------------------------------------
# A transcription of evalstop_gym.placement (Placer.place's general path, which its fast paths equal by its
# own tests; Nodes; place_preemptive) and of the simulator's node accounting (rates, spread and per-type GPU
# time, fragmentation). A node state is a row of ``st_free`` (free GPUs per node), ``st_counts`` (how many
# nodes have each free count) and ``st_tot`` (free GPUs in all): row 0 is the cluster's, the others are the
# planner's tentative states. A job's placement is ``pl_n/pl_c[pl_off[j]:pl_off[j] + pl_m[j]]`` (nodes in
# increasing order, GPUs on each). Placement policies by ClusterSpec.PLACEMENTS' order:
CONSOLIDATE, FIRST_FIT, SPREAD = 0, 1, 2
REAL, FREE, ROOM, PARTIAL = 0, 1, 2, 3   # node-state rows: the cluster's, then place_preemptive's and _backfill's
OVERFLOW = 2          # the kernel's status when a rate's exact arithmetic would leave int64: the Python path plays
_SAFE = np.int64(1) << 62


@njit(cache=True)
def _cons_cap(counts, gpn):
    """placement.consolidated_cap: whole free nodes plus the fullest partly free node's GPUs."""
    f = gpn - 1
    while f > 0 and counts[f] == 0:
        f -= 1
    return counts[gpn] * gpn + f


@njit(cache=True)
def _node_cap(st_counts, st_tot, s, gpn, strict):
    """Nodes.cap: the largest demand that can be placed on state ``s``."""
    return _cons_cap(st_counts[s], gpn) if strict else st_tot[s]


@njit(cache=True)
def _partial_cap(st_counts, st_tot, s, gpn, strict):
    """Nodes.partial_cap: :func:`_node_cap` with every wholly free node left out."""
    counts = st_counts[s]
    if not strict:
        return st_tot[s] - counts[gpn] * gpn
    f = gpn - 1
    while f > 0 and counts[f] == 0:
        f -= 1
    return f


@njit(cache=True)
def _node_add(st_free, st_counts, st_tot, s, n, c):
    """Give ``c`` GPUs back to node ``n`` of state ``s`` (take them with ``c < 0``)."""
    f = st_free[s, n]
    st_free[s, n] = f + c
    st_counts[s, f] -= 1
    st_counts[s, f + c] += 1
    st_tot[s] += c


@njit(cache=True)
def _use(st_free, st_counts, st_tot, s, j, pl_off, pl_n, pl_c, pl_m, sign):
    """Nodes.use of job ``j``'s placement on state ``s``: take its GPUs (``sign`` -1) or give them back (+1)."""
    for k in range(pl_off[j], pl_off[j] + pl_m[j]):
        _node_add(st_free, st_counts, st_tot, s, pl_n[k], sign * pl_c[k])


@njit(cache=True)
def _copy_state(st_free, st_counts, st_tot, src, dst):
    st_free[dst, :] = st_free[src, :]
    st_counts[dst, :] = st_counts[src, :]
    st_tot[dst] = st_tot[src]


@njit(cache=True)
def _node_key(free, rank, policy, n, keys, row):
    """A node's place in the policy's order, ``(type rank, best / first / worst fit, node)`` as floats (exact)."""
    keys[row, 0] = rank[n]
    keys[row, 1] = free[n] if policy == CONSOLIDATE else (-free[n] if policy == SPREAD else 0)
    keys[row, 2] = n


@njit(cache=True)
def _place(st_free, st_counts, st_tot, s, gpn, policy, strict, rank, g, spill, j, pl_off, pl_n, pl_c, mark, nkeys,
           nperm, ntmp):
    """Placer.place on state ``s`` (not changed) for job ``j`` of ``g`` GPUs, its nodes ranked by ``rank``
    (a GPU type preference; zeros for none): writes the placement to job ``j``'s slot and returns its length
    (0: no placement). ``spill``: a spread placement where no consolidated one exists (never under consolidate).
    ``mark`` (GPUs taken per node) is zeros on entry and on return."""
    free = st_free[s]
    n_nodes = free.shape[0]
    whole = g // gpn
    rem = g - whole * gpn
    ok = True
    if whole:   # the whole free nodes first in the policy's order
        c = 0
        for n in range(n_nodes):
            if free[n] == gpn:
                _node_key(free, rank, policy, n, nkeys, c)
                c += 1
        if c < whole:
            ok = False
        else:
            _stable_order(nkeys, c, nperm, ntmp)
            for i in range(whole):
                mark[np.int64(nkeys[nperm[i], 2])] = gpn
    if ok and rem:   # the remainder on the first node in the policy's order that holds it
        best = -1
        for n in range(n_nodes):
            if free[n] >= rem and mark[n] == 0:
                if best < 0:
                    best = n
                else:
                    _node_key(free, rank, policy, n, nkeys, 0)
                    _node_key(free, rank, policy, best, nkeys, 1)
                    if _less(nkeys, 0, nkeys, 1):
                        best = n
        if best < 0:
            ok = False
        else:
            mark[best] = rem
    if not ok:   # no consolidated placement
        for n in range(n_nodes):
            mark[n] = 0
        if strict or not spill or st_tot[s] < g:
            return 0
        c = 0
        for n in range(n_nodes):
            if free[n] > 0:
                _node_key(free, rank, policy, n, nkeys, c)
                c += 1
        _stable_order(nkeys, c, nperm, ntmp)
        need = g
        for i in range(c):
            n = np.int64(nkeys[nperm[i], 2])
            take = min(free[n], need)
            mark[n] = take
            need -= take
            if need == 0:
                break
    m = 0
    base = pl_off[j]
    for n in range(n_nodes):   # sorted by node
        if mark[n]:
            pl_n[base + m], pl_c[base + m] = n, mark[n]
            m += 1
            mark[n] = 0
    return m


@njit(cache=True)
def _fill_nodes(st_free, st_counts, st_tot, s, cap, gpn, policy, strict, node_rank, job_type, gpus, wj, n_wait,
                skip, least, out, count, pl_off, pl_n, pl_c, pl_m, mark, nkeys, nperm, ntmp):
    """Scheduler._fill on nodes: waiting jobs (not ``skip``) in key order, each placed on state ``s`` (changed)
    where it fits in what is left (``cap``: the largest demand that fits before any start), appended to
    ``out`` from ``count``; returns the new count. The kept queue's walk equals this one: what fits only
    shrinks."""
    for m in range(n_wait):
        if cap == 0 or cap < least:
            break
        j = wj[m]
        g = gpus[j]
        if skip[j] or g > cap:
            continue
        pl_m[j] = _place(st_free, st_counts, st_tot, s, gpn, policy, strict, node_rank[job_type[j]], g, True, j,
                         pl_off, pl_n, pl_c, mark, nkeys, nperm, ntmp)
        _use(st_free, st_counts, st_tot, s, j, pl_off, pl_n, pl_c, pl_m, -1)
        out[count] = j
        count += 1
        cap = _node_cap(st_counts, st_tot, s, gpn, strict)
    return count


@njit(cache=True)
def _place_preemptive(st_free, st_counts, st_tot, gpn, policy, strict, node_rank, job_type, gpus, starts, n_s,
                      cands, n_c, ckeys, placed, lost, touched, pl_off, pl_n, pl_c, pl_m, mark, nkeys, nperm, ntmp,
                      perm, tmp, lidx):
    """placement.place_preemptive: place ``starts[:n_s]`` (key order) without moving a running job, the running
    jobs ``cands[:n_c]`` (start order; ``ckeys``: their keys in rows) the plan would preempt giving up their
    GPUs only where a start needs them. Sets ``placed[i]`` per start and ``lost[i]`` per candidate; the node
    state after the plan is row FREE (complete where a start waits). Returns the number placed."""
    _copy_state(st_free, st_counts, st_tot, REAL, FREE)
    room = False
    n_placed = 0
    any_touched = False
    for i in range(n_c):
        lost[i] = False
    for i in range(n_s):
        j = starts[i]
        g = gpus[j]
        rank = node_rank[job_type[j]]
        m = 0
        on_free = True
        for spill in (False, True):
            if spill and strict:
                break
            if g <= _node_cap(st_counts, st_tot, FREE, gpn, strict):
                m = _place(st_free, st_counts, st_tot, FREE, gpn, policy, strict, rank, g, spill, j, pl_off, pl_n,
                           pl_c, mark, nkeys, nperm, ntmp)
            if m:
                on_free = True
                break
            if n_c:
                if not room:   # the GPUs free now plus every candidate's
                    _copy_state(st_free, st_counts, st_tot, FREE, ROOM)
                    for c in range(n_c):
                        _use(st_free, st_counts, st_tot, ROOM, cands[c], pl_off, pl_n, pl_c, pl_m, 1)
                    room = True
                if g <= _node_cap(st_counts, st_tot, ROOM, gpn, strict):
                    m = _place(st_free, st_counts, st_tot, ROOM, gpn, policy, strict, rank, g, spill, j, pl_off,
                               pl_n, pl_c, mark, nkeys, nperm, ntmp)
                if m:
                    on_free = False
                    break
        placed[i] = m > 0
        if m == 0:
            continue   # not even on the candidates' GPUs: it waits
        pl_m[j] = m
        n_placed += 1
        if i == n_s - 1 and not room and n_placed == n_s:
            break   # nothing reads the state after the last start
        if room:
            _use(st_free, st_counts, st_tot, ROOM, j, pl_off, pl_n, pl_c, pl_m, -1)
        if on_free:
            _use(st_free, st_counts, st_tot, FREE, j, pl_off, pl_n, pl_c, pl_m, -1)
        else:   # the start uses a node's free GPUs first, then candidates'
            for k in range(pl_off[j], pl_off[j] + m):
                n, c = pl_n[k], pl_c[k]
                f = st_free[FREE, n]
                if c > f:
                    touched[n] = True
                    any_touched = True
                if f:
                    _node_add(st_free, st_counts, st_tot, FREE, n, -min(c, f))
    if not any_touched:
        return n_placed
    # candidates with GPUs on a touched node, in key order (stable: start order on ties), keep running if
    # their GPUs are all still there
    n_l = 0
    for i in range(n_c):   # compacted in place: n_l <= i
        j = cands[i]
        hit = False
        for k in range(pl_off[j], pl_off[j] + pl_m[j]):
            hit = hit or touched[pl_n[k]]
        if hit:
            lidx[n_l] = i
            ckeys[n_l, 0], ckeys[n_l, 1], ckeys[n_l, 2] = ckeys[i, 0], ckeys[i, 1], ckeys[i, 2]
            n_l += 1
    _stable_order(ckeys, n_l, perm, tmp)
    for r in range(n_l):
        i = lidx[perm[r]]
        j = cands[i]
        keeps = True
        for k in range(pl_off[j], pl_off[j] + pl_m[j]):
            keeps = keeps and st_free[ROOM, pl_n[k]] >= pl_c[k]
        if keeps:
            _use(st_free, st_counts, st_tot, ROOM, j, pl_off, pl_n, pl_c, pl_m, -1)
        else:
            lost[i] = True
            for k in range(pl_off[j], pl_off[j] + pl_m[j]):
                if not touched[pl_n[k]]:
                    _node_add(st_free, st_counts, st_tot, FREE, pl_n[k], pl_c[k])
    for n in range(touched.shape[0]):
        if touched[n]:
            _node_add(st_free, st_counts, st_tot, FREE, n, st_free[ROOM, n] - st_free[FREE, n])
            touched[n] = False
    return n_placed


@njit(cache=True)
def _rate_of(j, pl_off, pl_n, pl_m, node_type, gpn, g, rate_tab, job_type):
    """``(num, den, spread)`` of job ``j`` on its placement: the slowest GPU type it holds, times the spread
    penalty if spread (Placer.run_facts; ``rate_tab[job type, type mask, spread]``, exact fractions)."""
    mask = 0
    for k in range(pl_off[j], pl_off[j] + pl_m[j]):
        mask |= 1 << node_type[pl_n[k]]
    spread = pl_m[j] > (g + gpn - 1) // gpn
    return rate_tab[job_type[j], mask, np.int64(spread), 0], rate_tab[job_type[j], mask, np.int64(spread), 1], spread



# -- Tiresias ------------------------------------------------------------------------------------------
# A transcription of evalstop_gym.baselines.tiresias.Tiresias with order="queue" and demotion_timer="exact".
# Its lists are kept as linked lists over job ids: per queue the running part (in list order) and the waiting
# part (in stamp order: a stamp taken from the "down" counter goes to the front, one from the "up" counter to
# the back), so the walk's first fit per queue in stamp order is the Python path's best-head-per-demand-class
# choice. Per job (``tj`` columns):
TJ_Q, TJ_TIER, TJ_STAMP, TJ_ARR, TJ_OFF, TJ_HELD, TJ_MARK, TJ_MARKED, TJ_MINE = 0, 1, 2, 3, 4, 5, 6, 7, 8
TJ_RNEXT, TJ_RPREV, TJ_INR, TJ_WNEXT, TJ_WPREV, TJ_INW = 9, 10, 11, 12, 13, 14
TJ_FIELDS = 15
# per queue (``tq`` columns): run list head / tail, its GPUs, wait list head / tail, jobs moved in at this point
TQ_RHEAD, TQ_RTAIL, TQ_RGPUS, TQ_WHEAD, TQ_WTAIL, TQ_DEMN = 0, 1, 2, 3, 4, 5
# counters (``tc``): list stamps, arrivals, heap sizes, and the lists of what changed since the last point
TC_UP, TC_DOWN, TC_ARRIVED, TC_DH, TC_PH, TC_NEW, TC_CHANGED, TC_STARTED = 0, 1, 2, 3, 4, 5, 6, 7
_RUN, _PEND, _DEMOTED = 0, 1, 2   # tiers, as baselines/tiresias.py


@njit(cache=True)
def _row_less(h, a, b):
    for m in range(h.shape[1]):
        if h[a, m] != h[b, m]:
            return h[a, m] < h[b, m]
    return False


@njit(cache=True)
def _swap_rows(h, a, b):
    for m in range(h.shape[1]):
        h[a, m], h[b, m] = h[b, m], h[a, m]


@njit(cache=True)
def _rh_push(h, size, row):
    """Push ``row`` into the heap ``h[:size]`` of int rows compared as tuples (heapq's order); returns the size."""
    i = size
    h[i, :] = row
    while i > 0:
        p = (i - 1) >> 1
        if not _row_less(h, i, p):
            break
        _swap_rows(h, i, p)
        i = p
    return size + 1


@njit(cache=True)
def _rh_pop(h, size, out):
    """Pop the least row of ``h[:size]`` into ``out``; returns the size."""
    out[:] = h[0]
    size -= 1
    if size > 0:
        h[0, :] = h[size]
        i = 0
        while True:
            c = 2 * i + 1
            if c >= size:
                break
            if c + 1 < size and _row_less(h, c + 1, c):
                c += 1
            if not _row_less(h, c, i):
                break
            _swap_rows(h, i, c)
            i = c
    return size


@njit(cache=True)
def _grown(h, need):
    """A copy of ``h`` with room for ``need`` more rows than twice its own."""
    out = np.empty((2 * h.shape[0] + need, h.shape[1]), np.int64)
    out[:h.shape[0]] = h
    return out


@njit(cache=True)
def _ll_remove(tj, tq, q, j, nxt, prv, head, tail):
    p, x = tj[j, prv], tj[j, nxt]
    if p < 0:
        tq[q, head] = x
    else:
        tj[p, nxt] = x
    if x < 0:
        tq[q, tail] = p
    else:
        tj[x, prv] = p


@njit(cache=True)
def _ll_add(tj, tq, q, j, nxt, prv, head, tail, front):
    if front:
        h = tq[q, head]
        tj[j, prv], tj[j, nxt] = -1, h
        if h < 0:
            tq[q, tail] = j
        else:
            tj[h, prv] = j
        tq[q, head] = j
    else:
        t = tq[q, tail]
        tj[j, prv], tj[j, nxt] = t, -1
        if t < 0:
            tq[q, head] = j
        else:
            tj[t, nxt] = j
        tq[q, tail] = j


@njit(cache=True)
def _t_unwait(tj, tq, j):
    if tj[j, TJ_INW]:
        _ll_remove(tj, tq, tj[j, TJ_Q], j, TJ_WNEXT, TJ_WPREV, TQ_WHEAD, TQ_WTAIL)
        tj[j, TJ_INW] = 0


@njit(cache=True)
def _t_put_waiting(tj, tq, q, stamp, j, front):
    """Tiresias._put_waiting: rank ``(q, PEND, stamp)``, at the front (a "down" stamp) or the back of the list."""
    _t_unwait(tj, tq, j)
    tj[j, TJ_Q], tj[j, TJ_TIER], tj[j, TJ_STAMP] = q, _PEND, stamp
    _ll_add(tj, tq, q, j, TJ_WNEXT, TJ_WPREV, TQ_WHEAD, TQ_WTAIL, front)
    tj[j, TJ_INW] = 1


@njit(cache=True)
def _t_put_running(tj, tq, tc, q, j, gpus):
    _t_unwait(tj, tq, j)
    tc[TC_UP] += 1
    tj[j, TJ_Q], tj[j, TJ_TIER], tj[j, TJ_STAMP] = q, _RUN, tc[TC_UP]
    _ll_add(tj, tq, q, j, TJ_RNEXT, TJ_RPREV, TQ_RHEAD, TQ_RTAIL, False)
    tj[j, TJ_INR] = 1
    tq[q, TQ_RGPUS] += gpus[j]
    tj[j, TJ_MINE] = 1


@njit(cache=True)
def _t_unrun(tj, tq, j, gpus):
    q = tj[j, TJ_Q]
    _ll_remove(tj, tq, q, j, TJ_RNEXT, TJ_RPREV, TQ_RHEAD, TQ_RTAIL)
    tj[j, TJ_INR] = 0
    tq[q, TQ_RGPUS] -= gpus[j]


@njit(cache=True)
def _t_forget(tj, j):
    tj[j, TJ_ARR], tj[j, TJ_OFF], tj[j, TJ_HELD], tj[j, TJ_MARKED] = 0, 0, 0, 0


@njit(cache=True)
def _restore(j, now, status, run_since, r_ticks, r_until):
    """JobView.restore_ticks: of the attained service, the ticks spent resuming, up to now."""
    if status[j] != _RUNNING or r_until[j] <= run_since[j]:
        return r_ticks[j]
    return r_ticks[j] + min(now, r_until[j]) - run_since[j]


@njit(cache=True)
def _close_restore(j, now, run_since, r_ticks, r_until):
    """JobView._close_restore: count the current run's resume time up to ``now``."""
    if r_until[j] > run_since[j]:
        r_ticks[j] += min(now, r_until[j]) - run_since[j]
    r_until[j] = 0


@njit(cache=True)
def _cut_resume(j, now, run_since, rnum, rden, restart, overhead, r_ticks, r_until):
    """Simulator._cut_resume at a preemption: a run cut short inside its resume is charged only the part it ran
    (work at its rate; the rate is 1 off nodes, and on nodes _settle has checked the product)."""
    if now < r_until[j]:
        overhead[j] -= restart[j] - (now - run_since[j]) * rnum[j] // rden[j]
    _close_restore(j, now, run_since, r_ticks, r_until)


@njit(cache=True)
def _t_push_demotion(dh, tc, tj, limits, j, q, now, since, trained, gpus, service, run_since, status, qseq, r_ticks,
                     r_until, row):
    """Tiresias._push_demotion (``since`` -1: a first check)."""
    if q >= limits.shape[0]:
        return
    now_trained = _attained(j, now, service, run_since, status) - _restore(j, now, status, run_since, r_ticks, r_until)
    g = gpus[j]
    wait = max(-(-(limits[q] - (now_trained - tj[j, TJ_OFF]) * g) // g), 0)
    if since >= 0 and now_trained == trained:   # still resuming
        wait = max(wait, now - since)
    else:
        since = now
    row[0], row[1], row[2], row[3], row[4], row[5], row[6] = now + wait, tj[j, TJ_ARR], j, qseq[j], q, since, \
        now_trained
    tc[TC_DH] = _rh_push(dh, tc[TC_DH], row)


@njit(cache=True)
def _t_promotion_in(j, now, knob, tj, submit, service, run_since, status):
    att = _attained(j, now, service, run_since, status)
    run = att - tj[j, TJ_HELD]
    waited = now - submit[j] - att - tj[j, TJ_MARK]
    return max(np.int64(math.ceil(knob * run - waited)), 0)


@njit(cache=True)
def _t_push_promotion(ph, tc, tj, knob, j, q, now, submit, service, run_since, status, qseq, row):
    if not math.isnan(knob) and q > 0 and tj[j, TJ_MARKED]:
        row[0], row[1], row[2], row[3], row[4] = now + _t_promotion_in(j, now, knob, tj, submit, service, run_since,
                                                                       status), tj[j, TJ_ARR], j, qseq[j], q
        row[5], row[6] = 0, 0   # one row width for both heaps: the zeros never decide
        tc[TC_PH] = _rh_push(ph, tc[TC_PH], row)


@njit(cache=True)
def _t_sync(now, tj, tq, tc, tdem, dh, ph, limits, knob, gpus, submit, service, run_since, status, qseq, r_ticks,
            r_until, news, changed, started, keys, perm, tmp, order, row):
    """Tiresias._sync: the last point's list moves (preempted running jobs to the head of their queue's waiting
    part, started ones to the end of its running part, moved-in ones settled), then arrivals and the queue
    jumps due now, in arrival order."""
    n_q = tq.shape[0]
    # the running jobs the lists counted that left: preempted ones go to the head of their waiting part
    n_front = 0
    for c in range(tc[TC_CHANGED]):
        j = changed[c]
        if not tj[j, TJ_MINE] or status[j] == _RUNNING:
            continue
        tj[j, TJ_MINE] = 0
        if tj[j, TJ_TIER] == _RUN:
            _t_unrun(tj, tq, j, gpus)
            if status[j] == _WAITING:
                keys[n_front, 0], keys[n_front, 1], keys[n_front, 2] = tj[j, TJ_Q], -tj[j, TJ_STAMP], 0.0
                order[n_front] = j
                n_front += 1
            else:
                _t_forget(tj, j)
    tc[TC_CHANGED] = 0
    _stable_order(keys, n_front, perm, tmp)   # by queue, latest stamp first: each goes to the front
    for i in range(n_front):
        j = order[perm[i]]
        tc[TC_DOWN] -= 1
        _t_put_waiting(tj, tq, tj[j, TJ_Q], tc[TC_DOWN], j, True)
        _t_push_promotion(ph, tc, tj, knob, j, tj[j, TJ_Q], now, submit, service, run_since, status, qseq, row)
    # jobs the last plan started, by queue and stamp, then each queue's moved-in jobs
    n_s = 0
    for c in range(tc[TC_STARTED]):
        j = started[c]
        if status[j] == _RUNNING:
            keys[n_s, 0], keys[n_s, 1], keys[n_s, 2] = tj[j, TJ_Q], tj[j, TJ_STAMP], 0.0
            order[n_s] = j
            n_s += 1
        else:   # ended before this point: it no longer waits
            _t_unwait(tj, tq, j)
    tc[TC_STARTED] = 0
    _stable_order(keys, n_s, perm, tmp)
    i = 0
    for q in range(n_q):
        while i < n_s and tj[order[perm[i]], TJ_Q] == q:
            j = order[perm[i]]
            i += 1
            _t_put_running(tj, tq, tc, q, j, gpus)
            if not tj[j, TJ_MARKED]:
                tj[j, TJ_MARK] = now - submit[j] - _attained(j, now, service, run_since, status)
                tj[j, TJ_MARKED] = 1
            _t_push_demotion(dh, tc, tj, limits, j, q, now, -1, 0, gpus, service, run_since, status, qseq, r_ticks,
                             r_until, row)
        for d in range(tq[q, TQ_DEMN]):
            j = tdem[q, d]
            if status[j] == _RUNNING:
                _t_put_running(tj, tq, tc, q, j, gpus)
            elif status[j] == _WAITING:   # moved in and preempted: the end of the waiting part
                tc[TC_UP] += 1
                _t_put_waiting(tj, tq, q, tc[TC_UP], j, False)
                _t_push_promotion(ph, tc, tj, knob, j, q, now, submit, service, run_since, status, qseq, row)
            else:
                _t_forget(tj, j)
        tq[q, TQ_DEMN] = 0
    for c in range(tc[TC_NEW]):   # arrivals, in queue order
        j = news[c]
        tc[TC_ARRIVED] += 1
        tj[j, TJ_ARR] = tc[TC_ARRIVED]
        tc[TC_UP] += 1
        _t_put_waiting(tj, tq, 0, tc[TC_UP], j, False)
    tc[TC_NEW] = 0
    # the queue jumps due now: (arrival rank, job, queue, demote?) in arrival order
    n_due = 0
    while tc[TC_DH] > 0 and dh[0, 0] <= now:
        tc[TC_DH] = _rh_pop(dh, tc[TC_DH], row)
        j, seq, q, since, trained = row[2], row[3], row[4], row[5], row[6]
        if status[j] == _RUNNING and qseq[j] == seq and tj[j, TJ_Q] == q and tj[j, TJ_TIER] == _RUN and \
                tj[j, TJ_MINE]:
            att = _attained(j, now, service, run_since, status)
            left = limits[q] - (att - _restore(j, now, status, run_since, r_ticks, r_until) - tj[j, TJ_OFF]) * gpus[j]
            if left > 0:   # it spent part of the wait resuming
                _t_push_demotion(dh, tc, tj, limits, j, q, now, since, trained, gpus, service, run_since, status,
                                 qseq, r_ticks, r_until, row)
            else:
                keys[n_due, 0], keys[n_due, 1], keys[n_due, 2] = row[1], 0.0, 0.0
                order[n_due] = j
                n_due += 1
    while tc[TC_PH] > 0 and ph[0, 0] <= now:
        tc[TC_PH] = _rh_pop(ph, tc[TC_PH], row)
        j, seq, q = row[2], row[3], row[4]
        if status[j] == _WAITING and qseq[j] == seq and tj[j, TJ_Q] == q:
            keys[n_due, 0], keys[n_due, 1], keys[n_due, 2] = row[1], 0.0, 1.0
            order[n_due] = j
            n_due += 1
    _stable_order(keys, n_due, perm, tmp)   # by arrival rank (the flag in the third place never decides)
    for i in range(n_due):
        j = order[perm[i]]
        if status[j] == _RUNNING:   # a demotion
            q = tj[j, TJ_Q]
            _t_unrun(tj, tq, j, gpus)
            tc[TC_UP] += 1
            tj[j, TJ_Q], tj[j, TJ_TIER], tj[j, TJ_STAMP] = q + 1, _DEMOTED, tc[TC_UP]
            tdem[q + 1, tq[q + 1, TQ_DEMN]] = j
            tq[q + 1, TQ_DEMN] += 1
            _t_push_demotion(dh, tc, tj, limits, j, q + 1, now, -1, 0, gpus, service, run_since, status, qseq,
                             r_ticks, r_until, row)
        else:   # a promotion
            att = _attained(j, now, service, run_since, status)
            tj[j, TJ_OFF] = att - _restore(j, now, status, run_since, r_ticks, r_until)
            tj[j, TJ_HELD] = att
            tj[j, TJ_MARKED] = 0
            tc[TC_UP] += 1
            _t_put_waiting(tj, tq, 0, tc[TC_UP], j, False)


@njit(cache=True)
def _t_walk(tj, tq, tdem, gpus, total_gpus, preempt, start):
    """Tiresias._walk: first fit down the lists, each queue's running part, its waiting part, its moved-in jobs.
    Returns ``(preemptions, starts)`` in walk order (the starts in key order)."""
    cap, n_pre, n_start = total_gpus, 0, 0
    for q in range(tq.shape[0]):
        if tq[q, TQ_RGPUS] <= cap:
            cap -= tq[q, TQ_RGPUS]
        else:
            j = tq[q, TQ_RHEAD]
            while j >= 0:
                if gpus[j] <= cap:
                    cap -= gpus[j]
                else:
                    preempt[n_pre] = j
                    n_pre += 1
                j = tj[j, TJ_RNEXT]
        j = tq[q, TQ_WHEAD]
        while cap > 0 and j >= 0:
            if gpus[j] <= cap:
                start[n_start] = j
                n_start += 1
                cap -= gpus[j]
            j = tj[j, TJ_WNEXT]
        for d in range(tq[q, TQ_DEMN]):
            j = tdem[q, d]
            if gpus[j] <= cap:
                cap -= gpus[j]
            else:
                preempt[n_pre] = j
                n_pre += 1
    return n_pre, n_start


@njit(cache=True)
def _t_first_due(h, size, tj, status, want, qseq, leave, n_leave, leaving, row, spare):
    """Tiresias._first_due: the earliest due time in the heap ``h`` whose job has status ``want`` (with the
    entry's run and queue) and is not one of ``leave[:n_leave]`` (``leaving``: all False, a scratch of flags);
    invalid entries are dropped for good. Returns ``(time or -1, size)``."""
    for m in range(n_leave):
        leaving[leave[m]] = True
    best, n_held = np.int64(-1), 0
    while size > 0:
        j = h[0, 2]
        if status[j] != want or qseq[j] != h[0, 3] or tj[j, TJ_Q] != h[0, 4]:
            size = _rh_pop(h, size, row)
        elif leaving[j]:
            size = _rh_pop(h, size, row)
            spare[n_held, :] = row
            n_held += 1
        else:
            best = h[0, 0]
            break
    for i in range(n_held):
        size = _rh_push(h, size, spare[i])
    for m in range(n_leave):
        leaving[leave[m]] = False
    return best, size


@njit(cache=True)
def _t_wakeup(now, tj, tc, dh, ph, limits, knob, gpus, submit, service, run_since, status, qseq, r_ticks, r_until,
              preempt, n_pre, start, n_start, leaving, row, spare):
    """Tiresias.wakeup (exact timer): the tick of the earliest queue jump after the plan, or -1 for none."""
    inf = np.int64(1) << 62
    best = inf
    for m in range(n_start):
        j = start[m]
        q = tj[j, TJ_Q]
        if q < limits.shape[0]:
            att = _attained(j, now, service, run_since, status)
            left = limits[q] - (att - _restore(j, now, status, run_since, r_ticks, r_until) - tj[j, TJ_OFF]) * gpus[j]
            best = min(best, now + max(-(-left // gpus[j]), 1))
    for m in range(n_pre):
        j = preempt[m]
        if not math.isnan(knob) and tj[j, TJ_Q] > 0 and tj[j, TJ_MARKED]:
            best = min(best, now + max(_t_promotion_in(j, now, knob, tj, submit, service, run_since, status), 1))
    t, tc[TC_DH] = _t_first_due(dh, tc[TC_DH], tj, status, _RUNNING, qseq, preempt, n_pre, leaving, row, spare)
    if t >= 0:
        best = min(best, t)
    t, tc[TC_PH] = _t_first_due(ph, tc[TC_PH], tj, status, _WAITING, qseq, start, n_start, leaving, row, spare)
    if t >= 0:
        best = min(best, t)
    if best == inf:
        return -1
    return max(best, now + 1)


@njit(cache=True)
def _t_plan(tj, tq, tdem, gpus, total_gpus, demand, preempt, start, on_nodes, st_free, st_counts, st_tot, gpn, policy,
            strict, node_rank, job_type, pl_off, pl_n, pl_c, pl_m, mark, nkeys, nperm, ntmp, skip, placed, lost, touched,
            lidx, starts_k, ckeys, perm, tmp, tw, qseq):
    """Tiresias.allocate: the walk, placed on nodes as Scheduler._place_on_nodes places it (the starts in walk
    order, then backfilled waiting jobs in key order: queue by queue, each in list order)."""
    n_pre, n_s = _t_walk(tj, tq, tdem, gpus, total_gpus, preempt, start)
    if not on_nodes or (n_pre == 0 and n_s == 0):
        return n_pre, n_s
    for c in range(n_pre):   # the candidates' keys: their places in the lists
        j = preempt[c]
        ckeys[c, 0], ckeys[c, 1], ckeys[c, 2] = tj[j, TJ_Q], tj[j, TJ_TIER], tj[j, TJ_STAMP]
    n_tw = 0   # every waiting job in key order: queue by queue, each in list order
    for q in range(tq.shape[0]):
        j = tq[q, TQ_WHEAD]
        while j >= 0:
            tw[n_tw] = j
            n_tw += 1
            j = tj[j, TJ_WNEXT]
    return _place_on_nodes(preempt, n_pre, start, n_s, ckeys, tw, n_tw, False, qseq, gpus, demand, st_free,
                           st_counts, st_tot, gpn, policy, strict, node_rank, job_type, pl_off, pl_n, pl_c, pl_m, mark,
                           nkeys, nperm, ntmp, skip, placed, lost, touched, lidx, starts_k, perm, tmp)


@njit(cache=True)
def _fragmented(t, now, free, demand, st_counts, st_tot, gpn, strict, total_gpus):
    """Simulator._account_fragmentation: GPU-ticks over ``[now, t)`` of free GPUs no waiting job can be placed
    on (fitting is monotone in demand: the least waiting demand decides)."""
    if t == now or free == 0 or demand[0] > total_gpus:
        return 0
    least = demand[0]
    if least > free or least > _node_cap(st_counts, st_tot, REAL, gpn, strict):
        return (t - now) * free
    return 0


@njit(cache=True)
def _plan_nodes(sched, preemptive, now, submit, est, service, run_since, status, seen, last_att, evals, loss, window,
                gpus, qseq, run, n_run, run_key, run_stamp, wk, wj, n_wait, free, total_gpus, demand, preempt, start,
                rkey, perm, tmp, kept, st_free, st_counts, st_tot, gpn, policy, strict, node_rank, job_type, pl_off,
                pl_n, pl_c, pl_m, mark, nkeys, nperm, ntmp, skip, placed, lost, touched, lidx, starts_k):
    """The plan at a scheduling point on nodes, as :func:`_plan` returns it, each start's placement in its slot.

    Non-preemptive: Scheduler._fill on the nodes (first fit in key order where a placement exists).
    Preemptive: the keep set on the GPU count (:func:`_plan`), then Scheduler._place_on_nodes: the starts
    placed without moving a running job (:func:`_place_preemptive`), listed in queue order, then, where a
    start waits, waiting jobs outside the plan backfilled in key order on partly used nodes.
    """
    if not preemptive:
        _copy_state(st_free, st_counts, st_tot, REAL, FREE)
        return 0, _fill_nodes(st_free, st_counts, st_tot, FREE, _node_cap(st_counts, st_tot, FREE, gpn, strict), gpn,
                              policy, strict, node_rank, job_type, gpus, wj, n_wait, skip, demand[0], start, 0, pl_off,
                              pl_n, pl_c, pl_m, mark, nkeys, nperm, ntmp)
    n_pre, n_s = _plan(sched, preemptive, now, submit, est, service, run_since, status, seen, last_att, evals, loss,
                       window, gpus, qseq, run, n_run, run_key, run_stamp, wk, wj, n_wait, free, total_gpus, demand,
                       preempt, start, rkey, perm, tmp, kept, False)
    if n_pre == 0 and n_s == 0:
        return 0, 0
    for c in range(n_pre):   # the candidates' keys now, for the ones a start displaces
        _key(sched, preempt[c], now, submit, est, service, run_since, status, seen, last_att, evals, loss, window,
             rkey, c)
    return _place_on_nodes(preempt, n_pre, start, n_s, rkey, wj, n_wait, True, qseq, gpus, demand, st_free, st_counts,
                           st_tot, gpn, policy, strict, node_rank, job_type, pl_off, pl_n, pl_c, pl_m, mark, nkeys,
                           nperm, ntmp, skip, placed, lost, touched, lidx, starts_k, perm, tmp)


@njit(cache=True)
def _place_on_nodes(preempt, n_pre, start, n_s, ckeys, order, n_order, queue_order, qseq, gpus, demand, st_free,
                    st_counts, st_tot, gpn, policy, strict, node_rank, job_type, pl_off, pl_n, pl_c, pl_m, mark, nkeys,
                    nperm, ntmp, skip, placed, lost, touched, lidx, starts_k, perm, tmp):
    """Scheduler._place_on_nodes: a plan decided on the GPU count (``preempt[:n_pre]`` in start order, their keys
    in ``ckeys``; ``start[:n_s]`` in key order) placed without moving a running job (:func:`_place_preemptive`);
    the placed starts listed in queue order (``queue_order``) or as given, then, where a start waits, waiting
    jobs outside the plan backfilled in key order (``order[:n_order]``: every waiting job so) on partly used
    nodes, their state once the plan is applied. Rewrites ``preempt`` and ``start``; returns their counts."""
    starts_k[:n_s] = start[:n_s]
    n_placed = _place_preemptive(st_free, st_counts, st_tot, gpn, policy, strict, node_rank, job_type, gpus, starts_k,
                                 n_s, preempt, n_pre, ckeys, placed, lost, touched, pl_off, pl_n, pl_c, pl_m, mark,
                                 nkeys, nperm, ntmp, perm, tmp, lidx)
    count = 0
    for i in range(n_s):
        if placed[i]:
            start[count] = starts_k[i]
            count += 1
    if count > 1 and queue_order:
        _reorder(start, count, qseq, ckeys, perm, tmp)
    if n_placed < n_s:
        cap = _partial_cap(st_counts, st_tot, FREE, gpn, strict)
        if cap:   # a start waits: backfill partly used nodes (their state once the plan is applied)
            _copy_state(st_free, st_counts, st_tot, FREE, PARTIAL)
            for n in range(st_free.shape[1]):
                if st_free[PARTIAL, n] == gpn:
                    _node_add(st_free, st_counts, st_tot, PARTIAL, n, -gpn)
            for i in range(n_s):
                skip[starts_k[i]] = True
            count = _fill_nodes(st_free, st_counts, st_tot, PARTIAL, cap, gpn, policy, strict, node_rank, job_type,
                                gpus, order, n_order, skip, demand[0], start, count, pl_off, pl_n, pl_c, pl_m, mark,
                                nkeys, nperm, ntmp)
            for i in range(n_s):
                skip[starts_k[i]] = False
    if count == 0:
        return 0, 0   # nothing placed: no change at all
    n_lost = 0
    for c in range(n_pre):
        if lost[c]:
            preempt[n_lost] = preempt[c]
            n_lost += 1
    return n_lost, count


@njit(cache=True)
def _settle(j, now, run_since, run_start, work, rnum, rden, rspread, spread_ticks, type_ticks, node_type, pl_off,
            pl_n, pl_c, pl_m):
    """Simulator._settle at the end of a run on nodes: work since the last checkpoint at the job's rate, and
    the run's spread and per-type GPU time. False where the exact product would leave int64."""
    ran = now - run_since[j]
    if ran > _SAFE // rnum[j]:
        return False
    work[j] += ran * rnum[j] // rden[j]
    ran = now - run_start[j]
    for k in range(pl_off[j], pl_off[j] + pl_m[j]):
        type_ticks[node_type[pl_n[k]]] += ran * pl_c[k]
    if rspread[j]:
        spread_ticks[j] += ran
    return True


@njit(cache=True)
def _push_on_nodes(ht, hs, hj, he, size, epoch, now, j, c, grid, evals, overhead, work, rnum, rden, seq):
    """:func:`_push_checkpoint` on nodes: the grid point is work at full speed, reached at the job's rate
    (``ceil(remaining work * den / num)`` ticks ahead). Returns -1 where the product would leave int64."""
    due = grid[j * evals + c - 1] + overhead[j] - work[j]
    if due > _SAFE // rden[j]:
        return -1
    due = -((-due * rden[j]) // rnum[j])
    if size == ht.shape[0]:
        size = _drop_void(ht, hs, hj, he, size, epoch)
    return _heap_push(ht, hs, hj, he, size, now + due, seq, j, epoch[j])


@njit(cache=True)
def episode(submit, est, gpus, grid, restart, obs, proxy, loss, peak, rlhf, items, pool_of, pool_off,
            arrivals, evals, total_gpus, sched, preemptive, window, stop, ip, fp, on_nodes, gpn, policy, strict,
            node_type, n_types, node_rank, job_type, rate_tab, limits, knob):
    """Play one episode. ``grid``: each job's service at each checkpoint (n * evals ticks,
    :meth:`~evalstop_gym.workload.Workload.checkpoint_ticks`, so no division per event); ``restart``
    (n ticks) is empty where resumes cost nothing; ``pool_of`` (each job's eval-size pool) and ``pool_off``
    (where each pool starts in one flat array, the factor pool and the proxy pool last, then the end) lay
    out the noise pools.

    On nodes (``on_nodes``): ``gpn`` GPUs per node, ``policy`` (CONSOLIDATE, FIRST_FIT, SPREAD) and ``strict``
    (consolidated placements only) as the Placer has them; ``node_type`` (each node's GPU type, ``0 ..
    n_types - 1``); ``node_rank[job type, node]``: the scheduler's GPU type preference (zeros for none);
    ``rate_tab[job type, mask of the GPU types held, spread?]``: the exact speed ``(num, den)``.

    Tiresias: ``limits`` (its thresholds, GPU-ticks) and ``knob`` (promote_knob, NaN for none). Its timer is
    an entry of the checkpoint heap with job ``n``, live while ``epoch[n]`` holds its counter.

    Returns ``(status, finish, service, stopped, seen, best_idx, first_start, peak_service, preemptions, now,
    spread_ticks, type_ticks, fragmentation)`` (the last three on nodes only)."""
    n = submit.shape[0]
    has_restart = restart.shape[0] > 0
    status = np.zeros(n, np.int64)
    service = np.zeros(n, np.int64)
    run_since = np.zeros(n, np.int64)
    overhead = np.zeros(n, np.int64)
    epoch = np.zeros(n + 1, np.int64)   # epoch[n]: the counter of the pending timer (-1: none)
    epoch[n] = -1
    timer_at = np.int64(-1)
    seen = np.zeros(n, np.int64)
    declines = np.zeros(n, np.int64)
    best_idx = np.full(n, -1, np.int64)
    best_score = np.full(n, -np.inf)
    last_att = np.zeros(n, np.int64)   # service when the job's last eval came out, ticks
    qseq = np.zeros(n, np.int64)
    key = np.zeros((n, 3))   # each job's key when it last entered the queue
    finish = np.full(n, -1, np.int64)
    first_start = np.full(n, -1, np.int64)
    peak_service = np.full(n, -1, np.int64)
    stopped = np.zeros(n, np.bool_)
    # the stoppers' noise pools and how much of each job's history they hold
    n_pools = pool_off.shape[0] - 1
    noisy = stop == CUSUM_CODE or stop == SMOOTHED_CODE or stop == DROPTEST_CODE or stop == DIVERGENCE_CODE
    pool = np.empty((2, pool_off[n_pools]))
    pool_cnt = np.zeros((n_pools, 2), np.int64)
    seen_eval = np.zeros(n, np.int64)
    seen_factor = np.zeros(n, np.int64)
    seen_proxy = np.zeros(n, np.int64)
    # checkpoints: a heap of (tick, counter, job, epoch)
    cap = 2 * n + 64  # live checkpoints are at most n: dropping the void ones always makes room
    ht = np.empty(cap, np.int64)
    hs = np.empty(cap, np.int64)
    hj = np.empty(cap, np.int64)
    he = np.empty(cap, np.int64)
    size = np.int64(0)
    # waiting jobs sorted by (key, queue stamp)
    wk = np.empty((n, 3))
    wq = np.empty(n, np.int64)
    wj = np.empty(n, np.int64)
    n_wait = np.int64(0)
    demand = np.zeros(total_gpus + 2, np.int64)
    demand[0] = total_gpus + 1
    # running jobs sorted by (run_key, run_stamp): the stamp counts starts, so with run_key 0 (every
    # scheduler but SRTF-Est) the list is in start order; SRTF-Est's run_key is fixed while a job runs
    run = np.empty(n, np.int64)
    run_key = np.zeros(n, np.int64)
    run_stamp = np.zeros(n, np.int64)
    started = np.int64(0)
    n_run = np.int64(0)
    # scratch for plans
    plan_a = np.empty(n, np.int64)
    plan_b = np.empty(n, np.int64)
    rkey = np.empty((n, 3))
    perm = np.empty(n, np.int64)
    tmp = np.empty(n, np.int64)
    kept = np.empty(n, np.bool_)
    # nodes: node states (REAL, then the planner's), each job's current placement, rate and run start
    n_nodes = node_type.shape[0]
    st_free = np.zeros((4, n_nodes), np.int64)
    st_counts = np.zeros((4, gpn + 1), np.int64)
    st_tot = np.zeros(4, np.int64)
    if on_nodes:
        st_free[REAL, :] = gpn
        st_counts[REAL, gpn] = n_nodes
        st_tot[REAL] = total_gpus
    pl_off = np.zeros(n + 1, np.int64)
    for j in range(n if on_nodes else 0):   # a job is on at most min(gpus, nodes) nodes
        pl_off[j + 1] = pl_off[j] + min(gpus[j], n_nodes)
    pl_n = np.empty(pl_off[n], np.int64)
    pl_c = np.empty(pl_off[n], np.int64)
    pl_m = np.zeros(n, np.int64)
    work = np.zeros(n, np.int64)       # work done, ticks at speed 1
    rnum = np.ones(n, np.int64)        # the current run's rate
    rden = np.ones(n, np.int64)
    rspread = np.zeros(n, np.bool_)
    run_start = np.zeros(n, np.int64)
    spread_ticks = np.zeros(n, np.int64)
    type_ticks = np.zeros(n_types, np.int64)
    frag = np.int64(0)
    mark = np.zeros(n_nodes, np.int64)
    nkeys = np.empty((n_nodes, 3))
    nperm = np.empty(n_nodes, np.int64)
    ntmp = np.empty(n_nodes, np.int64)
    skip = np.zeros(n, np.bool_)
    placed = np.empty(n, np.bool_)
    lost = np.empty(n, np.bool_)
    touched = np.zeros(n_nodes, np.bool_)
    lidx = np.empty(n, np.int64)
    starts_k = np.empty(n, np.int64)
    # Tiresias' lists and heaps (one row width for both heaps), and each job's resume time (JobView.restore_ticks)
    tiresias = sched == TIRESIAS
    n_q = limits.shape[0] + 1 if tiresias else 0
    tj = np.zeros((n if tiresias else 0, TJ_FIELDS), np.int64)
    tq = np.full((n_q, 6), -1, np.int64)
    tq[:, TQ_RGPUS] = 0
    tq[:, TQ_DEMN] = 0
    tdem = np.empty((n_q, n), np.int64)
    tc = np.zeros(8, np.int64)
    tcap = 4 * n + 64 if tiresias else 0
    dh = np.empty((tcap, 7), np.int64)
    ph = np.empty((tcap, 7), np.int64)
    spare = np.empty((tcap, 7), np.int64)
    row = np.zeros(7, np.int64)
    news = np.empty(n, np.int64)
    changed = np.empty(n, np.int64)
    t_started = np.empty(n, np.int64)
    tw = np.empty(n, np.int64)
    leaving = np.zeros(n, np.bool_)
    r_ticks = np.zeros(n, np.int64)
    r_until = np.zeros(n, np.int64)

    arrival_ticks = np.empty(n + 1, np.int64)
    for m in range(n):
        arrival_ticks[m] = submit[arrivals[m]]
    arrival_ticks[n] = NEVER
    nxt = np.int64(0)
    seq = n
    queued = np.int64(0)
    now = np.int64(0)
    free = total_gpus
    dirty = False
    active = n
    preemptions = np.int64(0)

    while True:
        at = arrival_ticks[nxt]
        if dirty and at > now and (size == 0 or ht[0] > now):
            dirty = False
            # ---- a scheduling point: the plan, then applied (preemptions first) ----
            n_pre, n_start = np.int64(0), np.int64(0)
            wake = np.int64(-1)
            if tiresias:
                if tcap - max(tc[TC_DH], tc[TC_PH]) < 3 * n + 8:   # a point pushes at most 3 entries a job
                    dh, ph, spare = _grown(dh, 3 * n + 8), _grown(ph, 3 * n + 8), _grown(spare, 3 * n + 8)
                    tcap = dh.shape[0]
                _t_sync(now, tj, tq, tc, tdem, dh, ph, limits, knob, gpus, submit, service, run_since, status, qseq,
                        r_ticks, r_until, news, changed, t_started, rkey, perm, tmp, lidx, row)
                if n_wait > 0:
                    n_pre, n_start = _t_plan(tj, tq, tdem, gpus, total_gpus, demand, plan_a, plan_b, on_nodes, st_free,
                                             st_counts, st_tot, gpn, policy, strict, node_rank, job_type, pl_off, pl_n,
                                             pl_c, pl_m, mark, nkeys, nperm, ntmp, skip, placed, lost, touched, lidx,
                                             starts_k, rkey, perm, tmp, tw, qseq)
                wake = _t_wakeup(now, tj, tc, dh, ph, limits, knob, gpus, submit, service, run_since, status, qseq,
                                 r_ticks, r_until, plan_a, n_pre, plan_b, n_start, leaving, row, spare)
            elif n_wait > 0 and (preemptive or free > 0):
                if on_nodes:
                    n_pre, n_start = _plan_nodes(
                        sched, preemptive, now, submit, est, service, run_since, status, seen, last_att, evals, loss,
                        window, gpus, qseq, run, n_run, run_key, run_stamp, wk, wj, n_wait, free, total_gpus, demand,
                        plan_a, plan_b, rkey, perm, tmp, kept, st_free, st_counts, st_tot, gpn, policy, strict,
                        node_rank, job_type, pl_off, pl_n, pl_c, pl_m, mark, nkeys, nperm, ntmp, skip, placed, lost,
                        touched, lidx, starts_k)
                else:
                    n_pre, n_start = _plan(sched, preemptive, now, submit, est, service, run_since, status, seen,
                                           last_att, evals, loss, window, gpus, qseq, run, n_run, run_key, run_stamp,
                                           wk, wj, n_wait, free, total_gpus, demand, plan_a, plan_b, rkey, perm, tmp,
                                           kept, True)
            for m in range(n_pre):  # preempt: the job keeps its progress and waits again
                j = plan_a[m]
                if on_nodes:
                    if not _settle(j, now, run_since, run_start, work, rnum, rden, rspread, spread_ticks, type_ticks,
                                   node_type, pl_off, pl_n, pl_c, pl_m):
                        return OVERFLOW, finish, service, stopped, seen, best_idx, first_start, peak_service, \
                            preemptions, now, spread_ticks, type_ticks, frag
                    _use(st_free, st_counts, st_tot, REAL, j, pl_off, pl_n, pl_c, pl_m, 1)
                if r_until[j]:
                    _cut_resume(j, now, run_since, rnum, rden, restart, overhead, r_ticks, r_until)
                if tiresias:
                    changed[tc[TC_CHANGED]] = j
                    tc[TC_CHANGED] += 1
                service[j] += now - run_since[j]
                epoch[j] += 1
                n_run = _run_out(run, n_run, run_key, run_stamp, j)
                free += gpus[j]
                status[j] = _WAITING
                queued += 1
                qseq[j] = queued
                _key(sched, j, now, submit, est, service, run_since, status, seen, last_att, evals, loss, window,
                     key, j)
                n_wait = _enqueue(wk, wq, wj, n_wait, key, queued, j, gpus[j], demand)
                preemptions += 1
            for m in range(n_start):
                j = plan_b[m]
                n_wait = _dequeue(wk, wq, wj, n_wait, key, j, qseq[j], gpus[j], demand)
                started += 1
                run_stamp[j] = started
                if sched == SRTF_EST:   # its key while it runs is max(this - now, 0)
                    run_key[j] = est[j] - service[j] + now
                n_run = _run_in(run, n_run, run_key, run_stamp, j)
                free -= gpus[j]
                status[j] = _RUNNING
                run_since[j] = now
                if on_nodes:
                    _use(st_free, st_counts, st_tot, REAL, j, pl_off, pl_n, pl_c, pl_m, -1)
                    rnum[j], rden[j], rspread[j] = _rate_of(j, pl_off, pl_n, pl_m, node_type, gpn, gpus[j], rate_tab,
                                                            job_type)
                    run_start[j] = now
                if first_start[j] < 0:
                    first_start[j] = now
                elif has_restart:  # a resume: its cost in GPU time shifts the job's checkpoints
                    overhead[j] += restart[j]
                    if restart[j] > _SAFE // rden[j]:
                        return OVERFLOW, finish, service, stopped, seen, best_idx, first_start, peak_service, \
                            preemptions, now, spread_ticks, type_ticks, frag
                    r_until[j] = now - ((-restart[j] * rden[j]) // rnum[j])   # the view's clock for the resume
                if tiresias:
                    t_started[tc[TC_STARTED]] = j
                    tc[TC_STARTED] += 1
                seq += 1
                if on_nodes:
                    size = _push_on_nodes(ht, hs, hj, he, size, epoch, now, j, seen[j] + 1, grid, evals, overhead,
                                          work, rnum, rden, seq)
                    if size < 0:
                        return OVERFLOW, finish, service, stopped, seen, best_idx, first_start, peak_service, \
                            preemptions, now, spread_ticks, type_ticks, frag
                else:
                    size = _push_checkpoint(ht, hs, hj, he, size, epoch, now, j, seen[j] + 1, grid, evals,
                                            overhead, service, seq)
            if tiresias:   # Simulator.set_timer: the plan's wake-up replaces the pending one
                if epoch[n] < 0 or wake != timer_at:
                    epoch[n] = -1
                    if wake >= 0:
                        seq += 1
                        epoch[n], timer_at = seq, wake
                        if size == ht.shape[0]:
                            size = _drop_void(ht, hs, hj, he, size, epoch)
                        size = _heap_push(ht, hs, hj, he, size, wake, seq, n, seq)
            continue
        if size > 0 and ht[0] < at:  # on equal times the arrival goes first: its counter is lower
            t, j, e = ht[0], hj[0], he[0]
            size = _heap_pop(ht, hs, hj, he, size)
            if e != epoch[j]:
                continue  # preempted or stopped since it was pushed (a timer: replaced or withdrawn)
            if on_nodes:
                frag += _fragmented(t, now, free, demand, st_counts, st_tot, gpn, strict, total_gpus)
            now = t
            if j == n:   # the timer: a scheduling point
                epoch[n] = -1
                dirty = True
                continue
            if r_until[j]:
                _close_restore(j, now, run_since, r_ticks, r_until)
            # ---- eval checkpoint of job j ----
            i = seen[j]
            base = j * evals
            if on_nodes:   # the event fell on the first tick at which work reached the target
                work[j] = grid[base + i] + overhead[j]
            score = obs[base + i]
            if i:
                declines[j] = declines[j] + 1 if score < obs[base + i - 1] else 0
            if score > best_score[j]:
                best_score[j], best_idx[j] = score, i
            service[j] += now - run_since[j]
            run_since[j] = now
            last_att[j] = service[j]
            if i == peak[j]:
                peak_service[j] = service[j]
            i += 1
            seen[j] = i
            ended = i == evals
            if not ended:
                seq += 1
                if on_nodes:
                    size = _push_on_nodes(ht, hs, hj, he, size, epoch, now, j, i + 1, grid, evals, overhead, work,
                                          rnum, rden, seq)
                    if size < 0:
                        return OVERFLOW, finish, service, stopped, seen, best_idx, first_start, peak_service, \
                            preemptions, now, spread_ticks, type_ticks, frag
                else:
                    size = _push_checkpoint(ht, hs, hj, he, size, epoch, now, j, i + 1, grid, evals,
                                            overhead, service, seq)
                # (a call with many arrays is not free: the rules that need few take a call of their own)
                if stop != NO_STOP_CODE and (
                        noise_stop(stop, j, i - 1, evals, obs, proxy, rlhf, items, pool_of, n_pools - 2, n_pools - 1,
                                   ip, fp, pool, pool_off, pool_cnt, seen_eval, seen_factor, seen_proxy) if noisy
                        else rule_stop(stop, j, i - 1, evals, obs, loss, declines, rlhf, ip, fp)):
                    stopped[j] = True
                    ended = True
            if ended:  # completed, or stopped: its GPUs are free now
                if on_nodes:
                    _settle(j, now, run_since, run_start, work, rnum, rden, rspread, spread_ticks, type_ticks,
                            node_type, pl_off, pl_n, pl_c, pl_m)   # ran 0 since this checkpoint: no product
                    _use(st_free, st_counts, st_tot, REAL, j, pl_off, pl_n, pl_c, pl_m, 1)
                if tiresias:
                    changed[tc[TC_CHANGED]] = j
                    tc[TC_CHANGED] += 1
                n_run = _run_out(run, n_run, run_key, run_stamp, j)
                free += gpus[j]
                status[j] = _ENDED
                epoch[j] += 1
                finish[j] = now
                active -= 1
                dirty = True
        elif at != NEVER:
            if on_nodes:
                frag += _fragmented(at, now, free, demand, st_counts, st_tot, gpn, strict, total_gpus)
            now = at
            j = arrivals[nxt]
            nxt += 1
            status[j] = _WAITING
            queued += 1
            qseq[j] = queued
            _key(sched, j, now, submit, est, service, run_since, status, seen, last_att, evals, loss, window, key, j)
            n_wait = _enqueue(wk, wq, wj, n_wait, key, queued, j, gpus[j], demand)
            if tiresias:
                news[tc[TC_NEW]] = j
                tc[TC_NEW] += 1
            dirty = True
        else:
            code = STALLED if active else 0
            return code, finish, service, stopped, seen, best_idx, first_start, peak_service, preemptions, now, \
                spread_ticks, type_ticks, frag
