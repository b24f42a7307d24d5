"""Training-log replay: the CSV / JSONL / TensorBoard curve formats, the labelling rule, and workloads
whose RLHF jobs take their curves from logs."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from evalstop_gym import WorkloadConfig, generate, run_policy
from evalstop_gym.config import JOB_TYPES, ConfigError
from evalstop_gym.curvelog import (CurveLogError, LoggedRun, apply_curve_log, eval_score_shape, label_run, read_curve_log,
                                   resample, write_curve_log)


def run_of(scores, steps=None, name="r"):
    scores = np.asarray(scores, dtype=float)
    steps = np.arange(scores.size, dtype=float) if steps is None else np.asarray(steps, dtype=float)
    nan = np.full(scores.size, np.nan)
    return LoggedRun(name, steps, scores, nan, nan)


# -- reading ---------------------------------------------------------------------------------

CSV = """job,step,eval_score,train_loss,proxy_reward,kl
b,0,0.1,2.0,0.0,0.0
a,0,0.0,1.0,,0.0
a,10,,0.9,,0.1
b,10,0.3,1.8,0.2,0.2
a,20,0.5,0.8,,0.2
a,20,0.6,0.7,,0.3
a,30,0.4,0.6,,0.4
"""


def test_csv_runs_interleaved_blank_evals_and_repeated_steps(tmp_path):
    p = tmp_path / "log.csv"
    p.write_text(CSV)
    runs = read_curve_log(str(p))
    assert sorted(runs) == ["a", "b"]
    a = runs["a"]
    assert a.step.tolist() == [0, 10, 20, 30]
    np.testing.assert_allclose(a.eval_score, [0.0, np.nan, 0.6, 0.4])   # step 20 logged twice: last kept
    np.testing.assert_allclose(a.train_loss, [1.0, 0.9, 0.7, 0.6])
    assert np.all(np.isnan(a.proxy_reward))
    np.testing.assert_allclose(a.extra["kl"], [0.0, 0.1, 0.3, 0.4])
    assert a.series("eval_score")[0].tolist() == [0, 20, 30]


def test_jsonl_and_csv_round_trip_through_the_writer(tmp_path):
    rows = [{"job": "x", "step": s, "eval_score": 0.1 * s, "train_loss": 1 - 0.1 * s, "proxy_reward": None,
             "kl": 0.01 * s} for s in range(5)]
    for name in ("log.jsonl", "log.csv"):
        write_curve_log(str(tmp_path / name), rows)
        run = read_curve_log(str(tmp_path / name))["x"]
        np.testing.assert_allclose(run.eval_score, [0, 0.1, 0.2, 0.3, 0.4])
        assert np.all(np.isnan(run.proxy_reward))
        np.testing.assert_allclose(run.extra["kl"], [0, 0.01, 0.02, 0.03, 0.04])


def test_gzipped_logs_are_read_by_their_inner_extension_alone_or_in_a_folder(tmp_path):
    import gzip

    rows = [{"job": "x", "step": s, "eval_score": 0.1 * s} for s in range(4)]
    for name in ("log.csv", "log.jsonl"):
        write_curve_log(str(tmp_path / name), rows)
        (tmp_path / "gz").mkdir(exist_ok=True)
        (tmp_path / "gz" / (name + ".gz")).write_bytes(gzip.compress((tmp_path / name).read_bytes()))
        run = read_curve_log(str(tmp_path / "gz" / (name + ".gz")))["x"]
        np.testing.assert_allclose(run.eval_score, [0, 0.1, 0.2, 0.3])
    with pytest.raises(CurveLogError, match="also appears"):   # both files of the folder are read
        read_curve_log(str(tmp_path / "gz"))


def test_a_directory_of_logs_is_one_library(tmp_path):
    write_curve_log(str(tmp_path / "one.csv"), [{"job": "a", "step": s, "eval_score": s} for s in range(3)])
    write_curve_log(str(tmp_path / "two.jsonl"), [{"job": "b", "step": s, "eval_score": -s} for s in range(3)])
    assert sorted(read_curve_log(str(tmp_path))) == ["a", "b"]
    write_curve_log(str(tmp_path / "three.csv"), [{"job": "a", "step": s, "eval_score": s} for s in range(3)])
    with pytest.raises(CurveLogError, match="also appears in another file"):
        read_curve_log(str(tmp_path))


@pytest.mark.parametrize("name, text, line, problem", [
    ("e.csv", "", None, "the file is empty"),
    ("e.csv", "job,eval_score\na,1\n", 1, "missing column(s) step"),
    ("e.csv", "job,step,eval_score\na,0,0.1\na,1,high\n", 3, "eval_score='high' is not a number"),
    ("e.csv", "job,step,eval_score\na,0,0.1\na,,0.2\n", 3, "empty step"),
    ("e.csv", "job,step,eval_score\na,0,0.1\n,1,0.2\n", 3, "empty job name"),
    ("e.csv", "job,step,eval_score\na,0,0.1\na,1\n", 3, "2 fields, the header has 3"),
    ("e.csv", "job,step,eval_score\na,0,0.1\na,1,\n", 2, "at least 2 are needed"),
    ("e.jsonl", '{"job": "a", "step": 0, "eval_score": 1}\n{"job": "a", "step": 1,\n', 2, "not valid JSON"),
    ("e.jsonl", '[1, 2]\n', 1, "must be a JSON object"),
    ("e.jsonl", '{"job": "a", "eval_score": 1}\n', 1, "missing step"),
    ("e.jsonl", "\n", None, "no curve rows"),
    ("e.txt", "job,step,eval_score\n", None, "unknown curve-log type"),
])
def test_bad_curve_logs_name_file_line_and_problem(tmp_path, name, text, line, problem):
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(CurveLogError) as e:
        read_curve_log(str(p))
    assert str(p) in str(e.value) and problem in str(e.value)
    if line:
        assert f"line {line}:" in str(e.value)


def test_missing_path_and_bad_format_name(tmp_path):
    with pytest.raises(CurveLogError, match="no such file"):
        read_curve_log(str(tmp_path / "nope.csv"))
    with pytest.raises(ConfigError, match="curves_format"):
        read_curve_log(str(tmp_path), "wandb")


# -- a run without gold: never labelled; its shape described ----------------------------------

def declines(run, **options):
    """Whether the eval-score shape shows a peak followed by a decline above its threshold."""
    shape = eval_score_shape(run, **options)
    assert not shape.hacking   # a shape, never a label
    return shape.peak_progress < 1 and shape.drop > shape.threshold


def test_a_run_without_gold_is_never_labelled():
    x = np.linspace(0, 1, 41)
    assert label_run(run_of(0.7 - 0.6 * x)) is None   # however clearly it falls

def test_rising_and_saturating_runs_show_no_decline():
    x = np.linspace(0, 1, 41)
    assert not declines(run_of(0.1 + 0.8 * x))
    assert not declines(run_of(0.1 + 0.8 * (1 - np.exp(-5 * x))))


def test_peak_then_decline_shows_with_its_peak_position():
    x = np.linspace(0, 1, 41)
    gao = np.where(x > 0, (x / 0.4) * (1 - np.log(np.maximum(x, 1e-9) / 0.4)), 0)   # Gao's form, peak at 0.4
    run = run_of(0.1 + 0.6 * gao, steps=100 + 10 * np.arange(41))
    lab = eval_score_shape(run)
    assert declines(run)
    assert lab.peak_progress == pytest.approx(0.4, abs=0.03)
    assert lab.peak_step == pytest.approx(100 + 0.4 * 400, abs=12)


def test_a_decline_within_the_noise_does_not_show():
    x = np.linspace(0, 1, 41)
    rise_then_dip = 0.1 + 0.6 * np.minimum(x / 0.5, 1) - 0.2 * np.maximum(x - 0.5, 0)   # dips 0.1
    assert declines(run_of(rise_then_dip))              # a clean log: the dip is real
    assert not declines(run_of(rise_then_dip), noise_floor=0.06)   # 2 sigma = 0.12 > 0.1
    assert not declines(run_of(0.1 + 0.6 * x - 0.01 * (x > 0.9)))  # under a tenth of the range


def test_noisy_healthy_logs_rarely_show_a_decline_and_clear_drops_do():
    x = np.linspace(0, 1, 41)
    plateau = 0.1 + 0.6 * np.minimum(x / 0.5, 1)
    drop = plateau - 0.4 * np.maximum(x - 0.5, 0)               # falls 0.2 = 4 sigma
    rngs = [np.random.default_rng(s) for s in range(100)]
    noisy = [0.05 * r.standard_normal(41) for r in rngs]
    assert np.mean([declines(run_of(plateau + z)) for z in noisy]) <= 0.05
    assert np.mean([declines(run_of(drop + z)) for z in noisy]) >= 0.95


def test_resample_interpolates_onto_progress_checkpoints():
    run = run_of([0.0, 1.0, 0.0], steps=[100, 200, 300])
    start, at = resample(run, "eval_score", 4)
    assert start == 0.0
    np.testing.assert_allclose(at, [0.5, 1.0, 0.5, 0.0])   # steps 150, 200, 250, 300
    assert resample(run, "train_loss", 4) is None


def gold_run(gold, evals_noise=None, steps=None, proxy=None):
    """A run logging a dense ``gold`` column beside its eval scores (gold plus ``evals_noise``) and a proxy
    reward (default: a straight rise, noise 0, so the label turns on gold alone)."""
    gold = np.asarray(gold, dtype=float)
    steps = np.arange(gold.size, dtype=float) if steps is None else np.asarray(steps, dtype=float)
    noise = np.zeros(gold.size) if evals_noise is None else np.asarray(evals_noise, dtype=float)
    proxy = np.linspace(0.0, 1.0, gold.size) if proxy is None else np.asarray(proxy, dtype=float)
    return LoggedRun("g", steps, gold + noise, np.full(gold.size, np.nan), proxy, {"gold": gold})


def test_gold_rule_peak_to_end_drop_against_a_share_of_the_gain():
    # peak 0.8 at step 3, gain 0.3, drop 0.3 >= max(0.25 * 0.3, 0.03)
    lab = label_run(gold_run([0.5, 0.6, 0.7, 0.8, 0.8, 0.8, 0.7, 0.6, 0.5, 0.5, 0.5]), evals=10)
    assert lab.hacking and lab.peak_progress == pytest.approx(0.3) and lab.drop == pytest.approx(0.3)
    assert lab.threshold == pytest.approx(0.075)
    # a dip of 0.02 after a gain of 0.3: under the 0.03 floor and a quarter of the gain
    assert not label_run(gold_run(np.r_[np.linspace(0.5, 0.8, 10), 0.78]), evals=10).hacking
    # gain 0.4, drop 0.09: under a quarter (0.1), over a fifth (0.08)
    rise_dip = np.r_[np.linspace(0.4, 0.8, 10), 0.71]
    assert not label_run(gold_run(rise_dip), evals=10).hacking
    assert label_run(gold_run(rise_dip), evals=10, drop_share=0.2).hacking
    # a run that only gets worse: its best checkpoint is the start
    lab = label_run(gold_run([0.6, 0.55, 0.5]), evals=2)
    assert lab.hacking and lab.peak_progress == 0.0
    # the same gold falls while a logged proxy falls too, or with no proxy logged: not over-optimisation
    fall = [0.5, 0.6, 0.7, 0.8, 0.8, 0.8, 0.7, 0.6, 0.5, 0.5, 0.5]
    assert not label_run(gold_run(fall, proxy=np.r_[np.linspace(0, 1, 4), np.linspace(0.9, 0.3, 7)]), evals=10).hacking
    assert not label_run(gold_run(fall, proxy=np.full(11, np.nan)), evals=10).hacking


def test_gold_rule_reads_the_detectors_checkpoint_grid_and_ignores_eval_noise():
    spike = gold_run([0.2, 0.9, 0.5, 0.5, 0.5])
    # two second differences beside the peak's own: too few for a noise estimate, so the fall of 0.4 is weighed
    # against a quarter of the gain (0.175) and 0.03
    assert label_run(spike, evals=4).hacking          # checkpoints at steps 1..4 see the spike at step 1
    assert not label_run(spike, evals=2).hacking      # checkpoints at steps 2 and 4 never see it
    # the same gold with very noisy evals gets the same label; the evals alone fall at the end, yet without the
    # gold column that run is not labelled at all
    gold = np.linspace(0.2, 0.8, 11)
    noisy = gold_run(gold, evals_noise=[0, 0, 0, 0, 0, 0, 0, 0, 0.1, 0, -0.3])
    assert not label_run(noisy, evals=10).hacking
    evals_only = LoggedRun("e", noisy.step, noisy.eval_score, noisy.train_loss, noisy.proxy_reward)
    assert declines(evals_only) and label_run(evals_only) is None
    assert label_run(noisy, evals=10).noise == pytest.approx(np.sqrt((0.1 ** 2 + 0.3 ** 2) / 11))


# -- replay onto a workload -------------------------------------------------------------------

def library(gold=True):
    """Two runs, one over-optimised, one healthy; with ``gold`` their true score logged beside the evals
    (equal to them: a noise-free eval), so the gold rule labels them."""
    x = np.linspace(0, 1, 21)
    hack = 0.1 + 0.5 * np.sin(np.pi * x)                 # peaks at the middle, back to 0.1
    healthy = 0.1 + 0.7 * x
    nan = np.full(21, np.nan)
    return {"hack": LoggedRun("hack", np.arange(21.0), hack, 2 - x, x, {"gold": hack} if gold else {}),
            "ok": LoggedRun("ok", np.arange(21.0), healthy, nan, nan, {"gold": healthy} if gold else {})}


def test_rlhf_jobs_take_logged_curves_and_labels_others_keep_theirs():
    cfg = WorkloadConfig(jobs=60, seed=5, noise=0.03)
    w0 = generate(cfg)
    w = apply_curve_log(w0, library(), seed=1)
    rlhf = w.job_type == JOB_TYPES.index("rlhf")
    x = np.arange(1, 11) / 10
    hack_gold = 0.1 + 0.5 * np.sin(np.pi * x)
    for j in np.flatnonzero(rlhf):
        is_hack = np.allclose(w.curves.gold[j], hack_gold)
        assert is_hack or np.allclose(w.curves.gold[j], 0.1 + 0.7 * x)
        assert w.hacking[j] == is_hack
        assert w.curves.start[j] == pytest.approx(0.1)
        if is_hack:
            np.testing.assert_allclose(w.curves.loss[j], 2 - x)
            np.testing.assert_allclose(w.curves.proxy[j], x)
            assert w.curves.peak_progress[j] == pytest.approx(0.5)
        else:   # not logged: the calibrated model's loss and proxy stay
            np.testing.assert_array_equal(w.curves.loss[j], w0.curves.loss[j])
            np.testing.assert_array_equal(w.curves.proxy[j], w0.curves.proxy[j])
    assert 0 < w.hacking[rlhf].sum() < rlhf.sum()        # both runs dealt out
    for name in ("gold", "loss", "proxy", "eval_z"):
        np.testing.assert_array_equal(getattr(w.curves, name)[~rlhf], getattr(w0.curves, name)[~rlhf])
    np.testing.assert_array_equal(w.hacking[~rlhf], w0.hacking[~rlhf])
    np.testing.assert_allclose(w.observed - w.curves.gold, 0.03 * w0.curves.eval_z)   # the workload's noise
    np.testing.assert_array_equal(apply_curve_log(w0, library(), seed=1).curves.gold, w.curves.gold)


def test_runs_with_gold_replay_gold_as_truth_and_their_evals_as_observed():
    x = np.linspace(0, 1, 21)
    gold = 0.2 + 0.6 * x
    err = 0.05 * np.cos(7 * np.arange(21))                 # the log's own eval error
    runs = {"g": gold_run(gold, evals_noise=err)}
    checkpoints = np.arange(2, 21, 2)                       # 10 evals: every second logged step
    for noise in (0.0, 0.04):
        w0 = generate(WorkloadConfig(jobs=40, seed=3, noise=noise))
        w = apply_curve_log(w0, runs)
        rlhf = np.flatnonzero(w.job_type == JOB_TYPES.index("rlhf"))
        np.testing.assert_allclose(w.curves.gold[rlhf], np.tile(gold[checkpoints], (rlhf.size, 1)))
        np.testing.assert_allclose(w.observed[rlhf] - noise * w0.curves.eval_z[rlhf],
                                   np.tile((gold + err)[checkpoints], (rlhf.size, 1)), atol=1e-12)
        other = np.flatnonzero(w.job_type != JOB_TYPES.index("rlhf"))
        np.testing.assert_array_equal(w.observed[other], w0.observed[other])
        assert not w.hacking[rlhf].any()


def test_evalstop_catches_logged_hacking_runs():
    from evalstop_gym.baselines import make_policy

    w = apply_curve_log(generate(WorkloadConfig(jobs=80, seed=2, noise=0.01)), library(), seed=0)
    m = run_policy(w, make_policy("fifo", "evalstop", k=2))
    assert m["recall"] == 1.0 and m["precision"] > 0.9


def test_bad_apply_arguments():
    w = generate(WorkloadConfig(jobs=10))
    with pytest.raises(ConfigError, match="no runs"):
        apply_curve_log(w, {})
    with pytest.raises(ConfigError, match="job_types"):
        apply_curve_log(w, library(), job_types=("ppo",))


# -- TensorBoard ---------------------------------------------------------------------------------

def test_tensorboard_event_directories_are_runs(tmp_path):
    pytest.importorskip("tensorboard", reason="tensorboard is not installed")
    tb = pytest.importorskip("torch.utils.tensorboard", reason="torch's SummaryWriter is not available")
    for name, sign in (("run_up", 1), ("run_down", -1)):
        with tb.SummaryWriter(str(tmp_path / name)) as wr:
            for step in range(0, 50, 10):
                wr.add_scalar("eval/score", 0.5 + sign * 0.01 * step, step)
                wr.add_scalar("train/loss", 2.0 - 0.01 * step, step)
                wr.add_scalar("objective/scores", 0.02 * step, step)
    runs = read_curve_log(str(tmp_path))
    assert sorted(runs) == ["run_down", "run_up"]
    up = runs["run_up"]
    assert up.step.tolist() == [0, 10, 20, 30, 40]
    np.testing.assert_allclose(up.eval_score, [0.5, 0.6, 0.7, 0.8, 0.9], rtol=1e-6)
    np.testing.assert_allclose(up.proxy_reward, [0.0, 0.2, 0.4, 0.6, 0.8], atol=1e-6)
    assert eval_score_shape(runs["run_down"]).drop > 0


def test_tensorboard_without_an_eval_tag_is_an_error(tmp_path):
    pytest.importorskip("tensorboard", reason="tensorboard is not installed")
    tb = pytest.importorskip("torch.utils.tensorboard", reason="torch's SummaryWriter is not available")
    with tb.SummaryWriter(str(tmp_path / "r")) as wr:
        for step in range(3):
            wr.add_scalar("something/else", 1.0, step)
    with pytest.raises(CurveLogError, match="fewer than 2 eval scores.*something/else"):
        read_curve_log(str(tmp_path), "tensorboard")


# -- command line ----------------------------------------------------------------------------------

def cli(*args):
    return subprocess.run([sys.executable, "-m", "evalstop_gym.cli", *args], capture_output=True, text=True)


def write_library(tmp_path, gold=True):
    rows = [{"job": name, "step": float(s), "eval_score": float(run.eval_score[s]),
             **({"gold": float(run.eval_score[s])} if gold else {}),
             **({"proxy_reward": float(run.proxy_reward[s])} if np.isfinite(run.proxy_reward[s]) else {})}
            for name, run in library().items() for s in range(21)]
    write_curve_log(str(tmp_path / "lib.jsonl"), rows)
    return str(tmp_path / "lib.jsonl")


def test_cli_simulate_with_curves_and_label(tmp_path):
    path = write_library(tmp_path)
    r = cli("simulate", "--curves", path, "--stopper", "evalstop", "--jobs", "40", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["jobs"] == 40 and "2 logged runs" in r.stderr
    r = cli("curves", "label", path)
    assert r.returncode == 0 and "1 of 2 runs hacking (50%), by their gold" in r.stdout


def test_cli_runs_without_gold_are_never_labelled(tmp_path):
    path = write_library(tmp_path, gold=False)
    r = cli("curves", "label", path)
    assert r.returncode == 0, r.stderr
    assert "n/a (no gold)" in r.stdout and "hacking (" not in r.stdout and "2 runs without gold: runs hacking n/a (no gold)" in r.stdout
    r = cli("simulate", "--curves", path, "--stopper", "evalstop", "--jobs", "40", "--json")
    got = json.loads(r.stdout)
    assert all(got[k] == "n/a (no gold)" for k in ("precision", "recall", "fpr", "f1", "true_positives"))
    assert isinstance(got["avg_jct_h"], float) and "no hacking labels" in r.stderr
    r = cli("curves", "compare", "--curves", path, "--jobs", "40", "--seeds", "1", "--scheduler", "fifo")
    assert r.returncode == 0, r.stderr
    logged = [line for line in r.stdout.splitlines() if line.startswith("| logged")]
    assert logged and all(line.count("n/a (no gold)") == 3 for line in logged)
    assert "eval noise 0.000" not in r.stdout and "hacking by the labelling rule" not in r.stdout


def test_cli_bad_curve_log_exit_2(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text("job,step,eval_score\na,0,x\n")
    r = cli("simulate", "--curves", str(p))
    assert r.returncode == 2 and "Traceback" not in r.stderr and "line 2" in r.stderr.strip().splitlines()[-1]


def test_cli_compare_logged_and_calibrated(tmp_path):
    path = write_library(tmp_path)
    r = cli("curves", "compare", "--curves", path, "--jobs", "40", "--seeds", "2", "--scheduler", "fifo",
            "--stoppers", "evalstop,cusum")
    assert r.returncode == 0, r.stderr
    for text in ("logged", "calibrated", "evalstop k=2", "cusum", "50% hacking by the labelling rule"):
        assert text in r.stdout
    r = cli("curves", "compare", "--curves", path, "--stoppers", "evalstop,nope")
    assert r.returncode == 2 and "stoppers" in r.stderr


def test_curve_replay_in_the_realistic_world_noises_the_logged_scores_by_each_jobs_eval_set():
    w = apply_curve_log(generate(WorkloadConfig(jobs=60, seed=5, calibration="realistic")), library(), seed=1)
    rlhf = np.flatnonzero(w.job_type == JOB_TYPES.index("rlhf"))
    j = int(rlhf[0])
    p = np.clip(w.curves.gold[j], 0, 1)
    sd = w.eval_factor[j] * np.sqrt(p * (1 - p) / w.eval_items[j])   # the realistic world adds no extra noise
    np.testing.assert_allclose(w.observed[j], w.curves.gold[j] + sd * w.curves.eval_z[j])
    assert w.ckpt_service_h is not None   # costs and speed jitter stay


def test_cli_label_and_compare_take_the_metric_and_its_direction():
    lightning = os.path.join(os.path.dirname(__file__), "data", "logs", "lightning_logs")
    r = cli("curves", "label", lightning)
    assert r.returncode == 0, r.stderr
    assert "| version_0 | val_loss | min " in r.stdout and "1 runs read on val_loss (min)" in r.stderr
    # val_acc 0.6, 0.7, 0.75, 0.74 in its own units: peak 0.75, last 0.74
    r = cli("curves", "label", lightning, "--metric", "val_acc")
    row = next(line for line in r.stdout.splitlines() if line.startswith("| version_0"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:4] == ["val_acc", "max", "n/a (no gold)"] and cells[4:7] == ["0.6", "0.75", "0.74"]
    r = cli("curves", "label", lightning, "--metric", "val_acc", "--format", "csv")
    assert r.returncode == 2 and "format auto" in r.stderr
