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

from pathlib import Path
from typing import Any

import gymnasium as gym

from evalstop_gym.cluster import resolve_cluster
from evalstop_gym.config import ConfigError
from evalstop_gym.envs.base import STOP
from evalstop_gym.envs.features import topology_shape
from evalstop_gym.envs.stop_env import stop_observation
from evalstop_gym.policy import Policy, Stopper

from .policy import LearnedPolicy
from .wrappers import HandCodedStops, JobFeatures


class LearnedStop(Stopper):
    """A saved stop-policy as a stopper over ``base``: stop when the model's deterministic action is stop.

    ``gpus`` and ``cluster`` (a :class:`~evalstop_gym.cluster.ClusterSpec`): the cluster it will answer on,
    by default its training env's; a network whose input depends on the cluster is rebuilt for it as in
    :func:`policy_env`, anything else that does not fit is a :class:`~evalstop_gym.config.ConfigError`.
    """

    rule_name = "learned"

    def __init__(self, base: Policy, model: LearnedPolicy, *, gpus: int | None = None, cluster=None):
        super().__init__(base)
        if not model.env_id.endswith("StopControl-v0"):
            raise ConfigError("stop_model", str(model.path), f"is a {model.label}, not a stop-policy")
        env, self.model = on_cluster(model, gpus, cluster)
        try:
            self._wrappers = _observation_wrappers(env, model)
        finally:
            env.close()

    def rule(self, job, cluster) -> bool:
        obs = stop_observation(cluster, job, topology_shape(cluster.spec) is not None)
        for w in self._wrappers:  # a wrapper that reads the job's history is given the job
            obs = w.observation_of(obs, job) if isinstance(w, JobFeatures) else w.observation(obs)
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
    """The model's env stack on ``workload``'s cluster, and the model to play it with (see :func:`on_cluster`)."""
    return on_cluster(pol, workload.total_gpus, workload.spec, scheduler)


def on_cluster(pol: LearnedPolicy, gpus: int | None, cluster, scheduler: str | None = None
               ) -> tuple[gym.Env, LearnedPolicy]:
    """The model's env stack on a cluster of ``gpus`` GPUs laid out as ``cluster`` (a ``ClusterSpec``; both
    ``None``: its training env's), and the model to play it with.

    Where the env's observations have another shape than the model was
    trained on (a learned scheduler sees one entry per node), a network that
    takes any number of slots and nodes is rebuilt for the new shape by
    ``transfer(model, env)`` of :mod:`evalstop_gym.agents.networks`; any other
    model is refused with the reason.
    """
    from . import networks

    fields = {k: v for k, v in (("gpus", gpus), ("cluster", cluster)) if v is not None}
    env = pol.make_env(scheduler, **fields)
    want, have = pol.model.observation_space.shape, env.observation_space.shape
    if want == have:
        return env, pol
    cfg = env.unwrapped.config
    where = resolve_cluster(cfg.cluster, cfg.gpus)
    why = (f"observes {want[0]} features, but on {where.describe()} its env gives {have[0]}: this "
           f"{pol.label} takes inputs sized by the cluster ({topology_shape(where) or 1} node(s) here)")
    try:
        return env, LearnedPolicy(networks.transfer(pol.model, env), pol.config, pol.path)
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
        if stop_model is not None:   # rebuilt for this cluster, as policy_env rebuilt the scheduler
            rule = LearnedStop(Policy(), stop_model, gpus=workload.total_gpus, cluster=workload.spec)
            answer_checkpoints_with(env, rule, model)
        return rollout(env, model.agent(env), options={"workload": workload})["metrics"]
    finally:
        env.close()


def answer_checkpoints_with(env: gym.Env, rule: Policy, model: LearnedPolicy) -> None:
    """Make the :class:`HandCodedStops` wrapper of a learned scheduler's env ask ``rule`` at checkpoints.

    A scheduler trained behind a stop-policy of its own keeps it: a second one is refused, unless it is the
    same model file.
    """
    e = env
    while isinstance(e, gym.Wrapper):
        if isinstance(e, HandCodedStops):
            own = e.stop_model
            if own is not None and not (isinstance(rule, LearnedStop) and _same_file(own, rule.model.path)):
                raise ConfigError("scheduler_model", str(model.path), "has a stop-policy of its own at its "
                                  f"checkpoints ({own}): leave out the second one")
            e.rule = rule
            return
        e = e.env
    raise ConfigError("scheduler_model", str(model.path), f"is a {model.label}: it stops jobs itself, so no "
                      "stop-policy can answer its checkpoints")


def _same_file(folder_or_zip, model_zip) -> bool:
    from .policy import model_files

    try:
        return model_files(folder_or_zip)[0].resolve() == Path(model_zip).resolve()
    except ConfigError:
        return False
