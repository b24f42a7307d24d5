"""Patience(patience, min_delta): Keras-style early stopping on the observed eval score.

Rule (``keras.callbacks.EarlyStopping`` with ``mode="max"``): walk the job's
observed scores; a score counts as an improvement when it exceeds the best so
far by more than ``min_delta`` (score units), which makes it the new best and
resets the wait; any other score adds one to the wait. Stop when the wait
reaches ``patience`` evals. The tenant gets the best observed checkpoint.

How it relates to EvalStop(k): k consecutive declines leave k scores below
an earlier one, so ``patience = k`` fires whenever EvalStop(k) does, and on
more runs (the evals without a new best need not be consecutive). Defaults
``patience = 3, min_delta = 0`` are the choice of ``docs/select_detectors.py``
on validation seeds of the selection world (recorded in
``docs/detector_defaults.json``; docs/detectors.md), the best F1 among the
settings that reach its waste floor (EvalStop k=2's). It needs no noise estimate and carries
no noise scale: ``min_delta`` is in score units. Works on every job type.
``warmup`` / ``warmup_progress``: no decision on the first ``warmup`` evals nor
below that fraction of the run (:class:`~evalstop_gym.policy.Stopper`).
Source: Prechelt, "Early Stopping - But When?" (1998); Keras EarlyStopping.
"""

from evalstop_gym.config import check_range
from evalstop_gym.policy import Stopper


class Patience(Stopper):
    rule_name = "patience"

    def __init__(self, base, patience: int = 3, min_delta: float = 0.0, warmup: int = 0, warmup_progress: float = 0.0):
        super().__init__(base, warmup, warmup_progress)
        check_range("patience", patience, 1, integer=True)
        check_range("min_delta", min_delta, 0.0, 1.0)
        self.patience = patience
        self.min_delta = min_delta

    def rule(self, job, cluster):
        scores = job.eval_scores
        best, wait = scores[0], 0
        for s in scores[1:]:
            if s - self.min_delta > best:
                best, wait = s, 0
            else:
                wait += 1
        return wait >= self.patience

    def min_evals(self) -> int:
        return max(self.patience + 1, self.warmup + 1)
