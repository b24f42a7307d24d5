"""EvalStopCallback on a plain transformers Trainer: it stops at the eval the rule names and the Trainer keeps
the best checkpoint (the eval before the declines), also under checkpoint rotation."""

import json
import os

import pytest

pytest.importorskip("transformers")

from evalstop_gym.config import ConfigError  # noqa: E402
from evalstop_gym.integrations import EvalStopCallback, live_stopper  # noqa: E402

from trainer_toy import toy_trainer  # noqa: E402

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
    cb = EvalStopCallback(metric="reward")
    with pytest.raises(ConfigError, match="metric_for_best_model"):
        toy_trainer(tmp_path / "b", [cb], SCRIPT, max_steps=4, metric_for_best_model="loss",
                    greater_is_better=False).train()
    with pytest.raises(ConfigError, match="k=0"):
        EvalStopCallback(k=0)
    with pytest.raises(ConfigError, match="params"):
        EvalStopCallback(live=live_stopper(), k=3)
