"""Registration of the EvalStop environments with Gymnasium, without importing Gymnasium.

Gymnasium 1.x has no entry-point plugins (its 1.0 release removed them), so a
package registers its ids itself. ``import evalstop_gym`` calls
:func:`register_when_gymnasium_loads`: the ids are registered at once if
Gymnasium is already imported, otherwise the moment it is (a post-import
hook), so the simulator and the ``simulate`` command never pay for importing
Gymnasium, and ``import evalstop_gym; import gymnasium as gym;
gym.make("EvalStop-Cluster-v0")`` works in either import order.
``gym.make("evalstop_gym:EvalStop-Cluster-v0")`` imports the package first.
Variants are keyword arguments, not subclasses:
``gym.make("EvalStop-Cluster-v0", workload="balanced", noise=0.05)``.
Entry points are strings, so an env class is built only by ``gym.make``.
"""

from __future__ import annotations

import importlib.util
import sys
import threading

ENVS = {
    "EvalStop-Cluster-v0": "evalstop_gym.envs.cluster_env:ClusterEnv",
    "EvalStop-StopControl-v0": "evalstop_gym.envs.stop_env:StopControlEnv",
}


# ``gym.make_vec(id, num_envs=N)`` builds these (``vectorization_mode="sync"`` still gives SyncVectorEnv)
VECTOR_ENVS = {
    "EvalStop-Cluster-v0": "evalstop_gym.envs.vector:ClusterVectorEnv",
}


def register_envs() -> None:
    """Register every EvalStop env id once; calling it again changes nothing."""
    import gymnasium as gym

    for env_id, entry_point in ENVS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry_point, vector_entry_point=VECTOR_ENVS.get(env_id))


def register_when_gymnasium_loads() -> None:
    """Register the ids now if Gymnasium is imported, else right after it is imported."""
    if "gymnasium" in sys.modules:
        register_envs()
    elif not any(isinstance(f, _AfterGymnasium) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterGymnasium())


class _AfterGymnasium:
    """A meta path finder that finds nothing itself: it asks the other finders for Gymnasium's
    spec and wraps its loader so that :func:`register_envs` runs once Gymnasium has executed.

    (wrapt's ``register_post_import_hook`` does the same, but importing wrapt costs about 7% of
    the ``simulate`` command's CPU time, which is what this registration exists to save.)
    """

    def __init__(self):
        self._finding = threading.local()

    def find_spec(self, name, path=None, target=None):
        if name != "gymnasium" or getattr(self._finding, "on", False):
            return None
        self._finding.on = True  # the find_spec below asks the finders again, this one included
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self._finding.on = False
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _ThenRegister(spec.loader)
        return spec


class _ThenRegister:
    """Gymnasium's own loader, then :func:`register_envs`; the module keeps the real loader."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        module.__loader__ = module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        # done: later imports no longer pass through the finder
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _AfterGymnasium)]
        register_envs()
