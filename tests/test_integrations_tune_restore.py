"""Ray Tune: the scheduler's state survives ``Tuner.restore``, a restarted trial's repeated iteration counts
once, a diverged trial stops alone, and a checkpoint without the metric is warned about."""

import json
import math
import os
import tempfile

import pytest

ray = pytest.importorskip("ray")

from ray import tune  # noqa: E402
from ray.tune.schedulers import TrialScheduler  # noqa: E402

from evalstop_gym.integrations import EvalStopScheduler, TuneStopper  # noqa: E402

# patience 3: best 0.6 at step 2, no new best at 3, 4, 5 -> stop at step 5. A stopper that forgot steps 1..4
# would see 0.4, then a new best 0.58 at 6, and never stop within 8 steps; one that counted a repeated step 4
# twice would stop at that repeat.
SCRIPT = [0.1, 0.6, 0.5, 0.55, 0.4, 0.58, 0.3, 0.2]


def trial(trial_id):
    return type("Trial", (), {"trial_id": trial_id})()


def test_scheduler_save_and_restore_carry_every_decision(tmp_path):
    a = EvalStopScheduler("eval_reward", stopper="patience", patience=3, time_attr="step")
    said = [a.on_trial_result(None, trial("t"), {"eval_reward": x, "step": i + 1}) for i, x in enumerate(SCRIPT[:4])]
    assert said == [TrialScheduler.CONTINUE] * 4
    a.save(str(tmp_path / "s.json"))
    b = EvalStopScheduler("eval_reward", stopper="patience", patience=3, time_attr="step")
    b.restore(str(tmp_path / "s.json"))
    # the restarted trial repeats step 4, then reports step 5: the third eval without a new best
    assert b.on_trial_result(None, trial("t"), {"eval_reward": SCRIPT[3], "step": 4}) == TrialScheduler.CONTINUE
    assert b.on_trial_result(None, trial("t"), {"eval_reward": SCRIPT[4], "step": 5}) == TrialScheduler.STOP
    fresh = EvalStopScheduler("eval_reward", stopper="patience", patience=3, time_attr="step")
    assert [fresh.on_trial_result(None, trial("t"), {"eval_reward": x, "step": i + 4})
            for i, x in enumerate(SCRIPT[3:])] == [TrialScheduler.CONTINUE] * 5
    with pytest.raises(Exception, match="metric"):
        EvalStopScheduler("eval_loss", stopper="patience", patience=3).restore(str(tmp_path / "s.json"))


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_a_diverged_trial_stops_and_the_others_go_on(bad):
    s = TuneStopper("eval_reward", k=2)
    assert not s("a", {"eval_reward": 0.5}) and not s("b", {"eval_reward": 0.5})
    assert s("a", {"eval_reward": bad}) and not s("b", {"eval_reward": 0.6})
    assert s.live.best("a").score == 0.5
    sched = EvalStopScheduler("eval_reward", k=2)
    assert sched.on_trial_result(None, trial("a"), {"eval_reward": bad}) == TrialScheduler.STOP


def test_a_raise_policy_raises_and_records_nothing():
    s = TuneStopper("eval_reward", k=2, on_nonfinite="raise")
    s("a", {"eval_reward": 0.5, "training_iteration": 1})
    with pytest.raises(Exception, match="not finite"):
        s("a", {"eval_reward": math.nan, "training_iteration": 2})
    assert s.live.state()["evals"] == [["a", 0.0, 0.5, 0, None, None, None, 1.0, "rlhf"]]


def test_mode_auto_reads_the_metric_and_a_checkpoint_without_it_is_warned():
    s = TuneStopper("eval_loss", k=1)
    assert s.live.mode == "min"
    assert not s("a", {"eval_loss": 2.0}) and s("a", {"eval_loss": 2.5})
    with pytest.warns(UserWarning, match="checkpoint without 'eval_loss'"):
        s("b", {"checkpoint_dir_name": "checkpoint_000001", "training_iteration": 1})


def crashing_trainable(marker: str):
    """Reports SCRIPT one step at a time with a checkpoint at steps 3 and 6; the first attempt dies before
    step 5 (after a checkpoint at 3 and a result at 4), so the restored trial resumes at 4 and repeats it."""

    def train(config):
        start = 0
        ckpt = tune.get_checkpoint()
        if ckpt is not None:
            with ckpt.as_directory() as d:
                start = json.load(open(os.path.join(d, "step.json")))["step"]
        for step in range(start + 1, len(SCRIPT) + 1):
            if step == 5 and not os.path.exists(marker):
                open(marker, "w").close()
                raise RuntimeError("killed")
            if step % 3 == 0:
                with tempfile.TemporaryDirectory() as d:
                    json.dump({"step": step}, open(os.path.join(d, "step.json"), "w"))
                    tune.report({"eval_reward": SCRIPT[step - 1], "step": step},
                                checkpoint=tune.Checkpoint.from_directory(d))
            else:
                tune.report({"eval_reward": SCRIPT[step - 1], "step": step})

    return train


def crash_and_restore(tmp_path, scheduler=None, stop=None):
    """The metrics of the one trial of an experiment whose first attempt dies at step 5, restored with
    ``Tuner.restore`` (``scheduler``, ``stop``: factories, called once as a user's script would)."""
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        marker = str(tmp_path / "killed")
        trainable = tune.with_resources(crashing_trainable(marker), {"cpu": 1})
        tuner = tune.Tuner(trainable,
                           tune_config=tune.TuneConfig(scheduler=scheduler and scheduler(), metric="eval_reward",
                                                       mode="max"),
                           run_config=tune.RunConfig(storage_path=str(tmp_path), name="exp", verbose=0,
                                                     stop=stop and stop()))
        first = tuner.fit()
        assert first.errors and first[0].metrics["step"] == 4
        restored = tune.Tuner.restore(str(tmp_path / "exp"), trainable, resume_errored=True)
        (result,) = restored.fit()
        assert not result.error
        return result.metrics
    finally:
        ray.shutdown()


@pytest.mark.slow   # Ray's start-up and two fits: about 40 s on 2 loaded cores
def test_tuner_restore_resumes_the_scheduler(tmp_path):
    metrics = crash_and_restore(tmp_path, scheduler=lambda: EvalStopScheduler(stopper="patience", patience=3,
                                                                               time_attr="step"))
    assert metrics["step"] == 5   # stopped at 5, as the uninterrupted run


@pytest.mark.slow   # as above
def test_tuner_restore_resumes_the_stopper(tmp_path):
    # Tune keeps the stopper in its experiment state (the controller's state, pickled) and takes it back on
    # restore; a stopper that restarted empty would train to step 8
    metrics = crash_and_restore(tmp_path, stop=lambda: TuneStopper("eval_reward", stopper="patience", patience=3))
    assert metrics["step"] == 5 and metrics["training_iteration"] == 5


def test_the_shared_options_reach_the_tune_stoppers():
    s = TuneStopper("eval_reward", k=1, min_delta=0.05, warmup=1)
    assert not s("t", {"eval_reward": 0.5}) and not s("t", {"eval_reward": 0.47})   # warm-up, then 0.03: no decline
    assert s("t", {"eval_reward": 0.4})
    sched = EvalStopScheduler("eval_reward", k=1, warmup=2)
    assert [sched.on_trial_result(None, trial("t"), {"eval_reward": x}) for x in (0.5, 0.4, 0.3)] == \
        [TrialScheduler.CONTINUE, TrialScheduler.CONTINUE, TrialScheduler.STOP]


def test_a_stopper_that_cannot_fire_within_max_t_is_warned():
    with pytest.warns(UserWarning, match="needs 4 evals to stop a run; this run plans 3"):
        TuneStopper("eval_reward", k=3, max_t=4)
