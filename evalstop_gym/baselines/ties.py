"""Tie rules: which of two active jobs of equal rank a preemptive base scheduler keeps.

The literature differs, and on workloads with many equal keys the choice
moves results (on Philly, mostly 1-GPU jobs, about 9% of average JCT):

* ``"running"`` (the default): on equal keys running jobs keep their GPUs
  ahead of waiting ones, and waiting jobs rank in the order they last entered
  the queue (:class:`~evalstop_gym.policy.Scheduler`). A tie never preempts.
* ``"arrival"``: equal keys rank by arrival (submit time, then job id),
  running or waiting, so an older waiting job preempts a younger running one
  of the same key. This is the order of the peers' simulators that keep one
  job list sorted by arrival and re-rank it at every event (Tiresias'
  reference simulator, ``SymbioticLab/Tiresias``, ``simulator/run_sim.py``).

Only preemptive schedulers differ: a non-preemptive one never puts a job
back in the queue, so queue order is arrival order and both rules give the
same plans. ``tiresias`` keeps its own queue lists; there the rule picks its
``order``: ``"running"`` is ``order="queue"`` (a queue's running jobs ahead
of its waiting ones), ``"arrival"`` is ``order="arrival"``.
"""

from __future__ import annotations

from evalstop_gym.config import ConfigError
from evalstop_gym.policy import Scheduler

from .tiresias import Tiresias

TIE_RULES = ("running", "arrival")
DEFAULT_TIE = "running"
TIRESIAS_ORDER = {"running": "queue", "arrival": "arrival"}


def check_tie(tie: str) -> str:
    """``tie`` if it is one of :data:`TIE_RULES`, else :class:`ConfigError`."""
    if tie not in TIE_RULES:
        raise ConfigError("tie", tie, f"must be one of {', '.join(TIE_RULES)} (default {DEFAULT_TIE})")
    return tie


class ArrivalTies(Scheduler):
    """``base`` with ties broken by arrival: its key, then submit ticks, then job id.

    Keys become unique, so the allocator's running-first rule never applies.
    The key of a running job then depends on more than its running key, so
    the kept running order (``run_invariant_key``) is not used; each running
    job is keyed at every scheduling point.
    """

    run_invariant_key = False

    def __init__(self, base: Scheduler):
        if not isinstance(base, Scheduler):
            raise TypeError(f"base must be a Scheduler, got {type(base).__name__}")
        self.base = base
        self.name = base.name
        self.preemptive = base.preemptive
        self.static_key = base.static_key

    def reset(self) -> None:
        self.base.reset()
        Scheduler.reset(self)

    def key(self, job, cluster):
        return self.base.key(job, cluster), job.submit_ticks, job.job_id

    def wakeup(self, cluster, plan):
        return self.base.wakeup(cluster, plan)

    def type_preference(self, job, cluster):
        return self.base.type_preference(job, cluster) if self.base._ranks_types else None


def with_tie(cls: type[Scheduler], tie: str = DEFAULT_TIE) -> Scheduler:
    """A base scheduler of class ``cls`` (default parameters) under tie rule ``tie`` (:data:`TIE_RULES`)."""
    check_tie(tie)
    if issubclass(cls, Tiresias):
        return cls(order=TIRESIAS_ORDER[tie])
    base = cls()
    return ArrivalTies(base) if tie == "arrival" and base.preemptive else base
