"""A learned pair on a workload: a learned scheduler whose eval checkpoints a learned stop-policy answers.

:func:`learned_metrics` plays one episode of a saved model on a ready
workload, on that workload's cluster: a stop-policy over a base scheduler, or
a learned scheduler, optionally with a saved stop-policy
(:class:`~evalstop_gym.agents.policy.LearnedStop`) answering its checkpoints
instead of the hand-coded stopper it was trained behind.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym

from evalstop_gym.config import ConfigError
from evalstop_gym.policy import Policy

from .policy import LearnedPolicy, LearnedStop, policy_env
from .saved import model_files
from .wrappers import HandCodedStops


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
    try:
        return model_files(folder_or_zip)[0].resolve() == Path(model_zip).resolve()
    except ConfigError:
        return False
