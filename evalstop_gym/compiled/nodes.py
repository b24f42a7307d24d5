"""A cluster of nodes as the kernel's plain arrays: placement policy, GPU types, type preferences, exact rates.

The kernel (:mod:`.kernel`) places jobs as :class:`~evalstop_gym.placement.Placer` does and runs them at the
rates :meth:`~evalstop_gym.placement.Placer.run_facts` gives; this module turns a
:class:`~evalstop_gym.cluster.ClusterSpec` and a scheduler's GPU type preference into the numbers it reads.
A rate depends on the job type, the set of GPU types a placement holds (the slowest decides) and whether it
is spread, so every one is computed here once, as exact fractions, into a table indexed by a bit mask of
GPU types. This module does not import numba.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import NamedTuple

import numpy as np

from ..checks import JOB_TYPES
from ..cluster import PLACEMENTS, ClusterSpec
from ..placement import Placer

# GPU types beyond which the rate table (2 ** types entries a job type) is not worth building: the Python path plays
MAX_TYPES = 8


class NodeArgs(NamedTuple):
    """The kernel's cluster arguments (``episode``'s ``on_nodes`` to ``rate_tab``)."""

    on_nodes: bool
    gpn: int
    policy: int                # index in PLACEMENTS: consolidate, first-fit, spread (the kernel's codes)
    strict: bool
    node_type: np.ndarray      # each node's GPU type, as its index in spec.gpu_types
    n_types: int
    node_rank: np.ndarray      # [job type, node]: the scheduler's rank of the node's GPU type (zeros for none)
    rate_tab: np.ndarray       # [job type, mask of GPU types held, spread?] -> (num, den)
    rated: bool                # some run is slower than its measured speed (Placer.uniform_speed is False)


def flat_args() -> NodeArgs:
    """The flat pool: no node arrays."""
    empty = np.zeros(0, np.int64)
    return NodeArgs(False, 1, 0, True, empty, 1, np.zeros((len(JOB_TYPES), 0), np.int64),
                    np.ones((len(JOB_TYPES), 1, 2, 2), np.int64), False)


def node_args(spec: ClusterSpec, scheduler) -> NodeArgs | None:
    """``spec`` as the kernel's arrays with ``scheduler``'s GPU type preference, or None where the compiled path
    does not play it (more than :data:`MAX_TYPES` GPU types)."""
    types = spec.gpu_types
    if len(types) > MAX_TYPES:
        return None
    node_type = np.array([types.index(t) for t in spec.types_of_nodes], np.int64)
    rank = np.zeros((len(JOB_TYPES), spec.nodes), np.int64)
    if scheduler._ranks_types:
        cluster = SimpleNamespace(spec=spec)   # what a preference may read: the public spec and the job's type
        for i, job_type in enumerate(JOB_TYPES):
            prefer = scheduler.type_preference(SimpleNamespace(job_type=job_type), cluster)
            if prefer:   # Placer.place's rank: a type the preference leaves out comes after every listed one
                rank[i] = [prefer.get(t, len(prefer)) for t in spec.types_of_nodes]
    rates = np.ones((len(JOB_TYPES), 1 << len(types), 2, 2), np.int64)
    for i, job_type in enumerate(JOB_TYPES):
        for mask in range(1, 1 << len(types)):
            slowest = min(spec.speed(t, job_type) for b, t in enumerate(types) if mask >> b & 1)
            for spread, speed in ((0, slowest), (1, slowest * spec.penalty(job_type))):
                rates[i, mask, spread] = speed.numerator, speed.denominator
    return NodeArgs(True, spec.gpus_per_node, PLACEMENTS.index(spec.placement), spec.placement == "consolidate",
                    node_type, len(types), rank, rates, not Placer(spec).uniform_speed)
