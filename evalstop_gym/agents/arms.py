"""The stable-baselines3 layer as the experiment suite's provider of learned arms.

Registered by name in :mod:`evalstop_gym.experiments.learned` (``"sb3"``); the
suite imports this module only when ``reproduce --model`` asks for a model, and
this module imports torch only when an arm runs.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence


class SB3Arms:
    """:class:`evalstop_gym.experiments.learned.LearnedArms` over models saved by ``evalstop-gym train``."""

    def arm(self, model: str) -> tuple[Any, str | None]:
        from .saved import learned_arm

        return learned_arm(model)

    def check_seeds(self, first_seed: int, seeds: int) -> None:
        from .seeds import check_test_seeds

        check_test_seeds(first_seed, seeds)

    def check_model(self, model: str) -> None:
        from .policy import LearnedPolicy

        LearnedPolicy.load(model)

    def cannot_run(self, spec: Any) -> str | None:
        from evalstop_gym.workload import generate

        from .evaluate import cannot_run

        return cannot_run(dict(spec.params), generate(spec.config))

    def stopper(self, params, base, gpus: int, cluster) -> Any:
        from .evaluate import loaded
        from .policy import LearnedStop

        return LearnedStop(base, loaded(params["model"]), gpus=gpus, cluster=cluster)

    def scheduler_actor(self, params, gpus: int, cluster) -> Callable[[Any, Any], int]:
        from .evaluate import loaded
        from .policy import on_cluster

        env, pol = on_cluster(loaded(params["model"]), gpus, cluster)
        env.close()   # built for its spaces only: never reset, so it holds no workload
        return pol.decide

    def scheduler_episode(self, params, workload, act, stop_rule) -> dict[str, Any]:
        from .policy import metrics_deciding_elsewhere

        return metrics_deciding_elsewhere(params["model"], workload, act, lambda path, _env: stop_rule(path))

    def run(self, specs: Sequence[Any], store: Any, limit: int | None = None,
            on_done: Callable[[], None] | None = None) -> int:
        from .evaluate import run_learned_specs

        return run_learned_specs(specs, store, limit=limit, on_done=on_done)


PROVIDER = SB3Arms()
