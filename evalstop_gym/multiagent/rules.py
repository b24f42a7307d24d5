"""Hand-coded tenants: stop rules that read only the tenant's own observation.

A tenant rule is ``rule(obs) -> action`` (0 continue, 1 stop) on one tenant's
observation vector; it is asked only when the tenant has a checkpoint to
decide (the job in slot 0, its ``decision`` feature 1). Because the
observation carries ``declines = min(consecutive declines, 10) / 10``,
EvalStop(k) is a threshold on one feature, so a tenant can run the paper's
rule on its own jobs without any access to the simulator:

    >>> from evalstop_gym.multiagent import tenants_v0
    >>> from evalstop_gym.multiagent.rules import EvalStopRule, play
    >>> from evalstop_gym import simulate
    >>> env = tenants_v0.parallel_env(jobs=30, scheduler="fifo")
    >>> play(env, EvalStopRule(2), seed=1)["metrics"] == simulate("fifo", "evalstop", jobs=30, seed=1)
    True
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from ..envs.features import JOB_FEATURES
from .tenants import CONTINUE, STOP, TenantsEnv

DECISION = list(JOB_FEATURES).index("decision")   # slot 0 holds the job at the checkpoint
DECLINES = list(JOB_FEATURES).index("declines")
PROGRESS = list(JOB_FEATURES).index("progress")

Rule = Callable[[np.ndarray], int]


def never_stop(obs: np.ndarray) -> int:
    """The selfish (or careless) tenant: every job runs to the end of its schedule."""
    return CONTINUE


class EvalStopRule:
    """EvalStop(k) on the tenant's own jobs: stop after ``k`` consecutive declines (k <= 10)."""

    def __init__(self, k: int = 2):
        if not 1 <= k <= 10:
            raise ValueError(f"k={k!r} is invalid: must be in [1, 10] (the declines feature saturates at 10)")
        self.k = k
        self._threshold = (k - 0.5) / 10   # between (k-1)/10 and k/10: immune to float32 rounding

    def __call__(self, obs: np.ndarray) -> int:
        return STOP if obs[DECISION] > 0.5 and obs[DECLINES] > self._threshold else CONTINUE

    def __repr__(self) -> str:
        return f"EvalStopRule(k={self.k})"


def play(env: TenantsEnv, rules: Rule | Mapping[str, Rule | Any], seed: int | None = None,
         options: dict | None = None) -> dict[str, Any]:
    """Play one episode of ``env`` with a rule per tenant (or one rule for all).

    A mapping value may also be any object with ``predict(obs, deterministic=True)``
    (a stable-baselines3 model). Returns ``metrics`` (the platform's, from the
    final info), ``tenant_metrics`` and ``returns`` (per agent) and ``steps``.
    """
    obs, infos = env.reset(seed=seed, options=options)
    per_agent = rules if isinstance(rules, Mapping) else dict.fromkeys(env.possible_agents, rules)
    missing = set(env.possible_agents) - set(per_agent)
    if missing:
        raise ValueError(f"no rule for agents {sorted(missing)}")
    act = {a: _as_rule(r) for a, r in per_agent.items()}
    returns = dict.fromkeys(env.possible_agents, 0.0)
    steps = 0
    while env.agents:
        actions = {a: act[a](obs[a]) if infos[a]["action_mask"][STOP] else CONTINUE for a in env.agents}
        obs, rewards, terminations, truncations, infos = env.step(actions)
        for a, r in rewards.items():
            returns[a] += r
        steps += 1
    final = infos[env.possible_agents[0]]
    return {"metrics": final.get("metrics"), "returns": returns, "steps": steps,
            "tenant_metrics": {a: i.get("tenant_metrics") for a, i in infos.items()}}


def _as_rule(r) -> Rule:
    if hasattr(r, "predict"):
        return lambda obs: int(r.predict(obs, deterministic=True)[0])
    if not callable(r):
        raise TypeError(f"a tenant rule must be callable or have predict(), got {type(r).__name__}")
    return r
