"""EvalStopCallback across a kill and a resume: the resumed run stops at the same eval and keeps the same best
checkpoint as the uninterrupted one, from the checkpoint's own state (``restore_callback_states_from_checkpoint``)
or from ``evalstop.json``; a relaunched stopped run changes nothing; diverged scores, misaligned saves.

The toy run (tests/trainer_toy.py) evaluates and saves every 2 steps with scripted scores; with EvalStop(k=2)
the uninterrupted run stops at step 10 (scores 0.5 at step 6, then 0.45, 0.4) and keeps checkpoint-6.
"""

import json
import math
import os

import pytest

pytest.importorskip("transformers")

from transformers import TrainerCallback  # noqa: E402

from evalstop_gym.config import ConfigError  # noqa: E402
from evalstop_gym.integrations import EvalStopCallback  # noqa: E402

from trainer_toy import one_thread, toy_trainer  # noqa: E402

SCRIPT = [0.1, 0.3, 0.5, 0.45, 0.4, 0.9, 0.9, 0.9]   # evals at steps 2, 4, ..., 16


@pytest.fixture(autouse=True)
def _one_thread():
    with one_thread():
        yield


class Killed(Exception):
    pass


class KillAt(TrainerCallback):
    """Raise at ``step`` in ``event`` (after the callbacks before it in the list have run): a killed process."""

    def __init__(self, step, event):
        self.step = step
        setattr(self, event, self._kill)

    def _kill(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            raise Killed(state.global_step)


def checkpoints(out):
    return sorted(int(d.split("-")[1]) for d in os.listdir(out) if d.startswith("checkpoint-"))


def record(out):
    return json.loads((out / "evalstop.json").read_text())


def the_callback(trainer):
    """The callback the Trainer holds (restoring callback states replaces the object it was given)."""
    (cb,) = [c for c in trainer.callback_handler.callbacks if isinstance(c, EvalStopCallback)]
    return cb


def test_the_uninterrupted_run(tmp_path):
    toy_trainer(tmp_path, [EvalStopCallback(k=2)], SCRIPT, max_steps=16).train()
    r = record(tmp_path)
    assert r["stopped_at_step"] == 10 and r["best"]["step"] == 6 and checkpoints(tmp_path) == [6]


@pytest.mark.parametrize("restore_flag", [True, False])
@pytest.mark.parametrize("kill_event, kill_step, resumed_scores", [
    ("on_save", 8, SCRIPT[4:]),        # killed after checkpoint-8: the resumed run evaluates from step 10
    ("on_evaluate", 8, SCRIPT[3:]),    # killed after the eval at 8, before its checkpoint: resumes from 6
])
def test_a_killed_and_resumed_run_stops_where_the_uninterrupted_run_stops(tmp_path, restore_flag, kill_event,
                                                                          kill_step, resumed_scores):
    with pytest.raises(Killed):
        toy_trainer(tmp_path, [EvalStopCallback(k=2), KillAt(kill_step, kill_event)], SCRIPT, max_steps=16,
                    restore_callback_states_from_checkpoint=restore_flag).train()
    assert 6 in checkpoints(tmp_path)
    if restore_flag:   # the checkpoint's own state must be enough
        os.remove(tmp_path / "evalstop.json")
    resumed = toy_trainer(tmp_path, [EvalStopCallback(k=2)], resumed_scores, max_steps=16,
                          restore_callback_states_from_checkpoint=restore_flag)
    resumed.train(resume_from_checkpoint=True)
    cb = the_callback(resumed)
    # (killed before checkpoint-8 with the flag: checkpoint-6's state knew evals 2..6, so the eval at 8 the
    # resumed run repeats is new to it and judged; without the flag evalstop.json knew it: a repeat, not recounted)
    assert resumed.state.global_step == 10 and cb.stopped_at == 10
    assert [e["step"] for e in cb.evals] == [2, 4, 6, 8, 10] and [e["stop"] for e in cb.evals][-1]
    assert checkpoints(tmp_path) == [6] and resumed.state.best_model_checkpoint == str(tmp_path / "checkpoint-6")
    r = record(tmp_path)
    assert r["stopped_at_step"] == 10
    assert r["best"] == {"step": 6, "score": 0.5, "checkpoint": str(tmp_path / "checkpoint-6")}


def test_a_resumed_run_with_a_wrong_metric_fails_at_setup_listing_the_logged_keys(tmp_path):
    with pytest.raises(Killed):
        toy_trainer(tmp_path, [EvalStopCallback(k=2), KillAt(8, "on_save")], SCRIPT, max_steps=16).train()
    before = (tmp_path / "evalstop.json").read_text()
    resumed = toy_trainer(tmp_path, [EvalStopCallback(k=2, metric="rewrd", mode="max")], SCRIPT[4:], max_steps=16)
    with pytest.raises(ConfigError, match=r"metric='rewrd' is invalid: is not among the eval metrics the run logged "
                                          r"before this resume \(.*eval_loss, eval_reward, .*did you mean"):
        resumed.train(resume_from_checkpoint=True)
    # before its first step: no training, no eval, nothing written or deleted
    assert resumed.state.global_step == 8 and resumed.compute_metrics.calls == 0
    assert checkpoints(tmp_path) == [6, 8] and (tmp_path / "evalstop.json").read_text() == before


def test_a_relaunched_stopped_run_trains_nothing_and_deletes_nothing(tmp_path):
    import torch
    from transformers import GPT2LMHeadModel

    # an eval and a save at every step: stop at step 5, keep checkpoint-3; the relaunch resumes from
    # checkpoint-3, and its one step (4) would be an eval and a save step
    toy_trainer(tmp_path, [EvalStopCallback(k=2)], SCRIPT, max_steps=16, eval_steps=1).train()
    assert record(tmp_path)["stopped_at_step"] == 5 and checkpoints(tmp_path) == [3]
    before = (tmp_path / "evalstop.json").read_text()
    again = toy_trainer(tmp_path, [EvalStopCallback(k=2)], SCRIPT, max_steps=16, eval_steps=1)
    again.train(resume_from_checkpoint=True)
    assert again.compute_metrics.calls == 0       # not one eval
    assert checkpoints(tmp_path) == [3] and (tmp_path / "evalstop.json").read_text() == before
    saved = GPT2LMHeadModel.from_pretrained(tmp_path / "checkpoint-3")
    for a, b in zip(again.model.state_dict().values(), saved.state_dict().values()):
        assert torch.equal(a, b)                  # the one step the Trainer cannot skip changed no weight


@pytest.mark.parametrize("on_nonfinite, script, stop_step", [
    ("stop", [0.1, 0.3, 0.5, math.nan, 0.9, 0.9, 0.9, 0.9], 8),    # stops at the NaN, keeps checkpoint-6
    ("skip", [0.1, 0.3, 0.5, math.inf, 0.45, 0.4, 0.9, 0.9], 12),  # the inf is ignored: declines at 10, 12
])
def test_a_diverged_score_stops_or_is_skipped_and_the_best_finite_checkpoint_stays(tmp_path, on_nonfinite,
                                                                                   script, stop_step):
    trainer = toy_trainer(tmp_path, [EvalStopCallback(k=2, on_nonfinite=on_nonfinite)], script, max_steps=16)
    trainer.train()
    r = record(tmp_path)
    assert trainer.state.global_step == stop_step and r["stopped_at_step"] == stop_step
    assert r["best"] == {"step": 6, "score": 0.5, "checkpoint": str(tmp_path / "checkpoint-6")}
    assert checkpoints(tmp_path) == [6] and r["evals"][3]["score"] is None


def test_a_diverged_score_raises_when_asked_to(tmp_path):
    cb = EvalStopCallback(k=2, on_nonfinite="raise")
    with pytest.raises(ConfigError, match="score=nan"):
        toy_trainer(tmp_path, [cb], [0.1, math.nan, 0.2, 0.2], max_steps=8).train()
    assert [e["step"] for e in cb.evals] == [2]   # the rejected eval left no trace


def test_misaligned_saves_are_warned_and_the_nearest_checkpoint_named_as_such(tmp_path):
    cb = EvalStopCallback(k=2)
    with pytest.warns(UserWarning, match="eval_steps=2 is not a multiple of save_steps=4"):
        toy_trainer(tmp_path, [cb], SCRIPT, max_steps=16, save_steps=4, save_total_limit=None).train()
    best = record(tmp_path)["best"]
    # the best eval (step 6) has no checkpoint; 4 and 8 are equally near: the earlier is named
    assert best == {"step": 6, "score": 0.5, "checkpoint": None,
                    "nearest_checkpoint": str(tmp_path / "checkpoint-4")}


def test_eval_on_start_is_warned_and_its_best_named_as_having_no_checkpoint(tmp_path):
    # the initial model (0.9 at step 0) stays the best; declines at 2 (0.1) and, after 0.3, at 6 and 8: stop at 8
    with pytest.warns(UserWarning, match="eval_on_start judges the initial model"):
        toy_trainer(tmp_path, [EvalStopCallback(k=2)], [0.9, 0.1, 0.3, 0.2, 0.1, 0.5], max_steps=16,
                    eval_on_start=True).train()
    r = record(tmp_path)
    assert r["stopped_at_step"] == 8 and r["best"]["step"] == 0 and r["best"]["checkpoint"] is None
    assert r["best"]["nearest_checkpoint"] == str(tmp_path / "checkpoint-8")   # the only one rotation left


def test_a_stopper_that_cannot_fire_within_the_run_is_warned(tmp_path):
    # 8 steps, evals every 2: evals at 2, 4, 6 are judged (8 ends the run); k=3 needs 4
    with pytest.warns(UserWarning, match="needs 4 evals to stop a run; this run plans 3"):
        toy_trainer(tmp_path, [EvalStopCallback(k=3)], SCRIPT, max_steps=8, save_strategy="no").train()


def test_mode_auto_reads_the_metric_name():
    assert EvalStopCallback(metric="eval_loss").live.mode == "min"
    assert EvalStopCallback(metric="reward").live.mode == "max"
    with pytest.warns(UserWarning, match="'eval_loss' reads as a loss but mode='max'"):
        EvalStopCallback(metric="eval_loss", mode="max")
    with pytest.raises(ConfigError, match="mode='auto'.*'eval_custom'"):
        EvalStopCallback(metric="eval_custom")
