"""Reading a transformers / TRL ``trainer_state.json`` as a curve log: a hand-written log_history with the
expected columns worked out by hand, bad input, and the file a real tiny TRL GRPO run wrote
(tests/data/trl_grpo_trainer_state.json) replayed through ``curves label`` and a workload."""

import json
import os

import numpy as np
import pytest

from evalstop_gym.config import JOB_TYPES, WorkloadConfig
from evalstop_gym.curvelog import CurveLogError, apply_curve_log, label_run, read_curve_log
from evalstop_gym.curvelog import read_trainer_state, state_runs
from evalstop_gym.logs.logged import read_runs
from evalstop_gym.workload import generate

DATA = os.path.join(os.path.dirname(__file__), "data", "trl_grpo_trainer_state.json")

# as a Trainer writes it: an eval entry and a training entry at the same step, then the summary
HISTORY = [
    {"eval_score": 0.5, "eval_gold": 0.55, "eval_kl": 0.0, "eval_items": 30, "step": 0},
    {"eval_score": 0.6, "eval_gold": 0.62, "eval_kl": 0.4, "eval_items": 30, "step": 5},
    {"loss": 0.25, "reward": 0.8, "kl": 0.3, "grad_norm": 1.5, "epoch": 0.5, "step": 5},
    {"loss": 0.125, "reward": 1.1, "kl": 0.6, "grad_norm": 1.0, "epoch": 1.0, "step": 10},
    {"eval_score": 0.4, "eval_gold": 0.45, "eval_kl": 0.9, "eval_items": 30, "step": 10},
    {"train_runtime": 3.0, "train_loss": 0.2, "epoch": 1.0, "step": 10},
]


def write_state(tmp_path, history, folder="my-run"):
    d = tmp_path / folder
    d.mkdir(parents=True)
    path = d / "trainer_state.json"
    path.write_text(json.dumps({"global_step": 10, "log_history": history}))
    return path


def test_hand_written_log_history(tmp_path):
    runs = read_runs(write_state(tmp_path, HISTORY))
    assert list(runs) == ["my-run"]   # named by its folder
    run = runs["my-run"]
    assert run.step.tolist() == [0, 5, 10]
    assert run.eval_score.tolist() == [0.5, 0.6, 0.4]
    assert np.isnan(run.train_loss[0]) and run.train_loss[1:].tolist() == [0.25, 0.125]
    assert np.isnan(run.proxy_reward[0]) and run.proxy_reward[1:].tolist() == [0.8, 1.1]
    assert run.extra["gold"].tolist() == [0.55, 0.62, 0.45]
    assert run.extra["kl"].tolist() == [0.0, 0.4, 0.9]       # the eval's kl, before the trainer's
    assert run.extra["eval_items"].tolist() == [30, 30, 30]
    assert set(run.extra) == {"gold", "kl", "eval_items"}
    assert (run.metric, run.mode) == ("eval_score", "max")
    # gold by hand: start 0.55, peak 0.62 at the middle, last 0.45: drop 0.17 >= max(0.25 * 0.07, 0.03), while
    # the proxy rises from 0.8 to 1.1 (3 checkpoints: too few to estimate either curve's noise)
    lab = label_run(run, evals=2)
    assert lab.hacking and lab.peak_progress == 0.5 and lab.drop == pytest.approx(0.17)


def test_checkpoint_folder_takes_the_run_folder_name_and_dpo_margins_are_the_proxy(tmp_path):
    history = [{"eval_reward": 0.1, "step": 0}, {"loss": 0.7, "rewards/margins": 0.05, "step": 4},
               {"eval_reward": 0.3, "step": 4}]
    runs = read_runs(write_state(tmp_path, history, "dpo-run/checkpoint-4"))
    assert list(runs) == ["dpo-run"]
    run = runs["dpo-run"]
    assert run.eval_score.tolist() == [0.1, 0.3]          # the only eval metric, higher is better by its name
    assert (run.metric, run.mode) == ("eval_reward", "max")
    assert run.proxy_reward[1] == 0.05
    with pytest.raises(CurveLogError, match="0 eval scores"):   # the project's own state reader guesses nothing
        read_trainer_state(write_state(tmp_path, history, "again"))


@pytest.mark.parametrize("content, problem", [
    ("{", "not valid JSON"),
    ('{"global_step": 3}', "no log_history"),
    ('{"log_history": [{"loss": 1.0}]}', "not an object with a numeric 'step'"),
    ('{"log_history": [{"loss": 1.0, "step": 1}]}', "no eval rows; keys logged: loss"),   # no eval at all
])
def test_bad_trainer_state_names_the_problem(tmp_path, content, problem):
    path = tmp_path / "trainer_state.json"
    path.write_text(content)
    with pytest.raises(CurveLogError, match=problem):
        read_runs(path)


def test_real_trl_run_replays_in_a_workload():
    runs = read_curve_log(DATA)
    (name, run), = runs.items()
    assert name == "trl_grpo"   # named by the file: trl_grpo_trainer_state.json
    with open(DATA) as f:
        history = json.load(f)["log_history"]
    evals = [e for e in history if "eval_score" in e]
    assert run.series("eval_score")[1].tolist() == [e["eval_score"] for e in evals]
    assert run.extra["gold"][np.isfinite(run.extra["gold"])].tolist() == [e["eval_gold"] for e in evals]
    trained = [e for e in history if "loss" in e]
    assert run.series("train_loss")[1].tolist() == [e["loss"] for e in trained]
    assert run.series("proxy_reward")[1].tolist() == [e["reward"] for e in trained]
    assert state_runs({"log_history": history}, name)[name].step.tolist() == run.step.tolist()
    w = apply_curve_log(generate(WorkloadConfig(jobs=20, seed=0)), runs)
    rlhf = np.flatnonzero(w.job_type == JOB_TYPES.index("rlhf"))
    assert rlhf.size > 0
    # every RLHF job replays this one run: its true score is the run's gold on the job's checkpoints
    x = np.arange(1, w.evals_per_job + 1) / w.evals_per_job
    steps, gold = run.series("gold")
    expected = np.interp(run.step[0] + x * (run.step[-1] - run.step[0]), steps, gold)
    for j in rlhf:
        np.testing.assert_allclose(w.curves.gold[j], expected)
