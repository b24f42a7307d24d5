"""Ray Tune: TuneStopper and EvalStopScheduler end each trial of a sweep at the eval the rule names, on a local
Ray of 2 CPUs with function trainables reporting scripted scores; Tune keeps each trial's best checkpoint."""

import json
import os
import tempfile

import pytest

ray = pytest.importorskip("ray")

from ray import tune  # noqa: E402

from evalstop_gym.config import ConfigError  # noqa: E402
from evalstop_gym.integrations import EvalStopScheduler, TuneStopper  # noqa: E402

# per trial: the scripted eval scores, and where EvalStop(k=2) stops it (1-based iteration; None: never)
SCRIPTS = {
    "peak": ([0.1, 0.4, 0.6, 0.5, 0.45, 0.7, 0.8, 0.9], 5),   # best at iteration 3, declines at 4 and 5
    "rise": ([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8], None),
    "dip": ([0.5, 0.4, 0.6, 0.55, 0.5, 0.45, 0.4, 0.3], 5),    # best at iteration 3
    "late": ([0.1, 0.3, 0.5, 0.6, 0.7, 0.8, 0.75, 0.7], 8),    # the 2nd decline is the last eval: a stop too
}


def scripted_trainable():
    """A function trainable reporting ``config["scores"]`` one per iteration, each with a checkpoint naming
    its iteration (made here: a function local to a test is sent to Ray's workers by value)."""

    def scripted(config):
        for i, score in enumerate(config["scores"]):
            with tempfile.TemporaryDirectory() as d:
                with open(os.path.join(d, "eval.json"), "w") as f:
                    json.dump({"iteration": i + 1, "score": score}, f)
                tune.report({"eval_reward": score}, checkpoint=tune.Checkpoint.from_directory(d))

    return scripted


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield
    ray.shutdown()


def run(tmp_path, **kwargs):
    tuner = tune.Tuner(
        tune.with_resources(scripted_trainable(), {"cpu": 1}),
        param_space={"scores": tune.grid_search([s for s, _ in SCRIPTS.values()])},
        tune_config=tune.TuneConfig(**kwargs.pop("tune_config", {})),
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0, **kwargs,
                                  checkpoint_config=tune.CheckpointConfig(
                                      num_to_keep=1, checkpoint_score_attribute="eval_reward",
                                      checkpoint_score_order="max")))
    return tuner.fit()


def check(results):
    assert len(results) == len(SCRIPTS) and not results.errors
    by_script = {tuple(r.config["scores"]): r for r in results}
    for scores, stop_at in SCRIPTS.values():
        r = by_script[tuple(scores)]
        assert r.metrics["training_iteration"] == (stop_at or len(scores))
        # the one checkpoint Tune kept is the best eval reported before the stop (first of equal bests)
        (ckpt, metrics), = r.best_checkpoints
        seen = scores[:stop_at or len(scores)]
        with ckpt.as_directory() as d:
            kept = json.load(open(os.path.join(d, "eval.json")))
        assert kept == {"iteration": seen.index(max(seen)) + 1, "score": max(seen)}


@pytest.mark.slow   # about 30 s here on 2 loaded cores, plus Ray's start-up (about 20 s) for the first
def test_tune_stopper_ends_each_trial_at_its_stop(local_ray, tmp_path):
    stopper = TuneStopper("eval_reward", stopper="evalstop", k=2)
    check(run(tmp_path, stop=stopper))
    assert len(stopper.live.jobs) == len(SCRIPTS)   # one live stopper for the whole sweep


@pytest.mark.slow   # about 30 s here (Ray started by the test before)
def test_scheduler_stops_trials_and_takes_metric_and_mode_from_the_tune_config(local_ray, tmp_path):
    scheduler = EvalStopScheduler(stopper="evalstop", k=2)
    check(run(tmp_path, tune_config={"scheduler": scheduler, "metric": "eval_reward", "mode": "max"}))
    assert sum(scheduler.live.stopped(t) for t in scheduler.live.jobs) == 3


def test_scheduler_decisions_without_ray_running():
    from ray.tune.schedulers import TrialScheduler

    scheduler = EvalStopScheduler(stopper="evalstop", k=2)
    assert scheduler.set_search_properties("eval_reward", "max")
    assert not scheduler.set_search_properties("eval_loss", "min")   # already set: Tune's rule for conflicts
    trials = {name: type("Trial", (), {"trial_id": name})() for name in SCRIPTS}
    for name, (scores, stop_at) in SCRIPTS.items():
        said = [scheduler.on_trial_result(None, trials[name], {"eval_reward": x}) for x in scores]
        first = said.index(TrialScheduler.STOP) + 1 if TrialScheduler.STOP in said else None
        assert first == stop_at and set(said[:(stop_at or 8) - 1]) <= {TrialScheduler.CONTINUE}


def test_results_without_the_metric_are_not_evals_and_progress_ends_a_run():
    s = TuneStopper("eval_reward", k=1, max_t=4)
    assert [s("t", r) for r in ({"loss": 1.0}, {"eval_reward": 0.5, "training_iteration": 1},
                                {"training_iteration": 2}, {"eval_reward": 0.6, "training_iteration": 3},
                                {"eval_reward": 0.4, "training_iteration": 4})] == [False] * 5
    # iteration 4 of max_t=4 ends the run: its decline is recorded, not judged, and later results change nothing
    assert s("t", {"eval_reward": 0.1, "training_iteration": 5}) is False and not s.stop_all()
    assert s.live.best("t") == (1, 3.0, 0.6)


def test_bad_tune_options_name_the_field():
    with pytest.raises(ConfigError, match="mode"):
        TuneStopper("eval_reward", mode="up")
    with pytest.raises(ConfigError, match="k=0"):
        EvalStopScheduler("eval_reward", k=0)
    with pytest.raises(ConfigError, match="max_t"):
        TuneStopper("eval_reward", max_t=0)
    with pytest.raises(ConfigError, match="metric"):
        EvalStopScheduler().on_trial_result(None, type("T", (), {"trial_id": "x"})(), {"eval_reward": 1.0})
