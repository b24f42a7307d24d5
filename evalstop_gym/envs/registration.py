"""Registration of the EvalStop environments with Gymnasium, without importing Gymnasium.

Gymnasium 1.x has no entry-point plugins (its 1.0 release removed them), so a
package registers its ids itself. ``import evalstop_gym`` calls
:func:`register_when_gymnasium_loads`: the ids are registered at once if
Gymnasium is already imported, otherwise the moment it is (a post-import hook,
from wrapt), so the simulator and the ``simulate`` command never pay for
importing Gymnasium, and ``import evalstop_gym; import gymnasium as gym;
gym.make("EvalStop-Cluster-v0")`` works in either import order.
``gym.make("evalstop_gym:EvalStop-Cluster-v0")`` imports the package first.
Variants are keyword arguments, not subclasses:
``gym.make("EvalStop-Cluster-v0", workload="balanced", noise=0.05)``.
Entry points are strings, so an env class is built only by ``gym.make``.
"""

from __future__ import annotations

from typing import Any

ENVS = {
    "EvalStop-Cluster-v0": "evalstop_gym.envs.cluster_env:ClusterEnv",
    "EvalStop-StopControl-v0": "evalstop_gym.envs.stop_env:StopControlEnv",
}


def register_envs(_gymnasium: Any = None) -> None:
    """Register every EvalStop env id once; calling it again changes nothing.

    (The argument is the loaded Gymnasium module when this runs as a post-import hook.)
    """
    import gymnasium as gym

    for env_id, entry_point in ENVS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry_point)


def register_when_gymnasium_loads() -> None:
    """Register the ids now if Gymnasium is imported, else right after it is imported."""
    import wrapt

    wrapt.register_post_import_hook(register_envs, "gymnasium")
