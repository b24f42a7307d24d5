"""Which policies the compiled path plays, and their parameters as the kernel's plain numbers.

A policy is compiled when it is exactly a built-in base scheduler of
:data:`SCHEDULERS`, bare or wrapped by exactly one built-in stopper of
:data:`STOPPERS`, with no attribute of its own beyond the ones those classes
set (a subclass, or an instance with a method or its noise estimate replaced,
is a user's policy and keeps the Python path). Preemptive schedulers are
compiled under the default tie rule only (``tie="running"``); ``tie="arrival"``
wraps them in :class:`~evalstop_gym.baselines.ties.ArrivalTies`, which is not
compiled. Tiresias is compiled with its reference list order and exact demotion
timer (``order="queue"``, ``demotion_timer="exact"``, the defaults), any
thresholds and starvation guard. Anything else falls back to the Python path, silently: that is
correct, not an error. This module does not import numba.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

from ..baselines import (CUSUM, FIFO, SJFEst, SRTFEst, SRTFProgress, Divergence, DropTest, EvalStop, LossAware,
                         LossPlateau, MaxThroughput, Patience, SmoothedDecline, StopAtProgress, Tiresias)
from ..baselines import SCHEDULERS as ALL_SCHEDULERS, STOPPERS as ALL_STOPPERS
from ..baselines.noise import NoiseBySize, PooledNoise

# the kernel's codes
FIFO_CODE, SJF_EST_CODE, SRTF_EST_CODE, SRTF_PROGRESS_CODE, LOSSAWARE_CODE, MAX_THROUGHPUT_CODE = 0, 1, 2, 3, 4, 5
TIRESIAS_CODE = 6
NO_STOP_CODE, EVALSTOP_CODE, PATIENCE_CODE, STOPAT_CODE, LOSSPLATEAU_CODE = 0, 1, 2, 3, 8
CUSUM_CODE, SMOOTHED_CODE, DROPTEST_CODE, DIVERGENCE_CODE = 4, 5, 6, 7
SCHEDULERS = {FIFO: FIFO_CODE, SJFEst: SJF_EST_CODE, SRTFEst: SRTF_EST_CODE, SRTFProgress: SRTF_PROGRESS_CODE,
              LossAware: LOSSAWARE_CODE, MaxThroughput: MAX_THROUGHPUT_CODE, Tiresias: TIRESIAS_CODE}
STOPPERS = {EvalStop: EVALSTOP_CODE, Patience: PATIENCE_CODE, StopAtProgress: STOPAT_CODE, CUSUM: CUSUM_CODE,
            SmoothedDecline: SMOOTHED_CODE, DropTest: DROPTEST_CODE, Divergence: DIVERGENCE_CODE,
            LossPlateau: LOSSPLATEAU_CODE}

# positions of a stopper's parameters in KernelPolicy.ip (integers) and .fp (floats)
I_K, I_WARMUP, I_LAG = 0, 1, 2   # I_K: EvalStop's k, Patience's patience, the window of the others
(F_DELTA, F_WARMUP_PROGRESS, F_P, F_THRESHOLD, F_DRIFT, F_SIGMA, F_Z, F_MIN_DROP, F_FAST_Z, F_FAST_MIN_DROP,
 F_PROXY_Z, F_SXX, F_SQRT_SXX, F_TOLERANCE, F_X) = range(15)   # F_SIGMA: NaN = estimated; F_X: Smoothed's x

_RUNTIME = {"_queue", "_running", "_ranks"}   # what a base scheduler sets on itself as it plays


@functools.lru_cache(maxsize=None)
def _own(cls) -> frozenset:
    """The instance attributes a default instance of ``cls`` sets (a stopper over FIFO; Tiresias with the state it
    builds at an episode's first scheduling point): an attribute of a policy beyond its own class's is a user's
    change (another class's ``k`` on a LossPlateau included)."""
    policy = cls(FIFO()) if cls in STOPPERS else cls()
    if cls is Tiresias:
        policy._begin(None)
    return frozenset(vars(policy))


class KernelPolicy(NamedTuple):
    """A supported policy as the kernel's arguments."""

    sched: int
    preemptive: bool
    window: int = 0             # LossAware's window
    stop: int = NO_STOP_CODE
    ip: tuple = (0, 0, 0)
    fp: tuple = (0.0,) * F_X
    limits: tuple = ()          # Tiresias' thresholds, GPU-ticks
    knob: float = math.nan      # Tiresias' promote_knob (NaN: none)


def _stopper_numbers(policy) -> tuple[tuple, tuple]:
    """``(ip, fp)`` of a built-in stopper (the ``I_*`` / ``F_*`` layout)."""
    get = policy.__dict__.get
    k = get("k", get("patience", get("window", 0)))
    sigma = get("sigma")
    fp = [float(get("min_delta", 0.0)), float(get("warmup_progress", 0.0)), float(get("p", 0.0)),
          float(get("threshold", 0.0)), float(get("drift", 0.0)), math.nan if sigma is None else float(sigma),
          float(get("z", 0.0)), float(get("min_drop", 0.0)), float(get("fast_z", 0.0)),
          float(get("fast_min_drop", 0.0)), float(get("proxy_z", 0.0)), 0.0, 0.0, float(get("tolerance", 0.0))]
    if type(policy) is SmoothedDecline:
        fp[F_SXX], fp[F_SQRT_SXX] = policy._sxx, policy._sxx ** 0.5   # as the rule computes them
        fp += [float(x) for x in policy._x]
    return (int(k), int(get("warmup", 0)), int(get("lag", 0))), tuple(fp)


def kernel_policy(policy) -> KernelPolicy | None:
    """The kernel's arguments for ``policy``, or None if the compiled path does not play it."""
    stop = STOPPERS.get(type(policy))
    if stop is not None:
        if not set(vars(policy)) <= _own(type(policy)) or type(vars(policy).get("noise", NoiseBySize())) is not NoiseBySize \
                or type(vars(policy).get("proxy_noise", PooledNoise())) is not PooledNoise:
            return None
        base = kernel_policy(policy.base)
        if base is None or base.stop != NO_STOP_CODE:
            return None
        ip, fp = _stopper_numbers(policy)
        return base._replace(stop=stop, ip=ip, fp=fp)
    sched = SCHEDULERS.get(type(policy))
    if sched is None or not set(vars(policy)) <= _own(type(policy)) | _RUNTIME:
        return None
    if sched == TIRESIAS_CODE:   # the reference's list order and the exact demotion timer only
        if policy.order != "queue" or policy.demotion_timer != "exact":
            return None
        knob = policy.promote_knob
        return KernelPolicy(sched, True, limits=tuple(int(x) for x in policy._limits),
                            knob=math.nan if knob is None else float(knob))
    return KernelPolicy(sched, bool(type(policy).preemptive), int(getattr(policy, "window", 0)))


def compiled_pairs() -> list[tuple[str, str]]:
    """``(scheduler, stopper)`` registry names the compiled path plays, on the flat pool and on nodes (``"none"``:
    no stopper), under the default tie rule; every other pair plays the Python path."""
    names = {cls: name for name, cls in ALL_SCHEDULERS.items()}
    stops = {cls: name for name, cls in ALL_STOPPERS.items() if cls is not None}
    return [(names[s], st) for s in SCHEDULERS for st in ["none", *(stops[c] for c in STOPPERS)]]
