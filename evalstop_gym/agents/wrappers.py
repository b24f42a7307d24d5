"""Gymnasium wrappers the learned agents train and run behind.

None of them holds simulation logic or reads hidden state: they choose which
workload seed an episode plays, which public features the network sees, and
which decisions a hand-coded rule takes instead of the agent.

* :class:`WorkloadSeeds` (training and validation only): owns the workload seed
  of every episode, so training, validation and held-out test seeds are
  disjoint by construction (see :mod:`evalstop_gym.agents.seeds`).
* :class:`JobFeatures`: the stop-policy sees only the job at the checkpoint,
  a chosen subset of its row (no cluster features), so a policy trained on
  one-job episodes sees the same kind of input on a 200-job cluster.
* :class:`HandCodedStops`: on EvalStop-Cluster-v0 a hand-coded stopper
  (EvalStop k=2 by default) or a saved stop-policy answers every eval checkpoint, so the agent only
  schedules, and can be compared with ``srtf-est + evalstop`` on equal terms;
  optional masks make it work-conserving and non-preemptive.

Wrappers are named in a model's ``config.json`` (:data:`WRAPPERS`), and the
same stack is rebuilt when the model is evaluated (:func:`wrap`).
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import gymnasium as gym
import numpy as np

from evalstop_gym.config import ConfigError
from evalstop_gym.envs.base import CONTINUE, STOP
from evalstop_gym.envs.cluster_env import SLOT0, ClusterEnv
from evalstop_gym.envs.features import JOB_FEATURES
from evalstop_gym.envs.stop_env import StopControlEnv
from evalstop_gym.view import RUNNING

from .history_features import HISTORY_FEATURES, history_row


class WorkloadSeeds(gym.Wrapper):
    """Episode ``i`` plays workload seed ``first + stride * i``; ``rewind()`` starts over.

    A ``seed`` passed to ``reset`` is deliberately ignored for the workload:
    SB3 resets vectorized envs once with ``seed + rank`` (0, 1, ... for seed 0),
    which would put training on the held-out test seeds. It still seeds the
    env's own generator, which the EvalStop envs do not use when a seed is given.
    """

    def __init__(self, env: gym.Env, first: int, stride: int = 1):
        super().__init__(env)
        self.first, self.stride = int(first), int(stride)
        self.episodes = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        workload_seed = self.first + self.stride * self.episodes
        self.episodes += 1
        return self.env.reset(seed=workload_seed, options=options)

    def rewind(self) -> None:
        """Play the same seeds again from the first (before every validation round)."""
        self.episodes = 0

    def process_cpu_seconds(self) -> float:
        """CPU time of the process holding this env (a SubprocVecEnv worker reports its own)."""
        return time.process_time()


# the stop-policy's inputs: the job's type, size, length estimate, progress and its
# observed score / loss / proxy history; not its queueing or the cluster's state
STOP_FEATURES = ("type_lora", "type_dpo", "type_rlhf", "gpus", "est_length", "attained", "remaining_est",
                 "progress", "has_eval", "last_score", "best_score", "drawdown", "delta_1", "delta_2",
                 "delta_3", "declines", "loss_trend", "proxy_trend")


class JobFeatures(gym.ObservationWrapper):
    """Keep only the named features of the job row (EvalStop-StopControl-v0's first row), and add any named
    :data:`~evalstop_gym.agents.history_features.HISTORY_FEATURES` of the job at the checkpoint."""

    def __init__(self, env: gym.Env, features: Sequence[str] = STOP_FEATURES):
        super().__init__(env)
        if not isinstance(env.unwrapped, StopControlEnv):
            raise ConfigError("env_wrapper", "JobFeatures", "applies to EvalStop-StopControl-v0 only")
        names = list(JOB_FEATURES)
        unknown = [f for f in features if f not in names and f not in HISTORY_FEATURES]
        if unknown:
            raise ConfigError("JobFeatures.features", unknown[0], f"must be job features: {', '.join(names)}, or "
                              f"history features: {', '.join(HISTORY_FEATURES)}")
        self.features = tuple(features)
        self._row = [i for i, f in enumerate(features) if f in JOB_FEATURES]
        self._index = np.array([names.index(features[i]) for i in self._row], dtype=np.intp)
        self._history = [i for i, f in enumerate(features) if f in HISTORY_FEATURES]
        self._history_names = [features[i] for i in self._history]
        space = env.observation_space
        low, high = np.empty(len(features), np.float32), np.empty(len(features), np.float32)
        low[self._row], high[self._row] = space.low[self._index], space.high[self._index]
        for i, name in zip(self._history, self._history_names):
            low[i], high[i] = HISTORY_FEATURES[name][:2]
        self.observation_space = gym.spaces.Box(low, high, dtype=np.float32)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return self.observation_of(observation, self.env.unwrapped.decision_job if self._history else None)

    def observation_of(self, observation: np.ndarray, job) -> np.ndarray:
        """The wrapped observation of ``job`` at its checkpoint (None: after the episode), whose env observation
        is ``observation``; a saved stop-policy answering another policy's checkpoints calls this."""
        if not self._history:
            return observation[self._index]
        out = np.empty(len(self.features), np.float32)
        out[self._row] = observation[self._index]
        out[self._history] = history_row(job, self._history_names)
        return out


class HandCodedStops(gym.Wrapper):
    """EvalStop-Cluster-v0 with a hand-coded stopper (or a saved stop-policy, ``stop_model``) answering
    every eval checkpoint.

    After each agent action, eval checkpoints are answered by ``rule`` until
    the next scheduling decision or the episode's end; their rewards are added
    to the step's. ``rule`` is ``stopper`` (a name in
    ``evalstop_gym.baselines.STOPPERS`` with ``params``), or ``rule`` itself, any
    :class:`~evalstop_gym.policy.Policy` (only ``reset`` and ``should_stop`` are
    asked). ``stop_model`` (a model folder saved by ``train``) names the saved
    stop-policy that ``rule`` is (recorded in the model's config); the wrapper
    loads no model: :func:`~evalstop_gym.agents.policy.make_env` gives it that
    stop-policy as a :class:`~evalstop_gym.agents.policy.LearnedStop`. With ``work_conserving`` commit is masked while a waiting job in
    the window fits in the free GPUs; with ``preempt=False`` running jobs
    cannot be toggled. ``PolicyAgent(make_policy(s, stopper), env)`` on this
    wrapper gives exactly ``simulate(s, stopper)`` for any scheduler the masks
    allow (tested).
    """

    def __init__(self, env: gym.Env, stopper: str = "evalstop", params: dict[str, Any] | None = None,
                 work_conserving: bool = False, preempt: bool = True, stop_model: str | None = None,
                 rule=None):
        from evalstop_gym.baselines import make_policy

        super().__init__(env)
        if not isinstance(env.unwrapped, ClusterEnv):
            raise ConfigError("env_wrapper", "HandCodedStops", "applies to EvalStop-Cluster-v0 only")
        if stop_model is not None and rule is None:
            raise ConfigError("stop_model", stop_model, "is loaded by the learned layer's env builder "
                              "(evalstop_gym.agents.policy.make_env), which passes it as rule; the wrapper "
                              "loads no model")
        self.stopper = stopper
        self.params = dict(params or {})
        self.stop_model = stop_model
        self.rule = make_policy("fifo", stopper, **self.params) if rule is None else rule
        self.work_conserving = bool(work_conserving)
        self.preempt = bool(preempt)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        self.rule.reset()
        obs, info = self.env.reset(seed=seed, options=options)
        self._carry = 0.0   # reward of checkpoints answered during reset, paid with the first step
        if self.env.unwrapped.decision == "eval":
            obs, self._carry, _, _, info = self._answer_evals(obs, 0.0, False, False, info)
        info["action_mask"] = self.action_masks()
        return obs, info

    def step(self, action):
        mask = self._mask_now()
        a = int(action) if np.ndim(action) == 0 and np.issubdtype(np.asarray(action).dtype, np.integer) else None
        if a is not None and 0 <= a < mask.size and not mask[a] and self.env.unwrapped.action_masks()[a]:
            if self.env.unwrapped.invalid_action == "raise":
                raise ValueError(f"invalid action {a}: masked by HandCodedStops (work_conserving="
                                 f"{self.work_conserving}, preempt={self.preempt}); valid: "
                                 f"{np.flatnonzero(mask).tolist()}")
            action = -1   # out of range: the env plays it as its own penalized no-op (and counts the step)
        obs, reward, terminated, truncated, info = self.env.step(action)
        reward += self._carry
        self._carry = 0.0
        obs, reward, terminated, truncated, info = self._answer_evals(obs, reward, terminated, truncated, info)
        info["action_mask"] = self.action_masks()
        return obs, reward, terminated, truncated, info

    def _answer_evals(self, obs, reward, terminated, truncated, info):
        env = self.env.unwrapped
        terms = dict(info.get("reward_terms", {}))
        while not (terminated or truncated) and env.decision == "eval":
            a = STOP if self.rule.should_stop(env.decision_job, env.cluster) else CONTINUE
            obs, r, terminated, truncated, info = self.env.step(a)
            reward += r
            for k, v in info["reward_terms"].items():
                terms[k] = terms.get(k, 0.0) + v
        if terms:
            info["reward_terms"] = terms
        return obs, reward, terminated, truncated, info

    def _mask_now(self) -> np.ndarray:
        env = self.env.unwrapped
        mask = env.action_masks()
        if env.decision != "schedule":
            return mask
        window = env.window
        running = np.array([v.status == RUNNING for v in window], bool)
        slots = mask[SLOT0:SLOT0 + len(window)]
        if not self.preempt:
            slots[running] = 0
        if self.work_conserving and slots[~running].any():
            mask[0] = 0
        return mask

    def action_masks(self) -> np.ndarray:
        """The env's masks, narrowed by ``work_conserving`` and ``preempt`` (never all 0)."""
        return self._mask_now()


WRAPPERS = {"JobFeatures": JobFeatures, "HandCodedStops": HandCodedStops}


def parse_wrappers(spec: Any) -> list[tuple[str, dict[str, Any]]]:
    """RL Zoo's ``env_wrapper``: a dotted path (``evalstop_gym.agents.wrappers.JobFeatures``; the bare class name
    is accepted too, as saved in ``config.json``), a ``{path: kwargs}``, or a list of them."""
    if spec is None:
        return []
    items = spec if isinstance(spec, list) else [spec]
    out = []
    for item in items:
        if isinstance(item, str):
            name, kwargs = item, {}
        elif isinstance(item, dict) and len(item) == 1:
            name, kwargs = next(iter(item.items()))
            kwargs = dict(kwargs or {})
        else:
            raise ConfigError("env_wrapper", item, "each entry must be a wrapper name or {name: {kwargs}}")
        module, _, short = str(name).rpartition(".")   # RL Zoo imports "<module>.<class>"
        if short not in WRAPPERS or module not in ("", __name__):
            raise ConfigError("env_wrapper", name, "must be one of "
                              f"{', '.join(f'{__name__}.{w}' for w in WRAPPERS)}")
        name = short
        out.append((name, kwargs))
    return out


def wrap(env: gym.Env, wrappers: Sequence[tuple[str, dict[str, Any]]], learned_stop=None) -> gym.Env:
    """Apply named wrappers in order; ``learned_stop(path, cluster_env)``: the rule of a ``HandCodedStops``
    that names a saved stop-policy (``stop_model``)."""
    for name, kwargs in wrappers:
        if "rule" in kwargs:
            raise ConfigError(f"env_wrapper.{name}", kwargs, "takes no rule from a file (name a stopper, or a "
                              "stop_model)")
        if name == "HandCodedStops" and kwargs.get("stop_model") is not None and learned_stop is not None:
            kwargs = {**kwargs, "rule": learned_stop(kwargs["stop_model"], env.unwrapped)}
        try:
            env = WRAPPERS[name](env, **kwargs)
        except TypeError as e:
            raise ConfigError(f"env_wrapper.{name}", kwargs, str(e)) from None
    return env
