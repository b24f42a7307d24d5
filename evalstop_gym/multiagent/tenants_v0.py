"""``evalstop_tenants_v0``: the tenants of a shared GPU cluster as PettingZoo agents.

The PettingZoo entry points, by convention:

* ``parallel_env(**kwargs)``: the native :class:`~evalstop_gym.multiagent.tenants.TenantsEnv`
  (a ``ParallelEnv``);
* ``raw_env(**kwargs)``: the same env converted to the AEC API (``parallel_to_aec``);
* ``env(**kwargs)``: ``raw_env`` with PettingZoo's standard wrappers (out-of-bounds
  actions assert, call order enforced).

Keywords and the MDP: ``docs/multiagent.md``. The version suffix changes
whenever a change could alter learning results.
"""

from __future__ import annotations

from pettingzoo.utils import parallel_to_aec, wrappers

from .tenants import TenantsEnv

parallel_env = TenantsEnv


def raw_env(**kwargs):
    """The AEC form of :func:`parallel_env`, unwrapped."""
    return parallel_to_aec(parallel_env(**kwargs))


def env(**kwargs):
    """The AEC form with PettingZoo's standard wrappers."""
    aec = raw_env(**kwargs)
    aec = wrappers.AssertOutOfBoundsWrapper(aec)
    return wrappers.OrderEnforcingWrapper(aec)


__all__ = ["parallel_env", "raw_env", "env", "TenantsEnv"]
