"""Hand-coded base schedulers and stoppers, by name.

Adding one is one new file in this package plus one line in a registry below.
"""

from __future__ import annotations

import inspect

from evalstop_gym.config import ConfigError
from evalstop_gym.policy import Policy, Scheduler, Stopper

from .cusum import CUSUM
from .divergence import Divergence
from .droptest import DropTest
from .evalstop import EvalStop
from .fifo import FIFO
from .lossaware import LossAware
from .lossplateau import LossPlateau
from .max_throughput import MaxThroughput
from .patience import Patience
from .sjf_est import SJFEst
from .smoothed import SmoothedDecline
from .srtf_est import SRTFEst
from .srtf_progress import SRTFProgress
from .stopat import StopAtProgress
from .tiresias import Tiresias
from .ties import DEFAULT_TIE, TIE_RULES, with_tie

SCHEDULERS: dict[str, type[Scheduler]] = {
    "fifo": FIFO,
    "sjf-est": SJFEst,
    "srtf-est": SRTFEst,
    "srtf-progress": SRTFProgress,
    "lossaware": LossAware,
    "tiresias": Tiresias,
    "max-throughput": MaxThroughput,
}

STOPPERS: dict[str, type[Stopper] | None] = {
    "none": None,
    "evalstop": EvalStop,
    "stopat": StopAtProgress,
    "lossplateau": LossPlateau,
    "patience": Patience,
    "cusum": CUSUM,
    "smoothed": SmoothedDecline,
    "droptest": DropTest,
    "divergence": Divergence,
}


def stopper_params(stopper: str) -> list[str]:
    """Names of the keyword parameters a stopper takes (besides ``base``)."""
    cls = STOPPERS[stopper]
    if cls is None:
        return []
    return [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "base")]


def make_policy(scheduler: str = "fifo", stopper: str = "none", *, tie: str = DEFAULT_TIE, **params) -> Policy:
    """Build ``stopper(scheduler)`` from registry names and the stopper's parameters.

    ``tie``: the base scheduler's tie rule, one of :data:`TIE_RULES` (default ``"running"``: running jobs
    first on equal keys; ``"arrival"``: by arrival; :mod:`evalstop_gym.baselines.ties`).
    Parameters that the chosen stopper does not take raise :class:`ConfigError`.
    """
    if scheduler not in SCHEDULERS:
        raise ConfigError("scheduler", scheduler, f"must be one of {', '.join(SCHEDULERS)}")
    if stopper not in STOPPERS:
        raise ConfigError("stopper", stopper, f"must be one of {', '.join(STOPPERS)}")
    base = with_tie(SCHEDULERS[scheduler], tie)
    allowed = stopper_params(stopper)
    for p in params:
        if p not in allowed:
            raise ConfigError(p, params[p], f"is not a parameter of stopper {stopper!r}"
                              f" (it takes: {', '.join(allowed) or 'nothing'})")
    cls = STOPPERS[stopper]
    return base if cls is None else cls(base, **params)


__all__ = ["SCHEDULERS", "STOPPERS", "TIE_RULES", "DEFAULT_TIE", "make_policy", "stopper_params", "FIFO", "SJFEst", "SRTFEst", "SRTFProgress",
           "LossAware", "Tiresias", "MaxThroughput", "EvalStop", "StopAtProgress", "LossPlateau", "Patience", "CUSUM",
           "SmoothedDecline", "DropTest", "Divergence"]
