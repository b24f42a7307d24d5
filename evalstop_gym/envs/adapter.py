"""Hand-coded policies through the environments, as ``agent(obs) -> action``.

:class:`PolicyAgent` plays any :class:`~evalstop_gym.policy.Policy` on an
EvalStop env. Besides the observation it reads the env's public
:class:`~evalstop_gym.view.ClusterView` (the very objects a policy receives
from :func:`~evalstop_gym.policy.drive`), because a hand-coded policy is
written against views, not feature vectors. It makes the same calls in the
same order as ``drive``, so the metrics match the direct simulator exactly:

    >>> from evalstop_gym.envs.adapter import run_through_env
    >>> from evalstop_gym import simulate
    >>> run_through_env("fifo", "evalstop", jobs=20, seed=1) == simulate("fifo", "evalstop", jobs=20, seed=1)
    True
"""

from __future__ import annotations

from collections import deque
from typing import Any

import gymnasium as gym
import numpy as np

from ..api import DEFAULT_SCHEDULER
from ..policy import Plan, Policy
from .base import COMMIT, CONTINUE, STOP
from .cluster_env import ClusterEnv
from .stop_env import StopControlEnv

CLUSTER_ID = "EvalStop-Cluster-v0"
STOP_CONTROL_ID = "EvalStop-StopControl-v0"


class PolicyAgent:
    """``agent(obs) -> action`` for a hand-coded policy on ``env``.

    On EvalStop-Cluster-v0 a scheduling decision becomes sub-steps: the
    plan's preemptions, then its starts (each as the toggle of the job's
    slot), then commit; a plan's wake-up is requested just before the commit,
    as :func:`~evalstop_gym.policy.apply_plan` does. On
    EvalStop-StopControl-v0 only ``should_stop`` is asked; the env's own base
    scheduler places jobs. On nodes, the plan's placements (``Plan.placed``)
    are handed to the env with :meth:`ClusterEnv.request_placement`.
    """

    def __init__(self, policy: Policy, env: gym.Env):
        if not isinstance(policy, Policy):
            raise TypeError(f"policy must be a Policy, got {type(policy).__name__}")
        self.policy = policy
        self.env = env.unwrapped
        if not isinstance(self.env, (ClusterEnv, StopControlEnv)):
            raise TypeError(f"env must be an EvalStop env, got {type(self.env).__name__}")
        self._pending: deque = deque()

    def reset(self) -> None:
        """Call after ``env.reset()``: forgets the policy's per-episode state."""
        self.policy.reset()
        self._pending.clear()

    def __call__(self, obs: np.ndarray) -> int:
        env = self.env
        decision = env.decision
        if decision == "eval":
            return STOP if self.policy.should_stop(env.decision_job, env.cluster) else CONTINUE
        if decision != "schedule":
            raise RuntimeError(f"no decision to take at a {decision!r} point; reset the env")
        if not self._pending:
            plan = self.policy.schedule(env.cluster)
            self._pending.extend(plan.preempt)
            self._pending.extend(plan.start)
            for j, where in (plan.placed or {}).items():  # the nodes the plan chose, as apply_plan does
                env.request_placement(j, where)
            self._pending.append(plan)  # its commit
        step = self._pending.popleft()
        if isinstance(step, Plan):
            env.request_wakeup(step.timer_h(env.cluster.now_h))  # replaces the last plan's timer; None withdraws it
            return COMMIT
        return env.slot_action(step)


def rollout(env: gym.Env, agent, seed: int | None = None, options: dict | None = None,
            max_steps: int | None = None) -> dict[str, Any]:
    """Play one episode; return ``{"metrics", "return", "steps"}`` (metrics from the final info)."""
    obs, info = env.reset(seed=seed, options=options)
    if hasattr(agent, "reset"):
        agent.reset()
    total, steps = 0.0, 0
    while True:
        obs, reward, terminated, truncated, info = env.step(agent(obs))
        total += reward
        steps += 1
        if terminated or truncated or (max_steps is not None and steps >= max_steps):
            return {"metrics": info.get("metrics"), "return": total, "steps": steps}


def run_through_env(scheduler: str = DEFAULT_SCHEDULER, stopper: str = "none", *, env_id: str = CLUSTER_ID,
                    stopper_params: dict[str, Any] | None = None, seed: int | None = None,
                    **env_kwargs: Any) -> dict[str, Any]:
    """Metrics of ``stopper(scheduler)`` played through ``gym.make(env_id)``.

    ``env_kwargs`` go to ``gym.make`` (workload fields, ``slots``, ...);
    ``seed`` defaults to the ``seed`` keyword (as in ``simulate``). On
    EvalStop-StopControl-v0 the env's base scheduler is ``scheduler``.
    """
    from evalstop_gym.baselines import make_policy

    if env_id == STOP_CONTROL_ID:
        env_kwargs["scheduler"] = scheduler
    elif env_id == CLUSTER_ID and "slots" not in env_kwargs:
        env_kwargs["slots"] = max(16, env_kwargs.get("jobs", 0))  # every job addressable
    if seed is None:
        seed = env_kwargs.get("seed", 0)
    env = gym.make(env_id, **env_kwargs)
    try:
        agent = PolicyAgent(make_policy(scheduler, stopper, **(stopper_params or {})), env)
        return rollout(env, agent, seed=seed)["metrics"]
    finally:
        env.close()
