"""Registration of the EvalStop environments with Gymnasium.

Runs at ``import evalstop_gym`` (Gymnasium 1.x ignores entry-point plugins),
and ``gym.make("evalstop_gym:EvalStop-Cluster-v0")`` imports the package first.
Variants are keyword arguments, not subclasses:
``gym.make("EvalStop-Cluster-v0", workload="balanced", noise=0.05)``.
Entry points are strings, so an env class is built only by ``gym.make``.
"""

from __future__ import annotations

import gymnasium as gym

ENVS = {
    "EvalStop-Cluster-v0": "evalstop_gym.envs.cluster_env:ClusterEnv",
    "EvalStop-StopControl-v0": "evalstop_gym.envs.stop_env:StopControlEnv",
}


def register_envs() -> None:
    """Register every EvalStop env id once; calling it again changes nothing."""
    for env_id, entry_point in ENVS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry_point)
