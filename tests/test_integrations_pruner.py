"""EvalStopPruner in real Optuna studies: a trial is pruned at the report the rule stops, in either direction."""

import math

import pytest

optuna = pytest.importorskip("optuna")

from evalstop_gym.config import ConfigError  # noqa: E402
from evalstop_gym.integrations import EvalStopPruner  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.WARNING)

# per trial: the scores it reports at steps 1..8, and the step EvalStop(k=2) prunes it at (None: never)
SCRIPTS = [([0.1, 0.4, 0.6, 0.5, 0.45, 0.7, 0.8, 0.9], 5),
           ([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8], None),
           ([0.5, 0.4, 0.6, 0.55, 0.5, 0.45, 0.4, 0.3], 5),
           ([0.1, 0.3, 0.5, 0.6, 0.7, 0.8, 0.75, 0.7], 8)]


def study_of(pruner, sign=1.0, every=1):
    """Run one trial per script; the objective reports ``sign * score`` and asks every ``every`` reports."""
    def objective(trial):
        scores, _ = SCRIPTS[trial.number]
        for step, score in enumerate(scores, start=1):
            trial.report(sign * score, step)
            if step % every == 0 and trial.should_prune():
                raise optuna.TrialPruned()
        return sign * scores[-1]

    study = optuna.create_study(direction="maximize" if sign > 0 else "minimize", pruner=pruner)
    study.optimize(objective, n_trials=len(SCRIPTS))
    return study


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_trials_are_pruned_at_the_second_decline(sign):
    pruner = EvalStopPruner("evalstop", k=2)
    study = study_of(pruner, sign)
    for t, (scores, stop_at) in zip(study.trials, SCRIPTS):
        assert (t.state == optuna.trial.TrialState.PRUNED) == (stop_at is not None)
        assert t.last_step == (stop_at or len(scores))
        seen = scores[:t.last_step]
        assert pruner.best(study, t) == (seen.index(max(seen)), seen.index(max(seen)) + 1, sign * max(seen))


def test_reports_between_asks_are_judged_in_step_order_and_the_last_step_is_not_judged():
    # asking every 3rd report: the stop at step 5 is seen at the ask of step 6; with n_steps=8 the decline
    # at the last step (trial 4) ends the run instead of pruning it
    pruner = EvalStopPruner("evalstop", k=2, n_steps=8)
    study = study_of(pruner, every=3)
    pruned = [t.state == optuna.trial.TrialState.PRUNED for t in study.trials]
    assert pruned == [True, False, True, False]
    assert [t.last_step for t in study.trials] == [6, 8, 6, 8]
    assert pruner.live(study).view(0).evals_done == 5   # nothing handed over after the stop


def test_a_nan_report_prunes_and_bad_options_name_the_field():
    pruner = EvalStopPruner()

    def objective(trial):
        trial.report(0.5, 1)
        trial.report(math.nan, 2)
        if trial.should_prune():
            raise optuna.TrialPruned()
        return 0.5

    study = optuna.create_study(direction="maximize", pruner=pruner)
    study.optimize(objective, n_trials=1)
    assert study.trials[0].state == optuna.trial.TrialState.PRUNED
    for kwargs, field in (({"k": 0}, "k=0"), ({"n_steps": 0}, "n_steps"), ({"eval_items": -2}, "eval_items")):
        with pytest.raises(ConfigError, match=field):
            EvalStopPruner(**kwargs)
    with pytest.raises(ConfigError, match="stopper"):
        EvalStopPruner("nope")
