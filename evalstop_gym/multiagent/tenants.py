"""The multi-tenant environment: a PettingZoo ``ParallelEnv`` whose agents are the tenants.

A thin adapter over :class:`~evalstop_gym.simulator.Simulator`, like the
Gymnasium envs: it calls ``advance / start / preempt / stop / request_wakeup``
exactly as :func:`evalstop_gym.policy.drive` does and holds no simulation
logic. The platform places jobs with a base scheduler (``scheduler=``),
optionally wrapped by a platform-level stopper (``platform_stopper=``, e.g.
EvalStop); each tenant decides continue (0) / stop (1) for its own jobs at
their eval checkpoints. The MDP is documented in ``docs/multiagent.md``.

Decision timing. The simulator raises eval checkpoints one at a time, and a
stop must take effect at its checkpoint's instant (a later stop would let the
job run on, which changes the simulation). So one parallel step carries every
checkpoint reached at the *same simulated instant*, at most one per tenant,
in the order the simulator raised them; every other tenant's action is a
no-op (its mask is ``[1, 0]``). A tenant with a second checkpoint at that
instant decides it in the next step, still at that instant. Deciding a batch
together is exactly the same as deciding each checkpoint as it is raised,
because nothing that happens later within one instant depends on a stop.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding
from pettingzoo import ParallelEnv

from ..config import ConfigError, WorkloadConfig, check_range
from ..metrics import compute_metrics
from ..policy import apply_plan
from ..simulator import DONE, EVAL, Outcome, Simulator
from ..view import COMPLETED, RUNNING, JobView
from ..workload import Workload
from ..envs.base import FreshEvalCredit, as_int, episode_config, episode_seed, episode_workload
from ..envs.base import check_topology, with_topology
from ..envs.features import (COUNT_SCALE, cluster_bounds, cluster_row, feature_names, job_bounds, observation,
                             topology_names, topology_row, topology_shape, window)
from ..envs.render import ansi_text
from ..envs.stop_env import resolve_scheduler

CONTINUE, STOP = 0, 1
_WORKLOAD_FIELDS = {f.name for f in dataclasses.fields(WorkloadConfig)}

# One tenant's own share of the cluster (appended after the cluster features).
TENANT_FEATURES: dict[str, tuple[float, float, str]] = {
    "own_gpus": (0.0, 1.0, "GPUs the tenant's running jobs hold / cluster GPUs"),
    "own_running": (0.0, 1.0, f"squash(the tenant's running jobs, scale {COUNT_SCALE:g})"),
    "own_waiting": (0.0, 1.0, f"squash(the tenant's waiting jobs, scale {COUNT_SCALE:g})"),
    "own_unseen": (0.0, 1.0, f"squash(the tenant's active jobs not in its slots, scale {COUNT_SCALE:g})"),
}
N_TENANT = len(TENANT_FEATURES)

# reward = sum of weight * term, each term divided by the episode's job count (docs/multiagent.md)
DEFAULT_REWARD_WEIGHTS = {"jct_h": -1.0, "quality": 100.0, "gpu_h": -0.05}
_TERMS = tuple(DEFAULT_REWARD_WEIGHTS)
_JCT, _QUALITY, _GPU = (_TERMS.index(k) for k in ("jct_h", "quality", "gpu_h"))  # rows of the accrued terms


def tenant_feature_names(slots: int, spec=None) -> list[str]:
    """Names of a tenant's observation entries: job slots, ``cluster.*``, ``tenant.*``, then on a
    cluster of nodes (``spec``) the node block."""
    return feature_names(slots) + [f"tenant.{f}" for f in TENANT_FEATURES] + \
        (topology_names(spec, slots) if topology_shape(spec) else [])


class _Own:
    """One tenant's part of the cluster, shaped as :func:`~evalstop_gym.envs.features.window` reads it."""

    __slots__ = ("running", "waiting")

    def __init__(self):
        self.running: dict[int, JobView] = {}
        self.waiting: dict[int, JobView] = {}


def _rows(obj, mask: np.ndarray):
    """A copy of dataclass ``obj`` with every per-job array (first axis ``mask.size`` long) cut to ``mask``."""
    return dataclasses.replace(obj, **{f.name: v[mask] for f in dataclasses.fields(obj)
                                       if isinstance(v := getattr(obj, f.name), np.ndarray)
                                       and v.shape[:1] == mask.shape})


def tenant_outcome(out: Outcome, tenant: int) -> Outcome | None:
    """The part of a finished episode that concerns one tenant's jobs (``None`` if it had none).

    Every per-job array is restricted to the tenant's jobs; ``preemptions`` is
    the whole cluster's (the simulator does not count them per job).
    """
    w = out.workload
    mask = w.tenant == tenant
    if not mask.any():
        return None
    return dataclasses.replace(_rows(out, mask), workload=dataclasses.replace(_rows(w, mask),
                                                                              curves=_rows(w.curves, mask)))


class TenantsEnv(ParallelEnv):
    """Tenants as agents over one shared cluster (``evalstop_tenants_v0``).

    Keyword arguments (all JSON-friendly):

    * any :class:`~evalstop_gym.config.WorkloadConfig` field (``tenants`` sets
      the agents ``tenant_0 .. tenant_{T-1}``; default 4), or
      ``config=WorkloadConfig(...)``;
    * ``scheduler``: the platform's base scheduler, a name in
      ``evalstop_gym.baselines.SCHEDULERS`` (default ``"srtf-est"``);
    * ``platform_stopper``: a name in ``evalstop_gym.baselines.STOPPERS`` the platform
      enforces over every tenant (default ``"none"``), with
      ``platform_stopper_params`` (e.g. ``{"k": 2}``);
    * ``slots``: how many of its own active jobs a tenant sees (default 8);
    * ``reward_weights``: overrides of :data:`DEFAULT_REWARD_WEIGHTS`;
    * ``max_steps``: truncate after this many steps (``None``: never);
    * ``render_mode``: ``None`` or ``"ansi"``.

    Observation (per tenant): ``Box(float32)`` of ``slots`` job rows
    (:data:`~evalstop_gym.envs.features.JOB_FEATURES`; the job at the tenant's
    checkpoint first), the aggregate cluster features, then
    :data:`TENANT_FEATURES`. Action: ``Discrete(2)``, 0 continue, 1 stop;
    ``info["action_mask"]`` is ``[1, 1]`` for a tenant with a checkpoint to
    decide and ``[1, 0]`` otherwise (then any action is a no-op).
    """

    metadata = {"name": "evalstop_tenants_v0", "is_parallelizable": True, "render_modes": ["ansi"],
                "render_fps": 4}

    def __init__(self, *, config: WorkloadConfig | None = None, scheduler: str | None = None,
                 platform_stopper: str = "none", platform_stopper_params: dict[str, Any] | None = None,
                 slots: int = 8, reward_weights: dict[str, float] | None = None, max_steps: int | None = None,
                 render_mode: str | None = None, **workload: Any):
        from evalstop_gym.baselines import make_policy

        if config is not None and not isinstance(config, WorkloadConfig):
            raise ConfigError("config", config, "must be a WorkloadConfig or None")
        self.config = (config or WorkloadConfig()).replace(**workload)  # an unknown keyword raises ConfigError
        self.scheduler_name = resolve_scheduler(scheduler)
        self.platform_stopper = platform_stopper
        self.platform_stopper_params = dict(platform_stopper_params or {})
        self._platform = make_policy(self.scheduler_name, platform_stopper, **self.platform_stopper_params)
        check_range("slots", slots, 1, integer=True)
        if max_steps is not None:
            check_range("max_steps", max_steps, 1, integer=True)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ConfigError("render_mode", render_mode, "must be None or 'ansi'")
        self.slots, self.max_steps, self.render_mode = slots, max_steps, render_mode
        self.reward_weights = dict(DEFAULT_REWARD_WEIGHTS)
        for k, v in (reward_weights or {}).items():
            if k not in self.reward_weights:
                raise ConfigError(f"reward_weights.{k}", v, f"unknown term; known: {', '.join(_TERMS)}")
            check_range(f"reward_weights.{k}", v)
            self.reward_weights[k] = float(v)

        self.possible_agents = [f"tenant_{i}" for i in range(self.config.tenants)]
        self.agents: list[str] = []
        lo_j, hi_j = job_bounds()
        lo_c, hi_c = cluster_bounds()
        lo_t, hi_t = (np.array(x, np.float32) for x in zip(*(b[:2] for b in TENANT_FEATURES.values())))
        # clusters of several nodes (or GPU types) add the node block at the end
        self._topo_spec = self.config.cluster if topology_shape(self.config.cluster) else None
        low, high = with_topology(self._topo_spec, slots, np.concatenate([np.tile(lo_j, slots), lo_c, lo_t]),
                                  np.concatenate([np.tile(hi_j, slots), hi_c, hi_t]))
        # one equal space object per agent, returned as the same object every time
        self.observation_spaces = {a: spaces.Box(low, high, dtype=np.float32) for a in self.possible_agents}
        self.action_spaces = {a: spaces.Discrete(2) for a in self.possible_agents}
        self._np_random: np.random.Generator | None = None
        self._sim: Simulator | None = None
        self._episodes = 0

    # -- PettingZoo API ------------------------------------------------------------
    def observation_space(self, agent: str) -> spaces.Box:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Discrete:
        return self.action_spaces[agent]

    @property
    def np_random(self) -> np.random.Generator:
        """Draws the workload seeds of unseeded resets (seeded by ``reset(seed=...)``)."""
        if self._np_random is None:
            self._np_random, _ = seeding.np_random()
        return self._np_random

    def reset(self, seed: int | None = None, options: dict | None = None):
        """Start an episode; seeding and ``options`` as in the Gymnasium envs (``docs/mdp.md``).

        ``reset(seed=s)`` plays the workload of ``WorkloadConfig(seed=s)``, the
        same one ``simulate(..., seed=s)`` plays. ``options`` may override
        workload fields for this episode (not ``tenants``, which fixes the
        agents) or give a ready ``Workload`` as ``{"workload": w}``; other keys
        are ignored with a warning (PettingZoo's API test passes one).
        """
        if seed is None and self._episodes == 0:
            seed = self.config.seed  # the first unseeded episode plays the configured seed
        if seed is not None:
            self._np_random, _ = seeding.np_random(seed)
        options = dict(options or {})
        ignored = sorted(k for k in options if k != "workload" and k not in _WORKLOAD_FIELDS)
        if ignored:
            warnings.warn(f"reset options {ignored} are not workload fields nor 'workload'; ignored", stacklevel=2)
        options = {k: v for k, v in options.items() if k not in ignored}
        if "tenants" in options:
            raise ConfigError("options.tenants", options["tenants"], "the tenant count fixes the agents; "
                              "make a new env with tenants=...")
        seed = episode_seed(self.np_random, seed, options)
        w = episode_workload(episode_config(self.config, options), seed)
        self._check_workload(w)
        self._episodes += 1
        self._start(w, seed)
        return self._observe_all(), self._infos(final=False)

    def _check_workload(self, w: Workload) -> None:
        bad = np.flatnonzero((w.tenant < 0) | (w.tenant >= len(self.possible_agents)))
        if bad.size:
            j = int(bad[0])
            raise ConfigError(f"job {j}.tenant", int(w.tenant[j]),
                              f"must be in [0, {len(self.possible_agents) - 1}] (this env has "
                              f"tenants={len(self.possible_agents)})")
        check_topology(self._topo_spec, w)

    def _start(self, w: Workload, seed: int | None) -> None:
        self._sim = Simulator(w)
        self._credit = FreshEvalCredit(w, seed)   # the credit of a stopped job, as in the Gymnasium envs
        self._n_jobs = w.n
        self._steps = 0
        self._terms = np.zeros((len(_TERMS), len(self.possible_agents)))  # accrued since the last step
        self.agents = list(self.possible_agents)
        self._batch: dict[int, JobView] = {}   # tenant -> its job at a checkpoint, in raise order
        self._carry: JobView | None = None     # a same-instant checkpoint held for the next step
        self._platform.reset()
        self._collect()

    def step(self, actions: dict[str, Any]):
        if self._sim is None or not self.agents:
            raise RuntimeError("the episode has ended (or never started); call reset()")
        stops = self._read_actions(actions)
        for v in stops:
            self._stop(v)
        self._collect()
        self._steps += 1
        n = self._n_jobs
        terms, self._terms = self._terms / n, np.zeros_like(self._terms)
        w = np.array([self.reward_weights[k] for k in _TERMS])
        rewards = w @ terms
        done = self._kind == DONE
        truncated = not done and self.max_steps is not None and self._steps >= self.max_steps
        agents = self.agents
        obs = self._observe_all()
        infos = self._infos(final=done)
        for i, a in enumerate(agents):
            infos[a]["reward_terms"] = {k: float(terms[t, i]) for t, k in enumerate(_TERMS)}
        out = (obs, {a: float(rewards[i]) for i, a in enumerate(agents)}, dict.fromkeys(agents, done),
               dict.fromkeys(agents, truncated), infos)
        if done or truncated:
            self.agents = []
        return out

    def _read_actions(self, actions: dict[str, Any]) -> list[JobView]:
        """Validate every action; return the jobs to stop, in the order their checkpoints were raised."""
        if not isinstance(actions, dict):
            raise TypeError(f"actions must be a dict agent -> action, got {type(actions).__name__}")
        for a, act in actions.items():
            if a not in self.action_spaces:
                raise ValueError(f"unknown agent {a!r}; agents are {self.possible_agents}")
            x = as_int(act)
            if x not in (CONTINUE, STOP):
                raise ValueError(f"invalid action {act!r} for {a}: actions are 0 (continue) and 1 (stop)")
        stops = []
        for i, v in self._batch.items():
            a = self.possible_agents[i]
            if a not in actions:
                raise ValueError(f"{a} has job {v.job_id} at an eval checkpoint and must act "
                                 "(0 continue, 1 stop); its action is missing")
            if as_int(actions[a]) == STOP:
                stops.append(v)
        return stops

    # -- driving the simulator -----------------------------------------------------
    def _collect(self) -> None:
        """Run the platform until the next batch of tenant decisions (or the end)."""
        sim, platform = self._sim, self._platform
        cluster = sim.cluster
        batch = self._batch = {}
        if self._carry is not None:
            batch[self._carry.tenant], self._carry = self._carry, None
            if not sim.eval_due_now():
                return
        while True:
            kind = self._advance()
            if kind == EVAL:
                job = sim.decision_job
                if platform.should_stop(job, cluster):   # the platform's stop comes first, as in drive
                    self._stop(job)
                elif job.tenant in batch:
                    self._carry = job
                    return
                else:
                    batch[job.tenant] = job
                if batch and not sim.eval_due_now():
                    return
            elif kind == DONE:
                return
            else:
                apply_plan(sim, platform.schedule(cluster))

    def _advance(self) -> int:
        """``sim.advance()`` plus each tenant's public reward terms for the time that passes."""
        sim = self._sim
        c = sim.cluster
        t0 = c.now_h
        running = list(c.running.values())
        jobs = np.zeros(len(self.possible_agents))
        gpus = np.zeros(len(self.possible_agents))
        for v in running:
            jobs[v.tenant] += 1
            gpus[v.tenant] += v.gpus
        for v in c.waiting.values():
            jobs[v.tenant] += 1
        self._kind = kind = sim.advance()
        dt = c.now_h - t0
        if dt:
            self._terms[_JCT] += jobs * dt   # jobs in the system x hours
            self._terms[_GPU] += gpus * dt   # GPUs held x hours
        for v in running:
            if v.status == COMPLETED:
                self._terms[_QUALITY, v.tenant] += v.eval_scores[-1]  # a completed job delivers its final checkpoint
        return kind

    def _stop(self, v: JobView) -> None:
        self._sim.stop(v.job_id)
        # a stopped job delivers its best observed checkpoint (the first of equal scores, as the simulator
        # picks it); credited a fresh eval of it, not the selected-upwards best observed score
        self._terms[_QUALITY, v.tenant] += self._credit(v.job_id, int(np.argmax(v.eval_scores)))

    # -- observations and infos ------------------------------------------------------
    def _observe_all(self) -> dict[str, np.ndarray]:
        c = self._sim.cluster
        own = [_Own() for _ in self.possible_agents]
        for v in c.running.values():
            own[v.tenant].running[v.job_id] = v
        for v in c.waiting.values():
            own[v.tenant].waiting[v.job_id] = v
        g, slots, cs = c.total_gpus, self.slots, COUNT_SCALE
        out = {}
        for i, a in enumerate(self.possible_agents):
            o, first = own[i], self._batch.get(i)
            views = window(o, slots, first)
            shown_running = sum(1 for v in views if v.status == RUNNING)
            nr, nw = len(o.running), len(o.waiting)
            unseen = nr + nw - len(views)
            tenant = [sum(v.gpus for v in o.running.values()) / g, nr / (nr + cs), nw / (nw + cs),
                      unseen / (unseen + cs)]
            row = cluster_row(c, shown_running=shown_running, shown_waiting=len(views) - shown_running,
                              eval_point=first is not None)
            row += tenant
            if self._topo_spec is not None:
                row += topology_row(c, views, slots)
            out[a] = observation(views, slots, g, row, first.job_id if first is not None else None)
        return out

    def _infos(self, final: bool) -> dict[str, dict[str, Any]]:
        c = self._sim.cluster
        infos = {}
        for i, a in enumerate(self.possible_agents):
            v = self._batch.get(i)
            infos[a] = {"time_h": c.now_h, "decision_job": v.job_id if v is not None else -1,
                        "action_mask": np.array([1, 1] if v is not None else [1, 0], np.int8)}
        if final:
            out = self._sim.outcome()
            metrics = compute_metrics(out)
            for i, a in enumerate(self.possible_agents):
                part = tenant_outcome(out, i)
                infos[a]["metrics"] = dict(metrics)
                infos[a]["tenant_metrics"] = compute_metrics(part) if part is not None else None
        return infos

    # -- public state for hand-coded tenants and tests ---------------------------------
    def decision_job(self, agent: str) -> JobView | None:
        """The agent's own job at the current eval checkpoint (``None`` if it has nothing to decide)."""
        return self._batch.get(self.possible_agents.index(agent)) if self._sim is not None else None

    @property
    def time_h(self) -> float:
        """Simulated hours now."""
        return self._sim.cluster.now_h if self._sim is not None else 0.0

    def render(self) -> str | None:
        if self.render_mode is None:
            warnings.warn("render() called without a render_mode; make the env with render_mode='ansi'")
            return None
        if self._sim is None:
            raise RuntimeError("call reset() before render()")
        first = next(iter(self._batch.values()), None)
        return ansi_text(self._sim.cluster, "eval" if first is not None else "done", first, self._n_jobs)

    def close(self) -> None:
        pass

