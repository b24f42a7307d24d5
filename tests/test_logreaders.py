"""One reader per log format (evalstop_gym.logs), on fixtures written by hand from each format's documentation
(tests/data/logs), and the metric / direction each run is judged on. Expected values are read off the fixtures."""

import json
import os

import numpy as np
import pytest

from evalstop_gym.config import ConfigError
from evalstop_gym.logs import LogError, read_logs
from evalstop_gym.logs.metric import choose

DATA = os.path.join(os.path.dirname(__file__), "data", "logs")


def one(path):
    runs, refused = read_logs([os.path.join(DATA, path)])
    assert not refused, refused
    (run,) = runs
    return run


# -- trainer_state.json ----------------------------------------------------------------------------

def test_an_output_folder_is_one_run_read_from_its_latest_state():
    run = one("whisper-small-hi")
    assert run.name == "whisper-small-hi" and run.source.endswith("checkpoint-4000/trainer_state.json")
    assert run.series["eval_wer"][0].tolist() == [1000, 2000, 3000, 4000]
    assert run.series["eval_wer"][1].tolist() == [40.25, 35.5, 33.0, 34.75]
    assert "eval_runtime" not in run.series and "epoch" not in run.series   # timing and epoch are not metrics
    assert run.series["loss"][0].tolist() == [500, 1000, 1500, 2000, 2500, 3000, 3500, 4000]
    assert run.max_steps == 5000 and "1 earlier not counted" in run.notes[0]


def test_the_runs_own_metric_is_the_eval_key_worth_best_metric_at_the_best_checkpoint():
    # best_metric 33.0 at checkpoint-3000 (a folder save_total_limit removed): eval_wer is 33.0 there,
    # eval_loss is 0.85; 33.0 is eval_wer's minimum, so lower is better
    run = one("whisper-small-hi")
    assert (run.own_metric, run.own_mode) == ("eval_wer", "min")
    c = choose(run)
    assert (c.metric, c.mode, c.metric_from, c.mode_from) == ("eval_wer", "min", "the run's own (best_metric)",
                                                              "the run's own (best_metric)")


def test_a_classifier_selected_on_macro_f1_is_judged_on_it_not_on_accuracy():
    # best_model_checkpoint ".\\results\\checkpoint-300" (Windows); accuracy peaks at step 100, macro-F1 at 300
    run = one("sentiment")
    assert run.name == "sentiment/results"
    c = choose(run)
    assert (c.metric, c.mode) == ("eval_macro_f1", "max")
    assert choose(run, "accuracy").metric == "eval_accuracy"   # metric_for_best_model's form, without eval_


def test_dpo_state_without_best_metric_takes_the_eval_loss_and_names_the_direction():
    run = one("dpo-zephyr")
    assert "eval_rewards/accuracies" in run.evals and "rewards/margins" in run.series
    assert "rewards/margins" not in run.evals                           # a training-side value
    c = choose(run)
    assert (c.metric, c.mode, c.mode_from) == ("eval_loss", "min", "the name rule")
    c = choose(run, "eval_rewards/accuracies")                          # slashes are part of a name
    assert (c.metric, c.mode, c.note) == ("eval_rewards/accuracies", "max", None)
    assert run.series["eval_rewards/accuracies"][1].tolist() == pytest.approx([0.53, 0.60, 0.64, 0.63])


def test_grpo_state_has_no_eval_rows_a_training_key_is_allowed_with_a_note():
    run = one("grpo-qwen")
    assert run.evals == ()
    with pytest.raises(LogError, match=r"no eval rows; keys logged: completion_length, grad_norm, kl, .*--metric"):
        choose(run)
    c = choose(run, "reward")
    assert (c.metric, c.mode) == ("reward", "max") and c.note == "reward is a training-side value, not an eval"


# -- one-line refusals -----------------------------------------------------------------------------

@pytest.mark.parametrize("path, problem", [
    ("lfs-run", "a Git LFS pointer, not the log: run `git lfs pull`"),
    ("grpo-qwen", "no eval rows; keys logged:"),
    ("one-eval", "1 eval of eval_loss; at least 2 are needed"),
])
def test_each_refusal_is_one_line_naming_the_file_and_why(path, problem):
    runs, refused = read_logs([os.path.join(DATA, path)])
    errors = list(refused)
    for r in runs:
        with pytest.raises(LogError) as e:
            choose(r)
        errors.append(e.value)
    (err,) = errors
    text = str(err)
    assert problem in text and "trainer_state.json" in text and "\n" not in text


def test_a_metric_not_found_lists_the_eval_metrics_and_other_keys():
    with pytest.raises(LogError, match=r"metric 'bleu' not found; eval metrics: eval_loss, eval_wer; other keys: "
                                       r"grad_norm, learning_rate, loss"):
        choose(one("whisper-small-hi"), "bleu")


def test_a_name_that_says_no_direction_asks_for_mode(tmp_path):
    (tmp_path / "m.csv").write_text("step,val_foo\n1,0.2\n2,0.3\n")
    (run,), _ = read_logs([str(tmp_path / "m.csv")])
    with pytest.raises(LogError, match="cannot tell from its name which way val_foo improves: give --mode"):
        choose(run)
    assert choose(run, mode="max").mode == "max"
    with pytest.raises(ConfigError, match="mode"):
        choose(run, mode="up")


def test_a_missing_path_is_an_error_not_a_refusal(tmp_path):
    with pytest.raises(LogError, match="no such file"):
        read_logs([str(tmp_path / "nope")])
    with pytest.raises(LogError, match="no file matches"):
        read_logs([str(tmp_path / "*.json")])


# -- other formats ---------------------------------------------------------------------------------

def test_lightning_metrics_csv_merges_train_and_val_rows_of_one_step():
    run = one("lightning_logs")
    assert (run.name, run.fmt) == ("version_0", "lightning")
    assert run.evals == ("val_acc", "val_loss")
    assert run.series["val_loss"][0].tolist() == [99, 199, 299, 399]
    assert run.series["val_loss"][1].tolist() == [1.2, 0.9, 0.8, 0.85]
    assert run.series["train_loss_epoch"][0].tolist() == [99, 199, 299, 399]
    assert (choose(run).metric, choose(run).mode) == ("val_loss", "min")


def test_ray_tune_progress_csv_and_result_json_are_trials():
    runs, refused = read_logs([os.path.join(DATA, "ray_results")])
    assert not refused and [r.fmt for r in runs] == ["tune", "tune"]
    a, b = runs
    assert a.name == "train_fn_a1b2c_00000_0_lr=0.0010"
    assert a.evals == ("loss", "mean_accuracy")                # Tune's bookkeeping columns are not metrics
    assert a.series["mean_accuracy"][0].tolist() == [1, 2, 3, 4, 5]   # by training_iteration
    assert b.series["mean_accuracy"][1].tolist() == [0.5, 0.58, 0.55, 0.53, 0.6]
    assert "config/lr" not in b.series


def test_a_tune_trial_folder_with_both_files_is_read_once(tmp_path):
    trial = tmp_path / "trial"
    trial.mkdir()
    src = os.path.join(DATA, "ray_results", "train_fn_a1b2c_00000_0_lr=0.0010", "progress.csv")
    (trial / "progress.csv").write_text(open(src).read())
    (trial / "result.json").write_text(json.dumps({"training_iteration": 1, "loss": 0.9}) + "\n")
    runs, _ = read_logs([str(tmp_path)])
    assert [r.source for r in runs] == [str(trial / "progress.csv")]


def test_mlflow_run_folder_metric_files_with_slashes():
    run = one("mlruns")
    assert (run.name, run.fmt, run.evals) == ("bert-base-mlflow", "mlflow", ("eval_f1",))
    assert run.series["eval_f1"][0].tolist() == [100, 200, 300, 400]
    assert run.series["eval_f1"][1].tolist() == [0.62, 0.7, 0.68, 0.66]
    assert run.series["train/loss"][1][0] == pytest.approx(0.95)


def test_wandb_history_export_steps_by_underscore_step():
    run = one("wandb_export_run-3f9x.csv")
    assert run.fmt == "wandb" and run.evals == ("eval/accuracy", "eval/loss")
    assert run.series["eval/loss"][0].tolist() == [100, 200, 300, 400]
    assert "_runtime" in run.series and "_runtime" not in run.evals
    assert (choose(run).metric, choose(run).mode) == ("eval/loss", "min")


def test_the_projects_curve_log_keeps_its_eval_score_and_gold():
    run = one("curves.csv")
    assert (run.name, run.fmt, run.evals) == ("rlhf-over", "curvelog", ("eval_score",))
    assert run.series["gold"][1][6] == pytest.approx(0.6) and choose(run).metric == "eval_score"


def test_tensorboard_folder_reads_every_scalar_tag(tmp_path):
    pytest.importorskip("tensorboard", reason="tensorboard is not installed")
    tb = pytest.importorskip("torch.utils.tensorboard", reason="torch's SummaryWriter is not available")
    with tb.SummaryWriter(str(tmp_path / "run")) as w:
        for step in (10, 20, 30):
            w.add_scalar("train/loss", 1.0 / step, step)
            w.add_scalar("eval/loss", 0.5 + abs(step - 20) / 100, step)   # as transformers' TensorBoard callback
    (run,), refused = read_logs([str(tmp_path)])
    assert not refused and run.fmt == "tensorboard" and run.evals == ("eval/loss",)
    np.testing.assert_allclose(run.series["eval/loss"][1], [0.6, 0.5, 0.6])
    assert (choose(run).metric, choose(run).mode) == ("eval/loss", "min")


def test_a_folder_is_many_runs_and_one_bad_file_does_not_stop_the_others():
    runs, refused = read_logs([DATA])
    assert len(runs) == 11 and len(refused) == 1      # the LFS pointer; the GRPO and one-eval runs are read
    assert "git lfs pull" in str(refused[0])
    assert len({r.name for r in runs}) == len(runs)


def test_checkpoint_states_given_one_by_one_or_twice_are_still_one_run():
    pattern = os.path.join(DATA, "whisper-small-hi", "checkpoint-*", "trainer_state.json")
    runs, refused = read_logs([pattern, os.path.join(DATA, "whisper-small-hi")])
    assert not refused and [r.name for r in runs] == ["whisper-small-hi"]
    assert runs[0].source.endswith("checkpoint-4000/trainer_state.json")
