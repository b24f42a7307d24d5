"""EvalStop-Cluster-v0: the agent is the platform. It decides which jobs run
(start / preempt) and, at every eval checkpoint, whether to stop the job.

Decision points (``info["decision"]``), in the order the simulator raises them:

* ``"eval"``: a running job reached an eval checkpoint. Actions: ``0``
  continue, ``1`` stop it (its GPUs are freed at once; the tenant gets its
  best observed checkpoint). The job sits in slot 0 with ``decision = 1``.
* ``"schedule"``: something changed (arrival, completion, stop, preemption,
  wake-up). The agent acts in sub-steps at the same instant: ``2 + i`` toggles
  the job in slot ``i`` (starts it if waiting and it fits, preempts it if
  running), and ``0`` commits, letting time run to the next decision point.

A plan ``Plan(preempt=[...], start=[...])`` of a hand-coded scheduler is thus
``[2 + slot(j) for j in preempt] + [2 + slot(j) for j in start] + [0]``; see
:mod:`evalstop_gym.envs.adapter`. Details and the reward: ``docs/mdp.md``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from gymnasium import spaces

from ..config import check_range
from ..simulator import EVAL, SCHEDULE
from ..view import RUNNING, JobView
from .base import COMMIT, STOP, SimEnv, with_topology
from .features import N_JOB, JobTable, cluster_bounds, cluster_row, job_bounds, topology_row, window_ids

SLOT0 = 2  # action index of slot 0


class ClusterEnv(SimEnv):
    """The platform's MDP over a window of ``slots`` jobs (default 32).

    Observation: ``Box(float32, (slots * N_JOB + N_CLUSTER,))``, the job rows
    of :func:`~evalstop_gym.envs.features.window` then the cluster features
    (names: :func:`~evalstop_gym.envs.features.feature_names`).
    Action: ``Discrete(2 + slots)`` with masks from :meth:`action_masks`.
    Other keywords: see :class:`~evalstop_gym.envs.base.SimEnv`.
    """

    def __init__(self, *, slots: int = 32, **kwargs: Any):
        check_range("slots", slots, 1, 4096, integer=True)
        super().__init__(**kwargs)
        self.slots = slots
        lo_j, hi_j = job_bounds()
        lo_c, hi_c = cluster_bounds()
        lo, hi = with_topology(self._topo_spec, slots, np.concatenate([np.tile(lo_j, slots), lo_c]),
                               np.concatenate([np.tile(hi_j, slots), hi_c]))
        self.observation_space = spaces.Box(lo, hi, dtype=np.float32)
        self.action_space = spaces.Discrete(SLOT0 + slots)
        self._ids: list[int] = []    # the window: job ids in slot order, the first _n_run of them running
        self._n_run = 0
        self._table = JobTable(slots, len(lo) - slots * N_JOB)
        self._eval_mask = b"\1\1".ljust(SLOT0 + slots, b"\0")  # continue or stop (masks are kept as bytes)
        self._done_mask = b"\1".ljust(SLOT0 + slots, b"\0")     # only 0 after the end
        self._mask = self._done_mask

    # -- episode -----------------------------------------------------------------
    def _begin_episode(self) -> None:
        sim = self._sim
        self._started_at = [-1] * self._n_jobs  # job id -> tick the agent last started it
        self._last_start = -1                      # the tick of the agent's last start
        self._placements: dict[int, tuple] = {}    # job id -> nodes asked for by request_placement
        self._wakeup_h = -math.inf                 # the pending wake-up timer's time
        self._table.reset(sim.views, sim.cluster.total_gpus)  # rows kept between steps (features.JobTable)
        self._advance()
        self._refresh()

    def step(self, action):
        self._check_running()
        a = self._as_int(action)
        invalid = False
        if a is None or not 0 <= a < SLOT0 + self.slots:
            invalid = self._bad_action(action, f"actions are integers 0..{SLOT0 + self.slots - 1}")
        elif not self._mask[a]:
            invalid = self._bad_action(action, self._why_invalid(a))
        else:
            sim = self._sim
            if self._kind == EVAL:
                if a == STOP:
                    self._stop(sim.decision_job)
                self._advance()
            elif a == COMMIT:
                self._advance()
            else:
                v = sim.views[self._ids[a - SLOT0]]
                if v.status == RUNNING:
                    sim.preempt(v.job_id)
                    self._preempted(v)
                else:
                    sim.start(v.job_id, self._placements.pop(v.job_id, None))
                    self._started_at[v.job_id] = self._last_start = sim.cluster.now_ticks
                self._table.moved(v)
                if self._recorder is not None:
                    self._recorder.update(sim.cluster)
            self._refresh()
        return self._finish_step(invalid)

    def request_wakeup(self, at_h: float | None) -> None:
        """Set the ``"schedule"`` decision timer to ``at_h`` (hours) even if nothing happens there.

        The timer of hand-coded schedulers whose priorities change with time
        (``Plan.wakeup_h``): each call replaces the pending one, ``None``
        withdraws it (:meth:`~evalstop_gym.simulator.Simulator.set_timer`), as
        :func:`~evalstop_gym.policy.apply_plan` does. A pending wake-up also
        lets the agent commit with an idle cluster.
        """
        self._check_running()
        if at_h is not None and not at_h > self._sim.cluster.now_h:
            raise ValueError(f"wake-up at {at_h} h is not after now ({self._sim.cluster.now_h} h)")
        self._sim.set_timer(at_h)
        self._wakeup_h = -math.inf if at_h is None else at_h
        self._refresh()

    def request_placement(self, job_id: int, where: tuple) -> None:
        """Start ``job_id`` on ``where`` (``((node, gpus), ...)``) when it is next started.

        Agents start jobs and the cluster's placement policy picks their
        nodes; this lets a hand-coded scheduler's plan keep the nodes its
        allocator chose (``Plan.placed``), as :func:`~evalstop_gym.policy.apply_plan` does.
        """
        self._check_running()
        self._placements[job_id] = where

    def slot_action(self, job_id: int) -> int:
        """The action that toggles job ``job_id`` now; ``ValueError`` if it is not in the window."""
        if job_id in self._ids:
            return SLOT0 + self._ids.index(job_id)
        raise ValueError(f"job {job_id} is not in the observation window of {self.slots} slots "
                         f"({len(self.cluster.running)} running, {len(self.cluster.waiting)} waiting); "
                         "make the env with more slots")

    @property
    def window(self) -> list[JobView]:
        """The jobs in the observation's slots, in slot order (public views)."""
        views = self._sim.views
        return [views[j] for j in self._ids]

    # -- observation and masks ------------------------------------------------------
    def _refresh(self) -> None:
        """The window (``_ids``, its first ``_n_run`` running) and the mask (``_mask``, bytes) of the decision now."""
        c = self._sim.cluster
        kind = self._kind
        slots = self.slots
        if kind == SCHEDULE:
            self._ids, self._n_run = ids, r = window_ids(c, slots)
            running, waiting, now, fit, gpus = c.running, c.waiting, c.now_ticks, c.largest_fit(), self._job_gpus
            # commit needs a running job, an empty queue or a pending wake-up; a job started at this instant
            # cannot be preempted in it (no running job was unless the last start was now); a waiting one
            # starts if it fits
            started = self._started_at
            self._mask = (bytes((1 if running or not waiting or self._wakeup_h > c.now_h else 0, 0,
                                 *([True] * r if self._last_start != now else [started[j] != now for j in ids[:r]]),
                                 *[gpus[j] <= fit for j in ids[r:]]))
                          .ljust(SLOT0 + slots, b"\0"))
        elif kind == EVAL:
            v = self._sim.decision_job
            self._table.update(v)  # a new checkpoint in its history
            self._ids, self._n_run = window_ids(c, slots, v.job_id)
            self._mask = self._eval_mask
        else:
            self._ids, self._n_run = [], 0
            self._mask = self._done_mask

    def _observe(self) -> np.ndarray:
        c = self._sim.cluster
        ids, r, kind = self._ids, self._n_run, self._kind
        row = cluster_row(c, r, len(ids) - r, kind == EVAL, kind == SCHEDULE,  # positional: the env's hot path
                          sum(map(self._job_gpus.__getitem__, c.waiting)))
        if self._topo_spec is not None:
            row += topology_row(c, self.window, self.slots)
        return self._table(c, ids, row, kind == EVAL)

    def action_masks(self) -> np.ndarray:
        """Valid actions now: ``np.int8`` 0/1 of length ``2 + slots`` (never all 0)."""
        return np.frombuffer(bytearray(self._mask), np.int8)  # a fresh, writable array

    def _why_invalid(self, a: int) -> str:
        if self._kind == EVAL:
            return "at an eval checkpoint only 0 (continue) and 1 (stop) are valid"
        if a == STOP:
            return "1 (stop) is only valid at an eval checkpoint"
        c = self._sim.cluster
        if a == COMMIT:
            return (f"no job runs while {len(c.waiting)} wait and no wake-up is pending; "
                    "start a job before committing")
        i = a - SLOT0
        if i >= len(self._ids):
            return f"slot {i} is empty"
        v = self._sim.views[self._ids[i]]
        if v.status == RUNNING:
            return f"job {v.job_id} in slot {i} started at this instant; it can be preempted from the next one"
        if c.node_free is not None:
            return (f"job {v.job_id} in slot {i} needs {v.gpus} GPUs; nodes have {c.node_free} free and at most "
                    f"{c.largest_fit()} can be placed ({c.spec.placement})")
        return f"job {v.job_id} in slot {i} needs {v.gpus} GPUs, {c.free_gpus} are free"
