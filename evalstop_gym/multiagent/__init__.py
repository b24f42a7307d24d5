"""Multi-agent adapters (PettingZoo) over the simulator; needs the ``multiagent`` extra.

``from evalstop_gym.multiagent import tenants_v0`` then ``tenants_v0.parallel_env()``.
"""

from . import tenants_v0

__all__ = ["tenants_v0"]
