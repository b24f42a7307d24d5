"""Optuna: a registered stopper as a pruner.

``optuna.create_study(pruner=EvalStopPruner("evalstop", k=2))``; the objective
reports its eval score with ``trial.report(value, step)`` and asks
``trial.should_prune()``. At each ask the pruner hands the values reported
after the last one it took, in step order, to one
:class:`~evalstop_gym.integrations.live.LiveStopper` per study (keyed by trial
number, so a noise-aware detector pools over the study's trials; with several
worker processes each pools over its own), and prunes once the rule stops the
trial. The study's direction sets the mode (``minimize``: a rise of the value is
a decline). Progress is ``step / n_steps`` when ``n_steps`` is given (the step
of the last report). The stoppers' ``warmup`` plays the part of Optuna's
``n_warmup_steps`` (counted in reports).

A NaN or infinite value follows ``on_nonfinite``
(:data:`~evalstop_gym.integrations.live.NONFINITE`, default ``"stop"``: the
trial is pruned and its best finite report stays its best; ``"skip"`` ignores
the report, as Optuna's ``MedianPruner`` and ``PatientPruner`` do with a NaN;
``"raise"`` fails the trial). The trial's best checkpoint is the objective's to
keep: the pruner's ``best(study, trial)`` names the step of the best value so
far.

A study is known by its storage and id, not only its name: a new study that
reuses a name in the same process starts afresh. A pruner in a new process (an
RDB study resumed) rebuilds each trial's history from the reports stored in the
study at its first ask. Needs the ``live`` extra.
"""

from __future__ import annotations

import weakref

from ..config import ConfigError, check_range
from ..extras import missing_extra
from .live import DEFAULT_NONFINITE, Best, LiveStopper

try:
    import optuna
    from optuna.pruners import BasePruner
except ModuleNotFoundError as e:
    raise missing_extra(e, "evalstop_gym.integrations.EvalStopPruner") from None


class EvalStopPruner(BasePruner):
    """Prune a trial when the stopper ``stopper`` (a name of ``STOPPERS``, with ``params``) stops it.

    ``eval_items``: the eval set's size when the value is a proportion of items
    (0: unknown); ``n_steps``: the step of a trial's last report, for progress;
    ``on_nonfinite``: what a NaN or infinite report does (module docstring).
    """

    def __init__(self, stopper: str = "evalstop", *, eval_items: int = 0, n_steps: int | None = None,
                 on_nonfinite: str = DEFAULT_NONFINITE, **params):
        check_range("eval_items", eval_items, 0, integer=True)
        if n_steps is not None:
            check_range("n_steps", n_steps, 1, integer=True)
        params["on_nonfinite"] = on_nonfinite
        LiveStopper(stopper, **params)   # a bad name or parameter fails here, not at the first report
        self.stopper, self.params, self.eval_items, self.n_steps = stopper, params, eval_items, n_steps
        # study name -> (its storage, its id, its live stopper): a reused name with another storage or id is new
        self._lives: dict[str, tuple[weakref.ref, int, LiveStopper]] = {}

    def live(self, study: "optuna.Study") -> LiveStopper:
        """The live stopper of ``study`` (made at its first trial's first report)."""
        name = study.study_name
        known = self._lives.get(name)
        if known is not None and known[0]() is study._storage and known[1] == study._study_id:
            return known[2]
        if len(study.directions) != 1:
            raise ConfigError("study", name, "must have one objective (pruning reads one reported value)")
        mode = "min" if study.direction == optuna.study.StudyDirection.MINIMIZE else "max"
        live = LiveStopper(self.stopper, mode=mode, **self.params)
        self._lives[name] = (weakref.ref(study._storage), study._study_id, live)
        return live

    def prune(self, study: "optuna.Study", trial: "optuna.trial.FrozenTrial") -> bool:
        live = self.live(study)
        for step in sorted(trial.intermediate_values):
            if live.ended(trial.number):
                break   # reports after a stop or after the last step (n_steps) change nothing
            if live.repeated(trial.number, step):
                continue   # taken at an earlier ask
            progress = None if self.n_steps is None else min(step / self.n_steps, 1.0)
            live.update(trial.number, trial.intermediate_values[step], eval_items=self.eval_items,
                        progress=progress, step=step)
        return live.stopped(trial.number)

    def best(self, study: "optuna.Study", trial) -> Best:
        """Step and value of the best report of ``trial`` (a trial or its number) handed over so far."""
        return self.live(study).best(getattr(trial, "number", trial))
