"""The compiled path: whole episodes of built-in policies played by one numba function, bit for bit.

:func:`run_episode` is what the runners call instead of
``drive(Simulator(workload), policy)``: it plays the episode in compiled code
(:mod:`.kernel`) when the policy is a supported built-in (:func:`compiled_pairs`,
:mod:`.pairs`), on the flat pool or on a cluster of nodes (:mod:`.nodes`: every
placement policy, GPU types and their throughputs, spread penalties), and on
the Python path otherwise, with the same :class:`~evalstop_gym.simulator.Outcome`
either way (``tests/test_compiled.py`` compares every field, job by job). The
Python simulator stays the reference; Gymnasium and PettingZoo episodes, a
user's own policy, Tiresias with ``order="arrival"`` or the reference demotion
timer and ``tie="arrival"`` always take it, and so does an episode the kernel cannot play
exactly: NaN in the histories a rule sorts, more than
:data:`~.nodes.MAX_TYPES` GPU types, or a rate whose exact arithmetic would
leave int64 (the kernel says so and the Python path plays the episode).

``EVALSTOP_COMPILED`` (environment): ``0`` forces the Python path; ``1`` asks
for the compiled one and says once per process, on stderr as a warning, when
it cannot be had because numba is not installed (``pip install
evalstop-gym[fast]``); unset, the compiled path is taken wherever it can be,
silently. numba compiles the kernel at its first call and caches the machine
code beside the module (``cache=True``), so later processes load it
(``benchmarks/bench_compiled.py`` shows both costs).
"""

from __future__ import annotations

import functools
import os
import warnings

import numpy as np

from ..checks import JOB_TYPES, ConfigError
from ..simulator import Outcome, SimulationError, Simulator
from ..timebase import MAX_HOURS, TICKS_PER_HOUR, to_ticks
from .nodes import NodeArgs, flat_args, node_args
from .pairs import (CUSUM_CODE, DIVERGENCE_CODE, DROPTEST_CODE, LOSSAWARE_CODE, LOSSPLATEAU_CODE, SMOOTHED_CODE,
                    KernelPolicy, compiled_pairs, kernel_policy)

ENV = "EVALSTOP_COMPILED"
MODES = {"": "auto", "0": "off", "1": "on"}
NOISE_AWARE = (CUSUM_CODE, SMOOTHED_CODE, DROPTEST_CODE, DIVERGENCE_CODE)   # stoppers that pool noise estimates

__all__ = ["ENV", "compiled_pairs", "fast_outcome", "kernel_policy", "mode", "numba_available", "preload",
           "run_episode"]


def mode() -> str:
    """``"off"``, ``"on"`` or ``"auto"`` from ``EVALSTOP_COMPILED`` (module docstring)."""
    value = os.environ.get(ENV, "").strip()
    if value not in MODES:
        raise ConfigError(ENV, value, "must be 0 (the Python path), 1 (the compiled path) or unset (compiled "
                                      "where possible)")
    return MODES[value]


@functools.lru_cache(maxsize=1)
def numba_available() -> bool:
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


@functools.lru_cache(maxsize=1)
def _say_python_path() -> None:
    """Once per process: the compiled path was asked for and cannot be had."""
    warnings.warn(f"{ENV}=1 but numba is not installed: episodes play on the Python path "
                  "(pip install 'evalstop-gym[fast]' for the compiled one)", RuntimeWarning, stacklevel=3)


def fast_outcome(workload, policy) -> Outcome | None:
    """The outcome of ``policy`` on ``workload`` from the compiled path, or None where it does not apply."""
    m = mode()
    if m == "off":
        return None
    kp = kernel_policy(policy)
    if kp is None:
        return None
    spec = workload.spec
    cluster = flat_args() if spec.trivial else node_args(spec, getattr(policy, "base", policy))
    if cluster is None:
        return None
    if not numba_available():
        if m == "on":
            _say_python_path()
        return None
    if kp.stop in NOISE_AWARE and not _finite_histories(workload) or \
            (kp.sched == LOSSAWARE_CODE or kp.stop == LOSSPLATEAU_CODE) and not np.isfinite(workload.curves.loss).all():
        return None   # the kernel's pools and sorted keys order values by comparisons, which NaN would defeat
    policy.reset()   # as drive() does: a built-in policy holds no state the kernel would need
    return _play(workload, kp, cluster)


def _finite_histories(w) -> bool:
    """Every eval score finite, and every RLHF job's proxy readings (what the noise pools hold)."""
    rlhf = w.job_type == JOB_TYPES.index("rlhf")
    return bool(np.isfinite(w.observed).all() and np.isfinite(w.curves.proxy[rlhf]).all())


@functools.lru_cache(maxsize=1)
def preload() -> None:
    """Load the kernel's machine code into this process now (compiling it if numba's cache has none), where the
    compiled path applies: worker processes forked from this one then inherit it instead of each loading it
    (about 0.7 CPU s a process). Once per process; nothing without numba or under ``EVALSTOP_COMPILED=0``."""
    from ..baselines import FIFO, Tiresias
    from ..workload import workload_from_jobs

    one_job = workload_from_jobs([{"submit_h": 0.0, "gpus": 1, "length_h": 1.0}], 1)
    for policy in (FIFO(), Tiresias()):   # Tiresias' queues are functions of their own
        fast_outcome(one_job, policy)


def run_episode(workload, policy) -> Outcome:
    """Play ``policy`` on ``workload``: the compiled path where it applies, else ``drive(Simulator(...))``."""
    out = fast_outcome(workload, policy)
    if out is not None:
        return out
    from ..policy import drive

    return drive(Simulator(workload), policy)


def _play(w, kp: KernelPolicy, c: NodeArgs) -> Outcome | None:
    """The kernel's outcome, or None where its exact rate arithmetic would leave int64 (the Python path's ints
    are unbounded)."""
    from .kernel import OVERFLOW, STALLED, episode

    evals = w.evals_per_job
    # the simulator's own inputs (Simulator.__init__), as int64 ticks and float64 scores
    submit = to_ticks(w.submit_h)
    empty = np.empty(0, np.int64)
    rlhf = w.job_type == JOB_TYPES.index("rlhf")   # only RLHF jobs report proxy rewards
    items = np.array(w.items, dtype=np.int64)
    sizes, pool_of = np.unique(items, return_inverse=True)
    # copies where an input array could be the workload's own: a cached workload's arrays are read-only, which
    # numba would type (and compile) apart
    (code, finish, service, stopped, seen, best_idx, first_start, peak_service, preemptions, now, spread, type_ticks,
     frag) = episode(
        submit, to_ticks(np.minimum(w.est_length_h, MAX_HOURS)), np.array(w.gpus, dtype=np.int64),
        np.ascontiguousarray(w.checkpoint_ticks().ravel()),   # length * i // evals without a grid: the same ints
        to_ticks(w.restart_h) if w.restart_h is not None else empty,
        np.ascontiguousarray(w.observed, dtype=np.float64).ravel(),
        np.array(w.curves.proxy, dtype=np.float64).ravel(),
        np.array(w.curves.loss, dtype=np.float64).ravel(),
        np.argmax(w.curves.gold, axis=1).astype(np.int64), np.ascontiguousarray(rlhf), items,
        pool_of.astype(np.int64).ravel(), _pool_offsets(kp, evals, sizes.size, pool_of, items, rlhf),
        np.argsort(submit, kind="stable").astype(np.int64), evals, int(w.total_gpus), kp.sched, kp.preemptive,
        kp.window, kp.stop, np.array(kp.ip, np.int64), np.array(kp.fp, np.float64), c.on_nodes, c.gpn, c.policy,
        c.strict, c.node_type, c.n_types, c.node_rank, np.array(w.job_type, dtype=np.int64), c.rate_tab,
        np.array(kp.limits, np.int64), kp.knob)
    if code == OVERFLOW:
        return None
    if code == STALLED:
        raise SimulationError(f"stalled at t={now / TICKS_PER_HOUR:.4f} h: jobs wait, none runs and no event is "
                              "pending; the scheduler must start a job")
    return Outcome(
        workload=w, submit_ticks=submit, finish_ticks=finish, service_ticks=service, stopped=stopped,
        evals_seen=seen, delivered_ckpt=np.where(stopped, best_idx, seen - 1), first_start_ticks=first_start,
        preemptions=int(preemptions), peak_service_ticks=peak_service, spread_ticks=spread,
        type_gpu_ticks=({t: int(x) for t, x in zip(w.spec.gpu_types, type_ticks)} if c.rated
                        else {w.spec.gpu_types[0]: int(np.sum(service * w.gpus))}),
        fragmentation_gpu_ticks=int(frag) if c.on_nodes else None)


def _pool_offsets(kp: KernelPolicy, evals: int, n_sizes: int, pool_of, items, rlhf) -> np.ndarray:
    """Where each noise pool starts in the kernel's flat array (one per eval-set size, the factor pool, the
    proxy pool), then its end: room for every second difference a job can add (``evals - 2`` per job)."""
    per_job = max(evals - 2, 0) if kp.stop in NOISE_AWARE else 0
    sizes = np.bincount(pool_of.ravel(), minlength=n_sizes) * per_job
    room = np.concatenate([sizes, [np.count_nonzero(items > 0) * per_job, np.count_nonzero(rlhf) * per_job]])
    return np.concatenate([[0], np.cumsum(room)]).astype(np.int64)
