"""Saved models on any workload: a learned stop-policy as a stopper, and a learned scheduler whose
eval checkpoints a learned stop-policy answers.

A stop-policy model was trained on EvalStop-StopControl-v0, where each
observation is built from two public views: the job at its checkpoint and the
cluster. :class:`LearnedStop` rebuilds that observation from the same views
with the env's own code (:func:`stop_observation`) and asks the model, so the
model becomes a :class:`~evalstop_gym.policy.Stopper` over any base scheduler,
or the rule that answers a learned scheduler's checkpoints
(:func:`learned_metrics` with ``stop_model``). Played through
:func:`~evalstop_gym.policy.drive` over base scheduler ``s`` it gives exactly
the metrics of the model played through its env over ``s`` (tested).

A model runs on a workload's own cluster: its env is rebuilt with that
cluster (:func:`policy_env`). Where the observation changes shape there (a
learned scheduler's has one entry per node), a network that takes any number
of slots and nodes is rebuilt for it; any other model is refused with a
:class:`~evalstop_gym.config.ConfigError` that says why.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import gymnasium as gym
import numpy as np

from evalstop_gym.config import ConfigError
from evalstop_gym.envs.base import STOP
from evalstop_gym.envs.features import topology_shape
from evalstop_gym.envs.stop_env import StopControlEnv
from evalstop_gym.policy import Policy, Stopper
from evalstop_gym.simulator import EVAL

from .policy import LearnedPolicy
from .wrappers import HandCodedStops


def stop_observation(job, cluster) -> np.ndarray:
    """What EvalStop-StopControl-v0 shows at ``job``'s eval checkpoint on ``cluster`` (public views).

    Runs the env's own ``_observe`` on a stand-in that holds just these two
    views, so this observation and the env's cannot drift apart.
    """
    topo = cluster.spec if topology_shape(cluster.spec) else None
    stand_in = SimpleNamespace(_sim=SimpleNamespace(cluster=cluster, decision_job=job), _kind=EVAL,
                               _topo_spec=topo)
    return StopControlEnv._observe(stand_in)


class LearnedStop(Stopper):
    """A saved stop-policy as a stopper over ``base``: stop when the model's deterministic action is stop."""

    rule_name = "learned"

    def __init__(self, base: Policy, model: LearnedPolicy):
        super().__init__(base)
        if not model.env_id.endswith("StopControl-v0"):
            raise ConfigError("stop_model", str(model.path), f"is a {model.label}, not a stop-policy")
        self.model = model
        env = model.make_env()
        try:
            self._wrappers = _observation_wrappers(env, model)
        finally:
            env.close()

    def rule(self, job, cluster) -> bool:
        obs = stop_observation(job, cluster)
        for w in self._wrappers:
            obs = w.observation(obs)
        action, _ = self.model.model.predict(obs, deterministic=True)
        return int(action) == STOP


def _observation_wrappers(env: gym.Env, model: LearnedPolicy) -> list[gym.ObservationWrapper]:
    """The observation wrappers of a stop-policy's env stack, innermost first (nothing else may wrap it)."""
    chain = []
    while isinstance(env, gym.Wrapper):
        if isinstance(env, gym.ObservationWrapper):
            chain.append(env)
        elif not _is_gym_bookkeeping(env):
            raise ConfigError("stop_model", str(model.path), f"its env wrapper {type(env).__name__} changes more "
                              "than observations: the stop-policy cannot answer another policy's checkpoints")
        env = env.env
    return chain[::-1]


def _is_gym_bookkeeping(env: gym.Wrapper) -> bool:
    # gym.make's own wrappers (order enforcing, passive env checker) change nothing the model sees
    return type(env).__module__.startswith("gymnasium.")


def policy_env(pol: LearnedPolicy, workload, scheduler: str | None = None) -> tuple[gym.Env, LearnedPolicy]:
    """The model's env stack on ``workload``'s cluster, and the model to play it with.

    Where the env's observations have another shape than the model was
    trained on (a learned scheduler sees one entry per node), a network that
    takes any number of slots and nodes is rebuilt for the new shape by
    ``transfer(model, env)`` of :mod:`evalstop_gym.agents.networks`, if that
    module provides one; any other model is refused with the reason.
    """
    from . import networks

    env = pol.make_env(scheduler, gpus=workload.total_gpus, cluster=workload.spec)
    want, have = pol.model.observation_space.shape, env.observation_space.shape
    if want == have:
        return env, pol
    why = (f"observes {want[0]} features, but on {workload.spec.describe()} its env gives {have[0]}: this "
           f"{pol.label} takes inputs sized by the cluster ({topology_shape(workload.spec) or 1} node(s) here)")
    transfer = getattr(networks, "transfer", None)
    try:
        if transfer is None:
            raise ValueError("its network cannot be rebuilt for another size")
        return env, LearnedPolicy(transfer(pol.model, env), pol.config, pol.path)
    except ValueError as e:
        env.close()
        raise ConfigError("model", str(pol.path), f"{why} and cannot run on it ({e})") from None


def learned_metrics(model: LearnedPolicy, workload, scheduler: str | None = None,
                    stop_model: LearnedPolicy | None = None) -> dict[str, Any]:
    """Metrics of one episode of ``model`` on ``workload``.

    A stop-policy runs over ``scheduler``; a learned scheduler with
    ``stop_model`` has that stop-policy answer its eval checkpoints instead of
    the hand-coded stopper it was trained behind.
    """
    from evalstop_gym.envs.adapter import rollout

    env, model = policy_env(model, workload, scheduler)
    try:
        if stop_model is not None:
            answer_checkpoints_with(env, LearnedStop(Policy(), stop_model), model)
        return rollout(env, model.agent(env), options={"workload": workload})["metrics"]
    finally:
        env.close()


def answer_checkpoints_with(env: gym.Env, rule: Policy, model: LearnedPolicy) -> None:
    """Make the :class:`HandCodedStops` wrapper of a learned scheduler's env ask ``rule`` at checkpoints."""
    e = env
    while isinstance(e, gym.Wrapper):
        if isinstance(e, HandCodedStops):
            if getattr(e, "stop_model", None) is not None:
                raise ConfigError("scheduler_model", str(model.path), "has a stop-policy of its own at its "
                                  f"checkpoints ({e.stop_model}): leave out the second one")
            e._rule = rule   # the wrapper asks its rule only reset() and should_stop(job, cluster)
            return
        e = e.env
    raise ConfigError("scheduler_model", str(model.path), f"is a {model.label}: it stops jobs itself, so no "
                      "stop-policy can answer its checkpoints")
