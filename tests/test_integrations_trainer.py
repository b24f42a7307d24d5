"""EvalStopCallback on a plain transformers Trainer: it stops at the eval the rule names and the Trainer keeps
the best checkpoint (the eval before the declines), also under checkpoint rotation."""

import json
import os

import numpy as np
import pytest

pytest.importorskip("transformers")

from evalstop_gym.config import ConfigError  # noqa: E402
from evalstop_gym.integrations import EvalStopCallback, live_stopper  # noqa: E402

from trainer_toy import one_thread, toy_trainer  # noqa: E402



@pytest.fixture(autouse=True)
def _one_thread():
    with one_thread():
        yield


# evals at steps 2, 4, ..., the best at step 6, then two declines: EvalStop(k=2) stops at step 10
SCRIPT = [0.1, 0.3, 0.5, 0.45, 0.4, 0.9, 0.9, 0.9]


def checkpoints(out):
    return sorted(int(d.split("-")[1]) for d in os.listdir(out) if d.startswith("checkpoint-"))


def test_stops_at_the_second_decline_and_keeps_the_best_checkpoint(tmp_path):
    cb = EvalStopCallback("evalstop", metric="eval_reward", k=2)
    trainer = toy_trainer(tmp_path, [cb], SCRIPT, max_steps=16)
    trainer.train()
    assert trainer.state.global_step == 10             # stopped at the 5th eval, of 8
    assert [e["stop"] for e in cb.evals] == [False, False, False, False, True]
    # save_total_limit=1: rotation kept the best (step 6) beside the newest, and the Trainer's end-of-run
    # clean-up keeps only the best
    assert checkpoints(tmp_path) == [6]
    assert trainer.state.best_model_checkpoint == str(tmp_path / "checkpoint-6")
    record = json.loads((tmp_path / "evalstop.json").read_text())
    assert record["stopped_at_step"] == 10
    assert record["best"] == {"step": 6, "score": 0.5, "checkpoint": str(tmp_path / "checkpoint-6")}
    state = json.loads((tmp_path / "checkpoint-6" / "trainer_state.json").read_text())
    assert state["global_step"] == 6


def test_without_the_callback_the_same_stop_keeps_only_the_last_checkpoint(tmp_path):
    from transformers import TrainerCallback

    class StopAt10(TrainerCallback):
        def on_evaluate(self, args, state, control, **kwargs):
            control.should_training_stop = state.global_step == 10

    trainer = toy_trainer(tmp_path, [StopAt10()], SCRIPT, max_steps=16)
    trainer.train()
    assert trainer.state.global_step == 10 and checkpoints(tmp_path) == [10]


def test_load_best_model_at_end_loads_the_checkpoint_before_the_declines(tmp_path):
    import torch

    cb = EvalStopCallback("evalstop", metric="reward", k=2)
    trainer = toy_trainer(tmp_path, [cb], SCRIPT, max_steps=16, load_best_model_at_end=True,
                          metric_for_best_model="reward", greater_is_better=True)
    trainer.train()
    assert trainer.state.global_step == 10 and cb.best_checkpoint == str(tmp_path / "checkpoint-6")
    from transformers import GPT2LMHeadModel

    saved = GPT2LMHeadModel.from_pretrained(tmp_path / "checkpoint-6")
    for a, b in zip(trainer.model.state_dict().values(), saved.state_dict().values()):
        assert torch.equal(a, b)


def test_a_rising_run_trains_to_the_end_and_its_last_eval_is_not_judged(tmp_path):
    cb = EvalStopCallback("evalstop", k=1)
    trainer = toy_trainer(tmp_path, [cb], [0.1, 0.2, 0.3, 0.1], max_steps=8)
    trainer.train()
    assert trainer.state.global_step == 8
    # the last eval declines, but it is the end of the run: recorded, not a stop
    assert [e["stop"] for e in cb.evals] == [False, False, False, False] and cb.stopped_at is None
    assert cb.best_checkpoint == str(tmp_path / "checkpoint-6")


def test_mode_min_and_a_shared_live_stopper(tmp_path):
    shared = live_stopper("evalstop", k=2, mode="min")
    cb = EvalStopCallback(metric="reward", live=shared, job="lossy")
    toy_trainer(tmp_path, [cb], [3.0, 2.0, 2.5, 2.7, 1.0], max_steps=12).train()
    assert cb.stopped_at == 8 and shared.stopped("lossy")
    assert shared.best("lossy").score == 2.0 and cb.best_checkpoint == str(tmp_path / "checkpoint-4")


def test_bad_configuration_names_the_field(tmp_path):
    cb = EvalStopCallback(metric="eval_accuracy")
    with pytest.raises(ConfigError, match="metric='eval_accuracy'.*eval_reward"):
        toy_trainer(tmp_path / "a", [cb], SCRIPT, max_steps=4).train()
    # a misspelt metric: one line at the first eval (step 2), listing the keys found, before anything is recorded
    cb = EvalStopCallback(metric="eval_rewrd", mode="max")
    trainer = toy_trainer(tmp_path / "m", [cb], SCRIPT, max_steps=8)
    with pytest.raises(ConfigError) as caught:
        trainer.train()
    message = str(caught.value)
    assert "\n" not in message and message.startswith("metric='eval_rewrd' is invalid: is not among the eval "
                                                       "metrics at step 2 (")
    assert {"eval_loss", "eval_reward", "eval_runtime", "epoch"} <= set(message.split("(")[1].split(")")[0]
                                                                       .split(", "))
    assert message.endswith("did you mean 'eval_reward'?")
    assert trainer.state.global_step == 2 and cb.evals == [] and not (tmp_path / "m" / "evalstop.json").exists()
    cb = EvalStopCallback(metric="reward")
    with pytest.raises(ConfigError, match="metric_for_best_model"):
        toy_trainer(tmp_path / "b", [cb], SCRIPT, max_steps=4, metric_for_best_model="loss",
                    greater_is_better=False).train()
    with pytest.raises(ConfigError, match="k=0"):
        EvalStopCallback(k=0)
    with pytest.raises(ConfigError, match="params"):
        EvalStopCallback(live=live_stopper(), k=3)


# -- the curve logger ------------------------------------------------------------------------------------

def test_curve_logger_writes_the_run_as_a_curve_log_the_reader_reads_back(tmp_path):
    from evalstop_gym.curvelog import read_curve_log
    from evalstop_gym.integrations import CurveLogger

    loggers = [CurveLogger(tmp_path / name, job="toy", extra={"vloss": "eval_loss"}) for name in ("l.csv", "l.jsonl")]
    trainer = toy_trainer(tmp_path / "out", [EvalStopCallback(k=2), *loggers], SCRIPT, max_steps=16,
                          save_strategy="no")
    trainer.train()
    for log in loggers:
        (run,) = read_curve_log(log.path).values()
        assert run.name == "toy" and list(run.step) == list(range(11))   # step 0, then every step to the stop
        steps, scores = run.series("eval_score")
        assert list(steps) == [2, 4, 6, 8, 10] and list(scores) == SCRIPT[:5]
        losses = {e["step"]: e["loss"] for e in trainer.state.log_history if "loss" in e}
        steps, logged = run.series("train_loss")
        assert dict(zip(steps, logged)) == pytest.approx(losses) and len(losses) == 10
        evals = {e["step"]: e["eval_loss"] for e in trainer.state.log_history if "eval_loss" in e}
        assert dict(zip(*run.series("vloss"))) == pytest.approx(evals)
        assert np.isnan(run.proxy_reward).all()


def test_a_logged_run_replays_in_the_simulator_with_the_same_stop(tmp_path):
    # the run trains to the end (no stopper), its log replays onto 8 checkpoints with no added noise, and the
    # simulator's EvalStop(k=2) stops every replayed job at the 5th eval: where the callback stopped the run live
    from evalstop_gym.baselines import make_policy
    from evalstop_gym.config import WorkloadConfig
    from evalstop_gym.curvelog import apply_curve_log, read_curve_log
    from evalstop_gym.integrations import CurveLogger
    from evalstop_gym.policy import drive
    from evalstop_gym.simulator import Simulator
    from evalstop_gym.workload import generate

    log = tmp_path / "full.csv"
    toy_trainer(tmp_path / "out", [CurveLogger(log, job="toy")], SCRIPT, max_steps=16, save_strategy="no").train()
    w = apply_curve_log(generate(WorkloadConfig(jobs=12, seed=0, noise=0.0, evals_per_job=8)),
                        read_curve_log(log), job_types=("lora", "dpo", "rlhf"))
    np.testing.assert_array_equal(w.observed, np.tile(SCRIPT, (w.n, 1)))
    outcome = drive(Simulator(w), make_policy("fifo", "evalstop", k=2))
    assert outcome.stopped.all() and (outcome.evals_seen == 5).all()
    assert (outcome.delivered_ckpt == 2).all()   # the eval at step 6: the checkpoint the callback keeps


def test_curve_logger_bad_options(tmp_path):
    from evalstop_gym.integrations import CurveLogger

    with pytest.raises(ConfigError, match="path"):
        CurveLogger(tmp_path / "log.txt")
    with pytest.raises(ConfigError, match="extra"):
        CurveLogger(tmp_path / "log.csv", extra={"train_loss": "loss"})
    (tmp_path / "other.csv").write_text("job,step,eval_score\n")
    with pytest.raises(ConfigError, match="holds columns"):
        toy_trainer(tmp_path / "o", [CurveLogger(tmp_path / "other.csv", extra={"kl": "kl"})], SCRIPT,
                    max_steps=2).train()
