"""Optuna: a registered stopper as a pruner.

``optuna.create_study(pruner=EvalStopPruner("evalstop", k=2))``; the objective
reports its eval score with ``trial.report(value, step)`` and asks
``trial.should_prune()``. At each ask the pruner hands the values reported since
the last ask, in step order, to one
:class:`~evalstop_gym.integrations.live.LiveStopper` per study (keyed by trial
number, so a noise-aware detector pools over the study's trials; with several
worker processes each pools over its own), and prunes once the rule stops the
trial. The study's direction sets the mode (``minimize``: a rise of the value is
a decline). Progress is ``step / n_steps`` when ``n_steps`` is given (the step
of the last report); a NaN value prunes the trial, as Optuna's own pruners do.
The trial's best checkpoint is the objective's to keep: the pruner's
``best(study, trial)`` names the step of the best value so far. Needs the
``live`` extra.
"""

from __future__ import annotations

import math

from ..config import ConfigError, check_range
from ..extras import missing_extra
from .live import Best, LiveStopper

try:
    import optuna
    from optuna.pruners import BasePruner
except ModuleNotFoundError as e:
    raise missing_extra(e, "evalstop_gym.integrations.EvalStopPruner") from None


class EvalStopPruner(BasePruner):
    """Prune a trial when the stopper ``stopper`` (a name of ``STOPPERS``, with ``params``) stops it.

    ``eval_items``: the eval set's size when the value is a proportion of items
    (0: unknown); ``n_steps``: the step of a trial's last report, for progress.
    """

    def __init__(self, stopper: str = "evalstop", *, eval_items: int = 0, n_steps: int | None = None, **params):
        check_range("eval_items", eval_items, 0, integer=True)
        if n_steps is not None:
            check_range("n_steps", n_steps, 1, integer=True)
        LiveStopper(stopper, **params)   # a bad name or parameter fails here, not at the first report
        self.stopper, self.params, self.eval_items, self.n_steps = stopper, params, eval_items, n_steps
        self._lives: dict[str, LiveStopper] = {}
        self._fed: dict[tuple[str, int], int] = {}   # (study, trial number) -> last step handed over

    def live(self, study: "optuna.Study") -> LiveStopper:
        """The live stopper of ``study`` (made at its first trial's first report)."""
        key = study.study_name
        if key not in self._lives:
            if len(study.directions) != 1:
                raise ConfigError("study", key, "must have one objective (pruning reads one reported value)")
            mode = "min" if study.direction == optuna.study.StudyDirection.MINIMIZE else "max"
            self._lives[key] = LiveStopper(self.stopper, mode=mode, **self.params)
        return self._lives[key]

    def prune(self, study: "optuna.Study", trial: "optuna.trial.FrozenTrial") -> bool:
        live = self.live(study)
        last = self._fed.get((study.study_name, trial.number))
        steps = sorted(s for s in trial.intermediate_values if last is None or s > last)
        for step in steps:
            value = trial.intermediate_values[step]
            if math.isnan(value):
                return True
            self._fed[(study.study_name, trial.number)] = step
            if live.ended(trial.number):
                break   # reports after a stop or after the last step (n_steps) change nothing
            progress = None if self.n_steps is None else min(step / self.n_steps, 1.0)
            live.update(trial.number, value, eval_items=self.eval_items, progress=progress, step=step)
        return live.stopped(trial.number)

    def best(self, study: "optuna.Study", trial) -> Best:
        """Step and value of the best report of ``trial`` (a trial or its number) handed over so far."""
        return self.live(study).best(getattr(trial, "number", trial))
