"""Gymnasium environments: thin adapters over :class:`evalstop_gym.simulator.Simulator`.

* ``EvalStop-Cluster-v0`` (:class:`ClusterEnv`): the agent is the platform.
* ``EvalStop-StopControl-v0`` (:class:`StopControlEnv`): a base scheduler
  places jobs, the agent decides continue / stop at eval checkpoints.

The MDPs are documented in ``docs/mdp.md``.
"""

from .base import COMMIT, CONTINUE, STOP, SimEnv
from .cluster_env import ClusterEnv
from .registration import ENVS, register_envs
from .stop_env import StopControlEnv

__all__ = ["ClusterEnv", "StopControlEnv", "SimEnv", "register_envs", "ENVS", "COMMIT", "CONTINUE", "STOP"]
