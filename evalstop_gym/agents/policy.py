"""A saved model as a policy: its env stack rebuilt, its deterministic actions, and a stop-policy as a stopper.

    >>> from evalstop_gym.agents.policy import LearnedPolicy
    >>> pol = LearnedPolicy.load("models/stop")            # the folder, or its model.zip
    >>> metrics = pol.run(seed=3, noise=0.05)              # one held-out episode, hidden-truth metrics

The env is rebuilt from the config exactly as in training (env id, env
settings, wrappers: :func:`make_env`, which training builds its envs with
too); only the workload changes (any ``WorkloadConfig`` field, default
``WorkloadConfig()``'s). A stop-policy trained over one base scheduler runs
over another with ``scheduler=...``. Actions are the model's deterministic
ones (argmax), with the env's action masks for MaskablePPO, so the same seed
gives the same metrics every time. The files are read and checked by
:mod:`evalstop_gym.agents.saved`.

A stop-policy model was trained on EvalStop-StopControl-v0, where each
observation is built from two public views: the job at its checkpoint and the
cluster. :class:`LearnedStop` rebuilds that observation from the same views
with the env's own code (:func:`stop_observation`) and asks the model, so the
model becomes a :class:`~evalstop_gym.policy.Stopper` over any base scheduler,
or the rule that answers a learned scheduler's checkpoints (a scheduler
trained behind a saved stop-policy names it in its ``HandCodedStops``
wrapper; :func:`make_env` loads it here, so the wrapper itself never loads a
model). Played through :func:`~evalstop_gym.policy.drive` over base scheduler
``s`` it gives exactly the metrics of the model played through its env over
``s`` (tested).

A model runs on a workload's own cluster: its env is rebuilt with that
cluster (:func:`policy_env`). Where the observation changes shape there (a
learned scheduler's has one entry per node), a network that takes any number
of slots and nodes is rebuilt for it; any other model is refused with a
:class:`~evalstop_gym.config.ConfigError` that says why.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import gymnasium as gym

from evalstop_gym.cluster import resolve_cluster
from evalstop_gym.config import ConfigError
from evalstop_gym.envs.base import STOP
from evalstop_gym.envs.features import topology_shape
from evalstop_gym.envs.stop_env import stop_observation
from evalstop_gym.policy import Policy, Stopper

from .saved import describe, load_model, model_files, read_config
from .wrappers import JobFeatures, WorkloadSeeds, wrap


def make_env(env_id: str, env_kwargs: dict[str, Any], workload: dict[str, Any],
             wrappers: list, first_seed: int | None = None, stride: int = 1, monitor: bool = False,
             monitor_file: str | None = None, stop_rule=None):
    """The env stack of a model: ``gym.make`` + named wrappers, a saved stop-policy a ``HandCodedStops`` names
    loaded as its :class:`LearnedStop` (or, given ``stop_rule(path, cluster_env)``, the policy that returns)
    (+ seeds and a Monitor for training, writing its episodes to ``monitor_file``, SB3's
    ``<name>.monitor.csv``, if given)."""
    import evalstop_gym  # noqa: F401  (registers the env ids in a fresh worker)

    env = wrap(gym.make(env_id, **env_kwargs, **workload), wrappers, learned_stop=stop_rule or learned_stop)
    if first_seed is not None:
        env = WorkloadSeeds(env, first_seed, stride)
    if monitor:
        from stable_baselines3.common.monitor import Monitor

        env = Monitor(env, filename=monitor_file)
    return env


def learned_stop(path: str, env) -> "LearnedStop":
    """The saved stop-policy at ``path`` answering the checkpoints of ``env`` (a ClusterEnv), on its cluster."""
    if not isinstance(path, (str, os.PathLike)):
        raise ConfigError("stop_model", path, "must be the path of a stop-policy folder saved by `evalstop-gym train`")
    try:
        return LearnedStop(Policy(), LearnedPolicy.load(path), gpus=env.config.gpus, cluster=env.config.cluster)
    except ConfigError as e:
        raise ConfigError("stop_model", path, e.allowed) from None


class LearnedPolicy:
    """A trained SB3 model with the env it was trained for."""

    def __init__(self, model, config: dict[str, Any], path: Path):
        self.model, self.config, self.path = model, config, path
        self.maskable = config["algo"] == "maskable-ppo"
        self.label = describe(config)

    @classmethod
    def unloaded(cls, path: str | os.PathLike) -> "LearnedPolicy":
        """The policy at ``path`` without its model: its checked config, to build its env (nothing of the
        model file is read)."""
        return cls(None, read_config(path), model_files(path)[0])

    @classmethod
    def load(cls, path: str | os.PathLike) -> "LearnedPolicy":
        pol = cls.unloaded(path)
        env = pol.make_env()
        try:
            pol.model = load_model(pol.path, pol.config, env.observation_space, env.action_space)
        finally:
            env.close()
        return pol

    @property
    def env_id(self) -> str:
        return self.config["env_id"]

    def make_env(self, scheduler: str | None = None, stop_rule=None, **workload: Any):
        """The model's env stack on a workload (``WorkloadConfig`` fields); ``scheduler`` for a stop-policy;
        ``stop_rule``: as :func:`make_env`'s."""
        from evalstop_gym.envs.adapter import STOP_CONTROL_ID

        kwargs = dict(self.config["env_kwargs"])
        world = (self.config.get("train_workload") or {}).get("calibration")
        if world is not None and "calibration" not in kwargs and "calibration" not in workload:
            workload = {"calibration": world, **workload}   # the world trained in, whatever its episode sizes
        if scheduler is not None:
            if self.env_id != STOP_CONTROL_ID:
                raise ConfigError("scheduler", scheduler, f"only a stop-policy runs over a base scheduler; "
                                  f"this model is a {self.label}")
            kwargs["scheduler"] = scheduler
        return make_env(self.env_id, kwargs, workload, [tuple(w) for w in self.config["env_wrapper"]],
                        stop_rule=stop_rule)

    def act(self, obs, env) -> int:
        """The deterministic action for ``obs`` (with ``env``'s masks for MaskablePPO)."""
        return self.decide(obs, self.masks(env))

    def masks(self, env):
        """``env``'s action masks now if the model takes them (MaskablePPO), else ``None``."""
        return env.action_masks() if self.maskable else None

    def decide(self, obs, masks) -> int:
        """The deterministic action for ``obs`` under ``masks`` (:meth:`masks`: ``None`` for a model without)."""
        if self.maskable:
            action, _ = self.model.predict(obs, deterministic=True, action_masks=masks)
        else:
            action, _ = self.model.predict(obs, deterministic=True)
        return int(action)

    def agent(self, env):
        """``agent(obs) -> action`` on ``env`` (for :func:`evalstop_gym.envs.adapter.rollout`)."""
        return lambda obs: self.act(obs, env)

    def run(self, seed: int = 0, *, scheduler: str | None = None, workload=None, **fields: Any) -> dict[str, Any]:
        """Metrics of one episode: workload seed ``seed`` with ``fields``, or a ready ``workload``."""
        from evalstop_gym.envs.adapter import rollout

        env = self.make_env(scheduler)
        try:
            if workload is not None:
                return rollout(env, self.agent(env), options={"workload": workload})["metrics"]
            return rollout(env, self.agent(env), seed=seed, options=fields or None)["metrics"]
        finally:
            env.close()


def metrics_deciding_elsewhere(path: str | os.PathLike, workload, act, stop_rule) -> dict[str, Any]:
    """Metrics of one episode of the learned scheduler at ``path`` on ``workload``, whose model decides elsewhere.

    Its env stack is rebuilt here, on ``workload``'s cluster, from its checked
    config alone (the model file is never opened); ``act(obs, masks)``
    (masks: :meth:`LearnedPolicy.masks`, ``None`` for a model without) gives
    each action, and ``stop_rule(path, cluster_env)`` the policy that answers
    the checkpoints of a saved stop-policy its ``HandCodedStops`` names. The
    env, observations and masks are :func:`~.combined.learned_metrics`'s, so a
    model giving the same actions gives the same metrics.
    """
    from evalstop_gym.envs.adapter import rollout

    pol = LearnedPolicy.unloaded(path)
    env = pol.make_env(stop_rule=stop_rule, gpus=workload.total_gpus, cluster=workload.spec)
    try:
        return rollout(env, lambda obs: act(obs, pol.masks(env)), options={"workload": workload})["metrics"]
    finally:
        env.close()


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
