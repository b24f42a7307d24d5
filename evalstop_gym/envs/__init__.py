"""Gymnasium environments: thin adapters over :class:`evalstop_gym.simulator.Simulator`.

* ``EvalStop-Cluster-v0`` (:class:`ClusterEnv`): the agent is the platform.
* ``EvalStop-StopControl-v0`` (:class:`StopControlEnv`): a base scheduler
  places jobs, the agent decides continue / stop at eval checkpoints.

The MDPs are documented in ``docs/mdp.md``. The env classes (and Gymnasium)
are imported on first use, so importing :mod:`evalstop_gym.envs.registration`
(which ``import evalstop_gym`` does) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

from .registration import ENVS, register_envs

_LAZY = {"ClusterEnv": ".cluster_env", "StopControlEnv": ".stop_env", "SimEnv": ".base",
         "COMMIT": ".base", "CONTINUE": ".base", "STOP": ".base"}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name], __name__), name)


__all__ = ["ClusterEnv", "StopControlEnv", "SimEnv", "register_envs", "ENVS", "COMMIT", "CONTINUE", "STOP"]
