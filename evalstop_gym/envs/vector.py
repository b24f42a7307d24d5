"""``EvalStop-Cluster-v0`` as a native vector env: N clusters stepped in one loop, batches written in place.

    >>> envs = gym.make_vec("EvalStop-Cluster-v0", num_envs=8)        # this class (the id's vector entry point)
    >>> envs = gym.make_vec("EvalStop-Cluster-v0", num_envs=8, step_info="lean")   # the fast path
    >>> obs, info = envs.reset(seed=0); info["action_mask"].shape
    (8, 34)

It returns what ``SyncVectorEnv`` of the same envs returns, byte for byte
(observations, rewards, terminations, truncations and every ``info`` entry
with its ``_key`` mask; autoreset on the next step, Gymnasium's default;
``reset(seed=s)`` seeds env i with ``s + i``), tested against it. What it
saves: each env builds its observation straight into its row of the batch
(:meth:`~evalstop_gym.envs.features.JobTable.write_into`, no per-env copy and
no re-stacking); with ``step_info="lean"`` each step's masks are copied as
bytes into one ``(N, 2 + slots)`` int8 array instead of an array per env
merged key by key (the envs run with ``step_info="none"``; ``metrics``,
``truncation`` and the reset info after an autoreset are merged as
``SyncVectorEnv`` merges them). ``step_info="full"`` merges every key as
``SyncVectorEnv`` does. ``python benchmarks/bench_env.py`` measures both.

Keywords are those of :class:`~evalstop_gym.envs.cluster_env.ClusterEnv`
(each env is built with the same ones); ``copy=False`` returns the batch
buffers themselves (overwritten by the next step), as ``SyncVectorEnv(copy=False)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from ..config import check_range
from .cluster_env import ClusterEnv


class ClusterVectorEnv(VectorEnv):
    """``num_envs`` :class:`ClusterEnv` s as one :class:`gymnasium.vector.VectorEnv` (autoreset: next step)."""

    def __init__(self, num_envs: int = 1, *, copy: bool = True, step_info: str = "full", **kwargs: Any):
        check_range("num_envs", num_envs, 1, 100_000, integer=True)
        self._lean = step_info == "lean"
        self.envs = [ClusterEnv(step_info="none" if self._lean else step_info, **kwargs) for _ in range(num_envs)]
        first = self.envs[0]
        self.num_envs, self.copy = num_envs, copy
        self.metadata = {**first.metadata, "autoreset_mode": AutoresetMode.NEXT_STEP}
        self.render_mode = first.render_mode
        self.single_observation_space, self.single_action_space = first.observation_space, first.action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._obs = np.zeros((num_envs, *self.single_observation_space.shape), np.float32)
        for env, row in zip(self.envs, self._obs):
            env._table.write_into(row)
        self._width = int(self.single_action_space.n)
        self._masks = np.zeros((num_envs, self._width), np.int8)
        self._masks_mv = memoryview(self._masks.view(np.uint8).reshape(-1))   # bytes go in as they are
        self._all = np.ones(num_envs, np.bool_)
        self._rewards = np.zeros(num_envs, np.float64)
        self._terminations = np.zeros(num_envs, np.bool_)
        self._truncations = np.zeros(num_envs, np.bool_)
        self._autoreset = np.zeros(num_envs, np.bool_)

    def reset(self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None):
        if seed is None:
            seeds: list = [None] * self.num_envs
        elif isinstance(seed, int):
            seeds = [seed + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"seed: a list of seeds needs one per env, num_envs={self.num_envs}; "
                                 f"got {len(seeds)}")
        if options is not None and "reset_mask" in options:
            raise ValueError("options['reset_mask'] is for autoreset_mode='disabled'; this vector env autoresets "
                             "on the next step (Gymnasium's default)")
        self._terminations[:] = self._truncations[:] = self._autoreset[:] = False
        infos: dict[str, Any] = {}
        for i, (env, s) in enumerate(zip(self.envs, seeds)):
            _, info = env.reset(seed=s, options=options)
            infos = self._merge(infos, info, i, env)
        return self._out(self._obs), self._finish(infos)

    def step(self, actions):
        infos: dict[str, Any] = {}
        rewards, term, trunc, autoreset = self._rewards, self._terminations, self._truncations, self._autoreset
        for i, (env, a) in enumerate(zip(self.envs, actions)):
            if autoreset[i]:
                _, info = env.reset()
                rewards[i], term[i], trunc[i] = 0.0, False, False
            else:
                _, rewards[i], term[i], trunc[i], info = env.step(a)
            infos = self._merge(infos, info, i, env)
        np.logical_or(term, trunc, out=autoreset)
        return (self._out(self._obs), self._out(rewards), self._out(term), self._out(trunc),
                self._finish(infos))

    def _merge(self, infos: dict, info: dict, i: int, env: ClusterEnv) -> dict:
        """One env's ``info`` merged as ``SyncVectorEnv`` merges it; lean: its mask into the batch of masks."""
        if self._lean:
            w = self._width
            self._masks_mv[i * w:(i + 1) * w] = env._mask
            if "action_mask" in info:   # a reset's info (the envs' steps give none)
                info = {k: v for k, v in info.items() if k != "action_mask"}
        return self._add_info(infos, info, i) if info else infos

    def _finish(self, infos: dict) -> dict:
        if self._lean:
            infos["action_mask"], infos["_action_mask"] = self._masks.copy(), self._all.copy()
        return infos

    def _out(self, array: np.ndarray) -> np.ndarray:
        return array.copy() if self.copy else array

    def action_masks(self) -> np.ndarray:
        """Every env's valid actions now, ``(num_envs, 2 + slots)`` int8 (for masked sampling)."""
        return np.stack([env.action_masks() for env in self.envs])

    def render(self):
        return tuple(env.render() for env in self.envs)

    def close_extras(self, **kwargs: Any) -> None:
        for env in self.envs:
            env.close()
