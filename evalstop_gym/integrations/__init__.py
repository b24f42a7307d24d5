"""The project's stoppers in real training loops: one rule, two drivers.

Every integration is a thin adapter from a training loop's hook to
:class:`~evalstop_gym.integrations.live.LiveStopper`, which presents a live
job's eval history as the simulator's public view and asks the registered
stopper (``evalstop_gym.baselines.STOPPERS``). Names load on first use, so
importing this package needs no optional dependency; each integration names
the extra it needs when that is missing (docs/integrations.md).

========================  =========================================  =======
name                      hook                                       extra
========================  =========================================  =======
``live_stopper``          any loop: ``update(job, score) -> bool``   (none)
``EvalStopCallback``      transformers / TRL ``TrainerCallback``      live
``CurveLogger``           ``TrainerCallback`` writing a curve log    live
``TuneStopper``           Ray Tune ``Stopper``                       ray
``EvalStopScheduler``     Ray Tune ``TrialScheduler``                ray
``EvalStopPruner``        Optuna ``BasePruner``                      live
``replay_runs``           live runs in the simulator, in live order  (none)
========================  =========================================  =======
"""

from __future__ import annotations

import importlib

_WHERE = {
    "live_stopper": "live", "LiveStopper": "live", "LiveJobView": "live", "Best": "live",
    "EvalStopCallback": "trainer", "CurveLogger": "trainer",
    "TuneStopper": "tune", "EvalStopScheduler": "tune",
    "EvalStopPruner": "pruner",
    "replay_runs": "replay", "Replay": "replay",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__():
    return sorted(set(globals()) | set(_WHERE))
