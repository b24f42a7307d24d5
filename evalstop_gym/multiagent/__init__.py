"""Multi-agent adapters (PettingZoo) over the simulator; needs the ``multiagent`` extra.

``from evalstop_gym.multiagent import tenants_v0`` then ``tenants_v0.parallel_env()``.
"""

from ..extras import missing_extra

try:
    import pettingzoo  # noqa: F401
except ModuleNotFoundError as e:
    raise missing_extra(e, "evalstop_gym.multiagent") from None

from . import tenants_v0  # noqa: E402

__all__ = ["tenants_v0"]
