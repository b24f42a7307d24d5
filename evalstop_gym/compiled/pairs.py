"""Which policies the compiled path plays, and their parameters as the kernel's plain numbers.

A policy is compiled when it is exactly a built-in base scheduler of
:data:`SCHEDULERS`, bare or wrapped by exactly one built-in stopper of
:data:`STOPPERS`, with no attribute of its own beyond the ones those classes
set (a subclass, or an instance with a method replaced, is a user's policy and
keeps the Python path). Preemptive schedulers are compiled under the default
tie rule only (``tie="running"``); ``tie="arrival"`` wraps them in
:class:`~evalstop_gym.baselines.ties.ArrivalTies`, which is not compiled.
Anything else falls back to the Python path, silently: that is correct, not an
error. This module does not import numba.
"""

from __future__ import annotations

from typing import NamedTuple

from ..baselines import EvalStop, FIFO, Patience, SJFEst, SRTFEst, SRTFProgress, StopAtProgress
from ..baselines import SCHEDULERS as ALL_SCHEDULERS, STOPPERS as ALL_STOPPERS

# the kernel's codes
FIFO_CODE, SJF_EST_CODE, SRTF_EST_CODE, SRTF_PROGRESS_CODE = 0, 1, 2, 3
NO_STOP_CODE, EVALSTOP_CODE, PATIENCE_CODE, STOPAT_CODE = 0, 1, 2, 3
SCHEDULERS = {FIFO: FIFO_CODE, SJFEst: SJF_EST_CODE, SRTFEst: SRTF_EST_CODE, SRTFProgress: SRTF_PROGRESS_CODE}
STOPPERS = {EvalStop: EVALSTOP_CODE, Patience: PATIENCE_CODE, StopAtProgress: STOPAT_CODE}
# the instance attributes each class sets: anything else is a user's change
_OWN = {"_queue", "_running"}
_STOPPER_OWN = {"base", "warmup", "warmup_progress", "k", "min_delta", "patience", "p"}


class KernelPolicy(NamedTuple):
    """A supported policy as the kernel's arguments."""

    sched: int
    preemptive: bool
    stop: int = NO_STOP_CODE
    k: int = 0                  # EvalStop's k, Patience's patience
    delta: float = 0.0          # their min_delta
    warmup: int = 0
    warmup_progress: float = 0.0
    p: float = 0.0              # StopAtProgress' p


def kernel_policy(policy) -> KernelPolicy | None:
    """The kernel's arguments for ``policy``, or None if the compiled path does not play it."""
    stop = STOPPERS.get(type(policy))
    if stop is not None:
        if not set(vars(policy)) <= _STOPPER_OWN:
            return None
        base = kernel_policy(policy.base)
        if base is None or base.stop:
            return None
        k = policy.k if stop == EVALSTOP_CODE else policy.patience if stop == PATIENCE_CODE else 0
        return base._replace(stop=stop, k=int(k), delta=float(getattr(policy, "min_delta", 0.0)),
                             warmup=int(policy.warmup), warmup_progress=float(policy.warmup_progress),
                             p=float(getattr(policy, "p", 0.0)))
    sched = SCHEDULERS.get(type(policy))
    if sched is None or not set(vars(policy)) <= _OWN:
        return None
    return KernelPolicy(sched, bool(type(policy).preemptive))


def compiled_pairs() -> list[tuple[str, str]]:
    """``(scheduler, stopper)`` registry names the compiled path plays on the flat pool (``"none"``: no stopper),
    under the default tie rule; every other pair, and every pair on nodes, plays the Python path."""
    names = {cls: name for name, cls in ALL_SCHEDULERS.items()}
    stops = {cls: name for name, cls in ALL_STOPPERS.items() if cls is not None}
    return [(names[s], st) for s in SCHEDULERS for st in ["none", *(stops[c] for c in STOPPERS)]]
