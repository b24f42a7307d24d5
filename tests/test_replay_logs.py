"""``evalstop-gym replay``: each logged run's evals fed to the live stopper, the verdicts worked out by hand."""

import json
import os

import pytest

from evalstop_gym.cli import main
from evalstop_gym.integrations import live_stopper
from evalstop_gym.integrations.replay import judge

DATA = os.path.join(os.path.dirname(__file__), "data", "logs")


def test_evalstop_k2_on_a_dip_then_a_recovery_is_a_false_stop():
    # declines at evals 3 (0.55 < 0.6) and 4 (0.5 < 0.55): stop at eval 4, step 400, keeping 0.6 from step 200;
    # eval 5 (0.7) beats it later: a false stop, delivering 0.1 less than the final 0.7, saving 100 of 500 steps
    v = judge([100, 200, 300, 400, 500], [0.5, 0.6, 0.55, 0.5, 0.7], "evalstop", k=2)
    assert (v.stop_eval, v.stop_step, v.best_step, v.best_score, v.final_score) == (4, 400, 200, 0.6, 0.7)
    assert v.evals_saved == 1 and v.steps_saved_share == pytest.approx(0.2)
    assert v.false_stop is True and v.delivered_loss == pytest.approx(0.1)


def test_a_lower_is_better_metric_declines_when_it_rises():
    # WER 40, 35, 37, 39, 30: rises at evals 3 and 4 stop k=2 at eval 4, keeping 35; the final 30 beats it by 5
    v = judge([1, 2, 3, 4, 5], [40, 35, 37, 39, 30], "evalstop", mode="min", k=2)
    assert (v.stop_eval, v.best_score, v.false_stop) == (4, 35, True)
    assert v.delivered_loss == pytest.approx(5.0)


def test_patience_2_is_transformers_early_stopping_an_equal_score_is_no_improvement():
    # 0.5, 0.6 (best), 0.6 (equal: wait 1), 0.55 (wait 2): stop at eval 4, as EarlyStoppingCallback(2) does
    v = judge([1, 2, 3, 4, 5], [0.5, 0.6, 0.6, 0.55, 0.4], "patience", patience=2)
    assert (v.stop_eval, v.best_step, v.false_stop) == (4, 2, False)
    assert v.delivered_loss == pytest.approx(-0.2)   # the kept best is better than the end


def test_a_run_that_never_fires_delivers_its_end():
    v = judge([1, 2, 3], [0.1, 0.2, 0.3], "evalstop", k=2)
    assert (v.stop_eval, v.stop_step, v.false_stop, v.evals_saved, v.steps_saved_share) == (None, None, None, 0, 0.0)
    assert (v.best_step, v.best_score, v.delivered_loss) == (3, 0.3, 0.0)


def test_the_eval_at_max_steps_ends_the_run_a_stopped_logs_last_eval_is_judged():
    steps, scores = [1, 2, 3, 4], [0.5, 0.6, 0.55, 0.5]
    assert judge(steps, scores, "evalstop", k=2, max_steps=4).stop_eval is None   # eval 4 is the run's end
    assert judge(steps, scores, "evalstop", k=2, max_steps=10).stop_eval == 4     # stopped early: judged


def test_the_verdict_is_the_live_stoppers_own():
    scores = [0.2, 0.4, 0.35, 0.5, 0.45, 0.42, 0.6]
    live = live_stopper("evalstop", k=2)
    fired = next(i for i, s in enumerate(scores) if live.update("j", s, step=10 * i))
    v = judge([10 * i for i in range(len(scores))], scores, "evalstop", k=2)
    assert v.stop_eval == fired + 1 and v.best_score == live.best("j").score


def cli(capsys, *argv, code=0):
    assert main(["replay", *argv]) == code
    return capsys.readouterr()


def test_replay_json_one_object_per_run_with_the_documented_keys(capsys):
    out = json.loads(cli(capsys, "--curves", os.path.join(DATA, "whisper-small-hi"), os.path.join(DATA, "curves.csv"),
                         "--stopper", "evalstop:k=2", "--stopper", "patience:patience=2", "--json").out)
    assert [r["run"] for r in out] == ["whisper-small-hi", "rlhf-over"]
    whisper, over = out
    assert {"run", "metric", "mode", "evals", "stops"} <= set(whisper)
    assert (whisper["metric"], whisper["mode"], whisper["evals"]) == ("eval_wer", "min", 4)
    stop_keys = {"stopper", "stop_eval", "stop_step", "best_step", "best_score", "final_score",
                 "steps_saved_share", "false_stop"}
    assert all(stop_keys <= set(s) for s in whisper["stops"])
    # WER 40.25, 35.5, 33.0, 34.75 (max_steps 5000): one rise, no stop for either rule
    assert [s["stop_eval"] for s in whisper["stops"]] == [None, None]
    # rlhf-over's evals peak at step 60 (0.59) and fall at 70 and 80: both rules stop at eval 9 (step 80)
    ek2 = over["stops"][0]
    assert (ek2["stopper"], ek2["stop_eval"], ek2["stop_step"], ek2["best_step"]) == ("evalstop k=2", 9, 80, 60)
    assert ek2["false_stop"] is False and ek2["steps_saved_share"] == pytest.approx(0.2)


def test_replay_table_prints_metric_mode_refusals_and_totals(capsys):
    out = cli(capsys, "--curves", DATA).out
    assert "9 runs judged, 3 refused" in out   # 11 read; GRPO (no eval rows) and one-eval refused
    refused = [line for line in out.splitlines() if line.startswith("  refused: ")]
    assert len(refused) == 3 and any("git lfs pull" in r for r in refused)
    assert "sentiment/results (trainer_state): eval_macro_f1, max (the run's own (best_metric)" in out
    assert "totals over 9 runs" in out and "no hacking labels" in out
    for name in ("evalstop k=2", "patience patience=2", "cusum", "smoothed", "droptest", "divergence"):
        assert name in out


def test_replay_metric_and_mode_flags(capsys):
    out = json.loads(cli(capsys, "--curves", os.path.join(DATA, "sentiment"), "--metric", "accuracy", "--json",
                         "--stopper", "patience:patience=2").out)
    # accuracy 0.71, 0.69, 0.68, 0.66: two evals without a new best stop patience at eval 3, keeping step 100
    assert (out[0]["metric"], out[0]["mode"]) == ("eval_accuracy", "max")
    assert (out[0]["stops"][0]["stop_eval"], out[0]["stops"][0]["best_step"]) == (3, 100)
    out = json.loads(cli(capsys, "--curves", os.path.join(DATA, "sentiment"), "--metric", "accuracy",
                         "--mode", "min", "--json", "--stopper", "patience:patience=2").out)
    assert out[0]["mode"] == "min" and out[0]["stops"][0]["stop_eval"] is None   # falling accuracy "improves"


def test_replay_plot_writes_one_png_per_run(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    out = cli(capsys, "--curves", os.path.join(DATA, "curves.csv"), "--plot", str(tmp_path / "plots")).out
    png = tmp_path / "plots" / "rlhf-over.png"
    assert f"wrote {png}" in out and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("argv, message", [
    (["--stopper", "nope"], "stopper='nope'"),
    (["--stopper", "evalstop:q=3"], "parameters are k=v pairs among k"),
    (["--stopper", "evalstop:k=0"], "k=0"),
])
def test_bad_stopper_specs_are_one_line_errors(capsys, argv, message):
    err = cli(capsys, "--curves", os.path.join(DATA, "curves.csv"), *argv, code=2).err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_nothing_to_judge_exits_2_after_saying_why(capsys):
    out = cli(capsys, "--curves", os.path.join(DATA, "lfs-run"), os.path.join(DATA, "grpo-qwen"), code=2).out
    assert "0 runs judged, 2 refused" in out and "git lfs pull" in out and "no eval rows" in out


def test_replaying_a_run_evalstopcallback_stopped_gives_its_stop_and_kept_best(tmp_path, capsys):
    pytest.importorskip("transformers")
    import sys

    sys.path.insert(0, os.path.dirname(__file__))
    from trainer_toy import one_thread, toy_trainer

    from evalstop_gym.integrations import EvalStopCallback

    cb = EvalStopCallback("evalstop", metric="eval_reward", k=2)
    with one_thread():   # evals at steps 2..10 score 0.1, 0.3, 0.5, 0.45, 0.4: live, the stop is at step 10
        trainer = toy_trainer(tmp_path / "out", [cb], [0.1, 0.3, 0.5, 0.45, 0.4, 0.9, 0.9, 0.9], max_steps=16)
        trainer.train()
        trainer.save_state()   # the output folder's own trainer_state.json, beside checkpoint-6's
    live = json.loads((tmp_path / "out" / "evalstop.json").read_text())
    capsys.readouterr()   # the Trainer's own log lines
    (run,) = json.loads(cli(capsys, "--curves", str(tmp_path / "out"), "--stopper", "evalstop:k=2", "--json").out)
    assert (run["metric"], run["mode"], run["evals"]) == ("eval_reward", "max", 5)
    stop = run["stops"][0]
    assert stop["stop_step"] == live["stopped_at_step"] == 10 and stop["stop_eval"] == 5   # the last eval, judged
    assert (stop["best_step"], stop["best_score"]) == (live["best"]["step"], live["best"]["score"]) == (6, 0.5)
