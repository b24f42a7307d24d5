"""Placement: which nodes a job's GPUs come from, and how fast it then runs.

Rules shared by every policy (``ClusterSpec.placement``):

* a job of at most ``gpus_per_node`` GPUs runs within one node when one has
  room; a larger job takes ``gpus // gpus_per_node`` whole free nodes plus its
  remainder on one more node. Either way it is on its fewest possible nodes,
  ``ceil(gpus / gpus_per_node)``: *consolidated*;
* a job on more nodes than that is *spread* and runs at ``spread_penalty`` of
  its speed (per job type, :mod:`evalstop_gym.cluster`).

The policies differ in which node they pick and in what happens when no
consolidated placement exists:

* ``consolidate``: best fit, the node with the fewest free GPUs that holds
  the job, so whole nodes stay free for large jobs. A job that cannot be
  consolidated does not fit: it waits (as Tiresias's consolidation does).
* ``first-fit``: the lowest-numbered node that holds the job; when none can,
  the job is spread over the lowest-numbered nodes with free GPUs.
* ``spread``: worst fit, the node with the most free GPUs (balancing load over
  nodes); when no consolidated placement exists, the job is spread over the
  nodes with the most free GPUs.

Under ``first-fit`` and ``spread`` a job fits whenever enough GPUs are free
anywhere, as in the flat pool; under ``consolidate`` it fits when a
consolidated placement exists. In both cases fitting is monotone in demand (if
``g`` GPUs fit, so do fewer), so "the largest demand that fits" (:attr:`Pool.cap`)
answers every fit question the allocator asks.

Speed is exact. A job's *rate* is the fraction ``num / den`` (from the
spec's exact factors): the slowest GPU type it holds (synchronous training
waits for its slowest worker) times the spread penalty if spread. Its
length is work measured at rate 1, in ticks; run for ``t`` ticks at rate
``num / den`` it does ``t * num // den`` ticks of work, and it reaches a
work target ``W`` from work ``w`` after ``ceil((W - w) * den / num)`` ticks.
With a rate of at most 1 the work at that instant is exactly ``W``; a
preemption mid-run drops the fraction of a work tick not yet completed.
"""

from __future__ import annotations

from typing import Sequence

from .cluster import ClusterSpec
from .config import JOB_TYPES

Placement = tuple  # ((node, gpus), ...) sorted by node


class Placer:
    """The placement policy of one :class:`ClusterSpec`: chooses nodes and gives rates."""

    def __init__(self, spec: ClusterSpec):
        self.spec = spec
        self.gpn = spec.gpus_per_node
        self.node_type = spec.types_of_nodes
        self.strict = spec.placement == "consolidate"
        self.policy = spec.placement
        self._rates: dict[tuple, tuple] = {}  # (job type, placement) -> run_facts
        # every run at speed 1, never spread (one GPU type at speed 1, consolidated placement only):
        # work is then service, as on the flat pool
        self.uniform_speed = self.strict and len(spec.gpu_types) == 1 and all(
            spec.speed(spec.gpu_types[0], t) == 1 for t in JOB_TYPES)

    # -- fitting -----------------------------------------------------------------------
    def nodes(self, free: list[int]) -> "Nodes":
        """Node state over ``free`` (GPUs free per node; the list is shared, not copied)."""
        return Nodes(free, self.gpn, self.strict)

    def empty(self) -> "Nodes":
        """Node state of the cluster with every GPU free."""
        n, g = self.spec.nodes, self.gpn
        return Nodes([g] * n, g, self.strict, [0] * g + [n], n * g)

    def cap(self, free: Sequence[int]) -> int:
        """The largest demand that can be placed on nodes with ``free`` GPUs each."""
        return self.nodes(list(free)).cap()

    def place(self, free: Sequence[int], gpus: int, prefer: dict[str, int] | None = None,
              counts: Sequence[int] | None = None, spill: bool = True) -> Placement | None:
        """Nodes for a job of ``gpus`` GPUs (``((node, count), ...)``), or None if it does not fit.

        ``prefer`` ranks GPU types (lower first): nodes of a better-ranked
        type are chosen first, then the policy's own order decides. ``counts``:
        the number of nodes at each free count (:class:`Nodes` keeps it), if known.
        ``spill=False``: consolidated placements only, under any policy.
        """
        g = self.gpn
        if not prefer:  # the common cases, with the same choice as the general path below, faster
            if counts is None:
                counts = [0] * (g + 1)
                for f in free:
                    counts[f] += 1
            if gpus < g:  # one partly used node
                if self.policy == "first-fit":
                    for n, f in enumerate(free):
                        if f >= gpus:
                            return ((n, gpus),)
                else:  # best fit: the fewest free GPUs that hold the job; worst fit: the most
                    for f in range(gpus, g + 1) if self.strict else range(g, gpus - 1, -1):
                        if counts[f]:
                            return ((free.index(f), gpus),)  # the lowest-numbered such node
            elif gpus % g == 0 and counts[g] >= gpus // g:  # whole nodes, the lowest-numbered free ones
                n, whole = -1, []
                for _ in range(gpus // g):
                    n = free.index(g, n + 1)
                    whole.append((n, g))
                return tuple(whole)
        rank = (lambda n: prefer.get(self.node_type[n], len(prefer))) if prefer else (lambda n: 0)
        if self.policy == "consolidate":
            order = lambda n: (rank(n), free[n], n)        # best fit  # noqa: E731
        elif self.policy == "first-fit":
            order = lambda n: (rank(n), n)                 # noqa: E731
        else:
            order = lambda n: (rank(n), -free[n], n)       # worst fit  # noqa: E731
        whole, rem = divmod(gpus, g)
        nodes = range(len(free))
        taken: dict[int, int] = {}
        if whole:
            full = sorted((n for n in nodes if free[n] == g), key=order)
            if len(full) >= whole:
                for n in full[:whole]:
                    taken[n] = g
            else:
                taken = None
        if taken is not None and rem:
            fits = [n for n in nodes if free[n] >= rem and n not in taken]
            if fits:
                taken[min(fits, key=order)] = rem
            else:
                taken = None
        if taken is None:  # no consolidated placement
            if self.strict or not spill or sum(free) < gpus:
                return None
            taken, need = {}, gpus
            for n in sorted((n for n in nodes if free[n] > 0), key=order):
                taken[n] = min(free[n], need)
                need -= taken[n]
                if need == 0:
                    break
        return tuple(sorted(taken.items()))

    # -- speed -------------------------------------------------------------------------
    def rate(self, job_type: str, where: Placement) -> tuple[int, int] | None:
        """Exact speed ``(num, den)`` of a ``job_type`` job on ``where``; None for speed 1."""
        return self.run_facts(job_type, where)[0]

    def run_facts(self, job_type: str, where: Placement) -> tuple:
        """``(rate, spread?, ((GPU type, GPUs), ...))`` of a ``job_type`` job on ``where`` (cached)."""
        key = (job_type, where)
        facts = self._rates.get(key)
        if facts is None:
            spec = self.spec
            speed = min(spec.speed(self.node_type[n], job_type) for n, _ in where)
            spread = self.is_spread(where)
            if spread:
                speed *= spec.penalty(job_type)
            facts = self._rates[key] = (None if speed == 1 else (speed.numerator, speed.denominator), spread,
                                        tuple((self.node_type[n], c) for n, c in where))
        return facts

    def is_spread(self, where: Placement) -> bool:
        return len(where) > -(-sum(c for _, c in where) // self.gpn)


def consolidated_cap(counts: Sequence[int], gpn: int) -> int:
    """The largest consolidated demand: whole free nodes plus the fullest partly free node's GPUs.

    ``counts[f]``: how many nodes have ``f`` free GPUs (``0 <= f <= gpn``).
    """
    f = gpn - 1
    while f and not counts[f]:
        f -= 1
    return counts[gpn] * gpn + f


class Nodes:
    """Free GPUs per node, with the number of nodes at each free count, so that
    :meth:`cap` costs ``O(gpus_per_node)`` rather than ``O(nodes)`` (and nothing
    again until the next change)."""

    __slots__ = ("free", "counts", "total", "gpn", "strict", "_cap")

    def __init__(self, free: list[int], gpn: int, strict: bool, counts: list[int] | None = None,
                 total: int | None = None, cap: int | None = None):
        self.free, self.gpn, self.strict = free, gpn, strict
        if counts is None:
            counts = [0] * (gpn + 1)
            for f in free:
                counts[f] += 1
        self.counts = counts
        self.total = sum(free) if total is None else total
        self._cap = cap  # None: not known since the last change

    def copy(self) -> "Nodes":
        return Nodes(list(self.free), self.gpn, self.strict, list(self.counts), self.total, self._cap)

    def cap(self) -> int:
        """The largest demand that can be placed (see the module docstring)."""
        if not self.strict:
            return self.total
        if self._cap is None:
            self._cap = consolidated_cap(self.counts, self.gpn)
        return self._cap

    def partial_cap(self) -> int:
        """:meth:`cap` with every wholly free node left out."""
        if not self.strict:
            return self.total - self.counts[self.gpn] * self.gpn
        return consolidated_cap(self.counts[:-1] + [0], self.gpn)

    def partial(self) -> "Nodes":
        """A copy with every wholly free node left out (its GPUs counted as used)."""
        g, counts = self.gpn, list(self.counts)
        counts[0] += counts[g]
        whole, counts[g] = counts[g], 0
        return Nodes([0 if f == g else f for f in self.free], g, self.strict, counts, self.total - whole * g)

    def use(self, where: Placement, sign: int = -1) -> None:
        """Take (``sign=-1``) or give back (``+1``) the GPUs of ``where``."""
        free, counts = self.free, self.counts
        for n, c in where:
            f = free[n]
            free[n] = f + sign * c
            counts[f] -= 1
            counts[f + sign * c] += 1
            self.total += sign * c
        self._cap = None


class FlatPool:
    """Tentative allocation on the flat pool: a count of free GPUs."""

    __slots__ = ("cap",)
    placed = None

    def __init__(self, free: int):
        self.cap = free

    def take(self, v) -> None:
        self.cap -= v.gpus


class BestFitPool:
    """Tentative allocation under ``consolidate`` with no GPU type preference: node counts alone.

    Best fit with ties to the lowest-numbered node changes only how many nodes
    have each free count (a job of ``r < gpus_per_node`` GPUs moves one node
    from the smallest free count ``f >= r`` to ``f - r``; whole nodes move
    from full to empty), and capacity depends on nothing else. So the plan
    need not name nodes (:attr:`placed` is None): the simulator, starting
    the jobs in plan order on the same state, chooses the nodes
    :class:`NodePool` would have chosen, once (tested).
    """

    __slots__ = ("counts", "gpn", "cap")
    placed = None

    def __init__(self, nodes: Nodes):
        self.counts, self.gpn, self.cap = list(nodes.counts), nodes.gpn, nodes.cap()

    def take(self, v) -> None:
        """Place waiting job ``v`` (it must fit: ``v.gpus <= cap``)."""
        counts, g = self.counts, self.gpn
        whole, rem = divmod(v.gpus, g)
        if whole:
            counts[g] -= whole
            counts[0] += whole
        if rem:
            f = rem
            while not counts[f]:  # the tightest node that holds the remainder
                f += 1
            counts[f] -= 1
            counts[f - rem] += 1
        self.cap = consolidated_cap(counts, g)


class NodePool:
    """Tentative allocation on nodes: what the greedy allocator fills while it plans.

    ``take`` places a waiting job by the placement policy on the GPUs still
    free and records where (:attr:`placed`, handed to the simulator with the plan).
    """

    __slots__ = ("placer", "nodes", "cap", "placed", "cluster", "prefer")

    def __init__(self, placer: Placer, nodes: Nodes, cluster=None, prefer=None):
        self.placer = placer
        self.nodes = nodes
        self.cap = nodes.cap()
        self.placed: dict[int, Placement] = {}
        self.cluster, self.prefer = cluster, prefer

    def take(self, v) -> None:
        """Place waiting job ``v`` (it must fit: ``v.gpus <= cap``)."""
        nodes = self.nodes
        where = self.placer.place(nodes.free, v.gpus, self.prefer and self.prefer(v, self.cluster), nodes.counts)
        self.nodes.use(where)
        self.cap = self.nodes.cap()
        self.placed[v.job_id] = where


def place_preemptive(placer: Placer, nodes: Nodes, starts, candidates, prefer=None, rank=None) -> tuple:
    """Place a preemptive plan decided on the GPU count, without moving a running job.

    ``nodes``: the cluster's node state now (not changed). ``starts``: waiting
    jobs the plan starts, in key order; ``candidates``: running jobs it would
    preempt, in start order; ``rank(job)``: their key (sorted by it, stably,
    only where it matters); ``prefer(job)``: GPU type ranks (or None). Each
    start, in turn, is placed by the policy consolidated on the GPUs free now
    (less those taken by earlier starts) if it can be; otherwise consolidated
    on those plus the candidates' GPUs, displacing candidates; otherwise
    (``first-fit``, ``spread``) spread, likewise in that order; otherwise it
    waits. Then every candidate whose GPUs are all still there, in key order,
    keeps running.
    Returns ``(placed, preempted, after)``: job id -> placement of each placed
    start, the ids of the candidates that do not keep running, and the GPUs
    free once the plan is applied (``nodes`` itself if nothing changes; not to
    be changed). ``after`` is complete only when some start waits (the caller
    backfills then); otherwise the last start may not be counted in it.
    """
    free = nodes         # GPUs free now, less the starts' (copied before its first change)
    room = None          # the same plus the candidates' GPUs not taken by a start (made when needed)
    spills = (False,) if placer.strict else (False, True)  # consolidated first; spread only then
    placed: dict[int, Placement] = {}
    touched: set[int] = set()  # nodes where a start took some candidate's GPUs
    last = len(starts) - 1
    for i, v in enumerate(starts):
        pref = prefer(v) if prefer else None
        for spill in spills:
            where = placer.place(free.free, v.gpus, pref, free.counts, spill) if v.gpus <= free.cap() else None
            if where is not None:
                on_free = True
                break
            if candidates:
                if room is None:
                    room = free.copy()
                    held: dict[int, int] = {}  # the candidates' GPUs per node, given back at once
                    for c in candidates:
                        for n, g in c.nodes:
                            held[n] = held.get(n, 0) + g
                    room.use(tuple(held.items()), +1)
                where = placer.place(room.free, v.gpus, pref, room.counts, spill) if v.gpus <= room.cap() else None
                if where is not None:
                    on_free = False
                    break
        else:
            continue  # not even on the candidates' GPUs: it waits
        placed[v.job_id] = where
        if i == last and room is None and len(placed) == len(starts):
            break  # nothing reads the state after the last start: no candidate displaced, nothing to backfill
        if free is nodes:
            free = nodes.copy()
        if room is not None:
            room.use(where)
        if on_free:
            free.use(where)
        else:  # the start uses a node's free GPUs first, then candidates': free drops by min(taken, free)
            f = free.free
            touched.update(n for n, c in where if c > f[n])
            free.use(tuple((n, min(c, f[n])) for n, c in where if f[n]))
    if not touched:  # no start went onto a candidate's GPUs: every candidate keeps running
        return placed, (), free
    # Only candidates with GPUs on a touched node can have lost any; elsewhere all keep running. In key
    # order, each of them keeps running if its GPUs are all still there; the GPUs of the others are free
    # after the plan unless a start took them.
    preempted = set()
    r, after = room.free, free
    losing = [c for c in candidates if not touched.isdisjoint(dict(c.nodes))]
    for v in (sorted(losing, key=rank) if rank else losing):
        if all(r[n] >= c for n, c in v.nodes):
            room.use(v.nodes)
        else:
            preempted.add(v.job_id)
            after.use(tuple((n, c) for n, c in v.nodes if n not in touched), +1)
    after.use(tuple((n, r[n] - after.free[n]) for n in touched), +1)
    return placed, preempted, after
