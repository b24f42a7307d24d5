"""How learned policies join the experiment suite without the core importing them.

The suite knows learned arms only through :class:`LearnedArms`, a small
protocol: describe a saved model as an :class:`~evalstop_gym.experiments.spec.Arm`,
check that the seeds are held out and that the model loads, and run the arm's specs. A provider is
registered by name, as an object or as a lazy ``"module:attribute"`` string
(as Gymnasium registers entry points), so ``import evalstop_gym.experiments``
imports neither the provider nor stable-baselines3 nor torch; the provider is
imported only when a run asks for a model. The default provider, ``sb3``, is
the stable-baselines3 layer of this project (``evalstop_gym.agents.arms``).
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping, Protocol, Sequence

from ..config import ConfigError

DEFAULT_PROVIDER = "sb3"
_PROVIDERS: dict[str, Any] = {DEFAULT_PROVIDER: "evalstop_gym.agents.arms:PROVIDER"}


class LearnedArms(Protocol):
    """What the suite needs from a layer of learned policies."""

    def arm(self, model: str) -> tuple[Any, str | None]:
        """``(Arm, own scheduler or None)`` of a saved model (reads files; no training library yet)."""

    def check_seeds(self, first_seed: int, seeds: int) -> None:
        """Raise ``ConfigError`` unless the seeds are held out from the model's training and validation."""

    def check_model(self, model: str) -> None:
        """Raise ``ConfigError`` unless the saved model loads (before any run starts)."""

    def cannot_run(self, spec: Any) -> str | None:
        """Why the arm of ``spec`` (a run spec) cannot play its workload's cluster (a model trained on nodes,
        on the flat pool), or ``None``."""

    def stopper(self, params: Mapping[str, Any], base: Any, gpus: int, cluster: Any) -> Any:
        """The saved stop-policy of an arm's ``params`` as a :class:`~evalstop_gym.policy.Stopper` over ``base``
        (a policy), answering on a cluster of ``gpus`` GPUs laid out as ``cluster``: what the bench plays in the
        model's own process, over public views (:mod:`evalstop_gym.bench.isolate`)."""

    def scheduler_actor(self, params: Mapping[str, Any], gpus: int, cluster: Any) -> Callable[[Any, Any], int]:
        """The saved learned scheduler of ``params`` on a cluster of ``gpus`` GPUs laid out as ``cluster``, as
        ``act(observation, action_masks) -> action`` (its deterministic action): what the bench asks in the
        model's own process, which holds no simulator (:mod:`evalstop_gym.bench.isolate`)."""

    def scheduler_episode(self, params: Mapping[str, Any], workload: Any, act: Callable[[Any, Any], int],
                          stop_rule: Callable[[str], Any]) -> dict[str, Any]:
        """The metrics of one episode of the learned scheduler of ``params`` on ``workload``, its env played in
        this process without its model: ``act`` (a :meth:`scheduler_actor` in another process) gives each
        action, and ``stop_rule(path)`` (a policy) answers the checkpoints of a saved stop-policy it names."""

    def run(self, specs: Sequence[Any], store: Any, limit: int | None = None,
            on_done: Callable[[], None] | None = None) -> int:
        """Run the specs in this process, add each record to ``store``; return how many ran."""


def register_provider(name: str, provider: LearnedArms | str) -> None:
    """Register (or replace) a provider: an object, or ``"module:attribute"`` imported on first use."""
    _PROVIDERS[name] = provider


def provider(name: str = DEFAULT_PROVIDER) -> LearnedArms:
    """The provider registered as ``name``, imported on first use."""
    if name not in _PROVIDERS:
        raise ConfigError("provider", name, f"must be one of {', '.join(_PROVIDERS)}")
    p = _PROVIDERS[name]
    if isinstance(p, str):
        module, attr = p.split(":")
        p = _PROVIDERS[name] = getattr(importlib.import_module(module), attr)
    return p
