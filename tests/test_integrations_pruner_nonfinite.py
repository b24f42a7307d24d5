"""EvalStopPruner with diverged reports (NaN, inf) under each ``on_nonfinite`` policy, and a study name reused
in one process."""

import math

import pytest

optuna = pytest.importorskip("optuna")

from evalstop_gym.config import ConfigError  # noqa: E402
from evalstop_gym.integrations import EvalStopPruner  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.WARNING)


def run(pruner, reports, name=None, direction="maximize"):
    """One trial reporting ``reports`` at steps 1, 2, ..., asking after each; returns the study."""
    def objective(trial):
        for step, value in enumerate(reports, start=1):
            trial.report(value, step)
            if trial.should_prune():
                raise optuna.TrialPruned()
        return reports[-1]

    study = optuna.create_study(direction=direction, pruner=pruner, study_name=name)
    study.optimize(objective, n_trials=1)
    return study


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_diverged_report_prunes_the_trial_and_keeps_its_best_finite_report(bad):
    pruner = EvalStopPruner("evalstop", k=2)
    study = run(pruner, [0.3, 0.5, bad, 0.9, 0.9])     # inf used to crash study.optimize
    t = study.trials[0]
    assert t.state == optuna.trial.TrialState.PRUNED and t.last_step == 3
    assert pruner.best(study, t) == (1, 2, 0.5)


def test_skip_ignores_the_diverged_report():
    pruner = EvalStopPruner("evalstop", k=2, on_nonfinite="skip")
    # 0.5, then NaN (ignored), 0.4 and 0.3: the second decline is at step 5
    study = run(pruner, [0.3, 0.5, math.nan, 0.4, 0.3, 0.9])
    assert study.trials[0].state == optuna.trial.TrialState.PRUNED and study.trials[0].last_step == 5
    assert list(pruner.live(study).view(0).eval_scores) == [0.3, 0.5, 0.4, 0.3]


def test_raise_fails_the_trial_and_records_nothing():
    pruner = EvalStopPruner("evalstop", k=2, on_nonfinite="raise")
    with pytest.raises(ConfigError, match="score=inf is invalid: is not finite"):
        run(pruner, [0.3, math.inf])
    # the report before it is the only one recorded
    (study_live,) = [entry[2] for entry in pruner._lives.values()]
    assert [e[2] for e in study_live.state()["evals"]] == [0.3]


def test_a_reused_study_name_starts_afresh():
    pruner = EvalStopPruner("evalstop", k=2)
    first = run(pruner, [0.5, 0.4, 0.3, 0.2], name="sweep")
    assert first.trials[0].state == optuna.trial.TrialState.PRUNED and first.trials[0].last_step == 3
    # a new in-memory study of the same name: its trial 0 is not the first study's stopped trial 0
    second = run(pruner, [0.1, 0.2, 0.3, 0.4], name="sweep")
    assert second.trials[0].state == optuna.trial.TrialState.COMPLETE
    assert pruner.best(second, 0) == (3, 4, 0.4)


def test_mode_follows_the_study_direction():
    pruner = EvalStopPruner("evalstop", k=2)
    study = run(pruner, [3.0, 2.0, 2.5, 2.7, 1.0], direction="minimize")
    assert study.trials[0].state == optuna.trial.TrialState.PRUNED and study.trials[0].last_step == 4
    assert pruner.best(study, 0).score == 2.0
