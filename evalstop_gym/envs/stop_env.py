"""EvalStop-StopControl-v0: a hand-coded base scheduler places jobs; the agent
decides only continue (0) / stop (1) at each eval checkpoint.

This is where learned stop-policies compete with EvalStop: the base scheduler
is any name in ``evalstop_gym.baselines.SCHEDULERS`` (keyword ``scheduler``; default
``"srtf-est"``, the paper's base), applied with the same
:func:`~evalstop_gym.policy.apply_plan` that :func:`~evalstop_gym.policy.drive`
uses, so stopping rule ``R`` through this env gives exactly the metrics of
``simulate(scheduler, R)``.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
from gymnasium import spaces

from ..api import DEFAULT_SCHEDULER
from ..config import ConfigError
from ..policy import apply_plan
from ..simulator import DONE, EVAL
from .base import STOP, SimEnv, with_topology
from .features import N_CLUSTER, N_JOB, cluster_bounds, cluster_row, job_bounds, job_row, topology_row

def resolve_scheduler(name: str | None) -> str:
    """The registry name of the base scheduler (``None``: the default)."""
    from evalstop_gym.baselines import SCHEDULERS

    if name is None:
        return DEFAULT_SCHEDULER
    if not isinstance(name, str) or name not in SCHEDULERS:
        raise ConfigError("scheduler", name, f"must be one of {', '.join(SCHEDULERS)}")
    return name


class StopControlEnv(SimEnv):
    """Stop decisions only, over a base scheduler.

    Observation: ``Box(float32, (N_JOB + N_CLUSTER,))``, the job at the
    checkpoint (one row of :data:`~evalstop_gym.envs.features.JOB_FEATURES`)
    then the cluster features. Action: ``Discrete(2)``: 0 continue, 1 stop.
    Other keywords: see :class:`~evalstop_gym.envs.base.SimEnv`.
    """

    def __init__(self, *, scheduler: str | None = None, **kwargs: Any):
        from evalstop_gym.baselines import make_policy

        self.scheduler_name = resolve_scheduler(scheduler)
        super().__init__(**kwargs)
        self._scheduler = make_policy(self.scheduler_name)
        lo_j, hi_j = job_bounds()
        lo_c, hi_c = cluster_bounds()
        lo, hi = with_topology(self._topo_spec, 1, np.concatenate([lo_j, lo_c]), np.concatenate([hi_j, hi_c]))
        self.observation_space = spaces.Box(lo, hi, dtype=np.float32)
        self.action_space = spaces.Discrete(2)

    def _begin_episode(self) -> None:
        self._scheduler.reset()
        self._run_to_eval()

    def _run_to_eval(self) -> None:
        """Let the base scheduler act until the next eval checkpoint or the end."""
        sim, schedule, rec = self._sim, self._scheduler.schedule, self._recorder
        views = sim.views
        while self._advance() not in (EVAL, DONE):
            plan = schedule(sim.cluster)
            apply_plan(sim, plan)
            for j in plan.preempt:  # the base scheduler's preemptions are priced as the agent's are
                self._preempted(views[j])
            if rec is not None:
                rec.update(sim.cluster)

    def step(self, action):
        self._check_running()
        a = self._as_int(action)
        invalid = False
        if a is None or a not in (0, 1):
            invalid = self._bad_action(action, "actions are 0 (continue) and 1 (stop)")
        else:
            if a == STOP:
                self._stop(self._sim.decision_job)
            self._run_to_eval()
        return self._finish_step(invalid)

    def _observe(self) -> np.ndarray:
        return stop_observation(self._sim.cluster, self._sim.decision_job if self._kind == EVAL else None,
                                self._topo_spec is not None)

    def action_masks(self) -> np.ndarray:
        """Both actions at a checkpoint; only 0 once the episode is over."""
        return (_EVAL_MASK if self._kind == EVAL else _DONE_MASK).copy()  # fresh, writable


# copied for each mask: an array's copy costs about a third of np.frombuffer(bytearray(...)) (this runs at every step)
_EVAL_MASK, _DONE_MASK = np.array([1, 1], np.int8), np.array([1, 0], np.int8)
# the observation without the node block, written as float32 into a fresh array: a C cast of each float64, as
# NumPy's, in one call, instead of a list handed to np.array or bytes to np.frombuffer (this runs at every step)
_FLAT = N_JOB + N_CLUSTER
_PACK_FLAT = struct.Struct(f"={_FLAT}f").pack_into
_FLOAT32 = np.dtype(np.float32)  # np.empty takes a dtype object without converting it
_NO_JOB = (0.0,) * N_JOB  # after the episode


def stop_observation(c, job, nodes: bool) -> np.ndarray:
    """StopControl-v0's observation of ``job`` at its eval checkpoint on cluster view ``c`` (``job=None``:
    after the episode); ``nodes``: with the node block. Also what a saved stop-policy sees when it answers
    another policy's checkpoints (:class:`evalstop_gym.agents.policy.LearnedStop`)."""
    if job is not None:
        jobs, rest = job_row(job, c.total_gpus, True), cluster_row(c, 1, 0, True)
    else:
        jobs, rest = _NO_JOB, cluster_row(c)
    if nodes:  # the node block, with the job at the checkpoint as its one slot
        return np.array([*jobs, *rest, *topology_row(c, [job] if job is not None else [], 1)], np.float32)
    obs = np.empty(_FLAT, _FLOAT32)
    _PACK_FLAT(obs, 0, *jobs, *rest)
    return obs
