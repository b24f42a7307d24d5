"""Bad, absurd and hostile input to the trace and curve-log readers and the CLI: a one-line error naming
the file, line or flag (exit 2), or a correct result; never a hang, a traceback or non-finite output."""

import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import evalstop_gym
from evalstop_gym import WorkloadConfig
from evalstop_gym.cli import main
from evalstop_gym.config import MAX_JOBS, ConfigError
from evalstop_gym.curvelog import CurveLogError, read_curve_log
from evalstop_gym.traces import TraceError, read_trace, replay_trace, trace_config

HEADER = "timestamp,duration,num_gpus,gpu_time,cluster\n"
GOOD = "2017-10-01 00:00:00,60,1,60,a\n2017-10-01 01:00:00,120,2,240,b\n"
HELIOS_HEADER = "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"
CURVES = "job,step,eval_score,train_loss\nr,0,0.1,2.0\nr,1,0.5,1.5\nr,2,0.3,1.0\n"


def write(tmp_path, data, name="trace.csv"):
    p = tmp_path / name
    (p.write_bytes if isinstance(data, bytes) else p.write_text)(data)
    return str(p)


def one_line(capsys, argv, *needles):
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = [ln for ln in captured.err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def simulate(tmp_path, *args):
    return ["simulate", "--gpus", "16", *args]


# -- files that are not traces ------------------------------------------------------------------

@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_devices_are_refused_at_once(capsys, tmp_path, device):
    if not os.path.exists(device):
        pytest.skip(f"no {device}")
    t0 = time.monotonic()
    one_line(capsys, simulate(tmp_path, "--trace", device, "--on-bad-row", "skip"), device, "not a regular file")
    one_line(capsys, ["curves", "label", device, "--format", "csv"], "not a regular file")
    assert time.monotonic() - t0 < 5


def test_a_directory_is_not_a_trace(capsys, tmp_path):
    one_line(capsys, simulate(tmp_path, "--trace", str(tmp_path)), "is a directory, not a regular file")


def test_a_gzipped_trace_reads_as_the_plain_one(tmp_path):
    plain = read_trace(write(tmp_path, HEADER + GOOD), "philly")
    zipped = read_trace(write(tmp_path, gzip.compress((HEADER + GOOD).encode()), "trace.csv.gz"), "philly")
    assert zipped.submit_s.tolist() == plain.submit_s.tolist() and zipped.gpus.tolist() == plain.gpus.tolist()


def test_a_cut_gzip_stream_is_one_line(capsys, tmp_path):
    data = gzip.compress((HEADER + GOOD * 2000).encode())
    path = write(tmp_path, data[: len(data) // 2], "cut.csv.gz")
    one_line(capsys, simulate(tmp_path, "--trace", path, "--on-bad-row", "skip"), path, "cannot read the trace")


def test_random_bytes_in_a_regular_file_are_one_line(capsys, tmp_path):
    path = write(tmp_path, os.urandom(1 << 16))
    one_line(capsys, simulate(tmp_path, "--trace", path, "--on-bad-row", "skip"), path)


def test_non_utf8_rows_are_bad_rows_named_by_line_and_skippable(capsys, tmp_path):
    path = write(tmp_path, (HEADER + GOOD).encode() + b"2017-10-01 02:00:00,60,1,60,\xff\xfe\n")
    with pytest.raises(TraceError, match="line 4: the row holds bytes that are not UTF-8"):
        read_trace(path, "philly")
    table = read_trace(path, "philly", on_bad_row="skip")
    assert table.n == 2 and table.report.skipped == {"not UTF-8": 1}


def test_a_50_mb_field_is_one_line_and_fast(capsys, tmp_path):
    path = tmp_path / "big.csv"
    with open(path, "w") as f:
        f.write(HEADER + GOOD + "2017-10-01 02:00:00,60,1,60," + "x" * 50_000_000 + "\n")
    t0 = time.monotonic()
    one_line(capsys, simulate(tmp_path, "--trace", str(path), "--on-bad-row", "skip"), "line 4",
             "longer than 1000000 characters")
    assert time.monotonic() - t0 < 10
    quoted = write(tmp_path, HEADER + GOOD + '2017-10-01 02:00:00,60,1,60,"' + "x\n" * 100_000 + '"\n', "q.csv")
    one_line(capsys, simulate(tmp_path, "--trace", quoted), "not readable as CSV", "field larger than field limit")


# -- absurd values ------------------------------------------------------------------------------

@pytest.mark.parametrize("row, needle", [
    ("-1e308,60,1,60,a", "not a time"),
    ("1e308,60,1,60,a", "not a time"),
    ("2017-10-01 02:00:00,60,1e21,60,a", "whole number >= 0 (at most 1000000)"),
    ("2017-10-01 02:00:00,60,1000001,60,a", "whole number >= 0 (at most 1000000)"),
])
def test_absurd_row_values_are_bad_rows(tmp_path, row, needle):
    path = write(tmp_path, HEADER + GOOD + row + "\n")
    with pytest.raises(TraceError, match="line 4: .*" + needle.replace("(", r"\(").replace(")", r"\)")):
        read_trace(path, "philly")
    assert read_trace(path, "philly", on_bad_row="skip").n == 2


def test_runs_below_the_time_resolution_are_filtered_even_with_min_duration_0(tmp_path):
    path = write(tmp_path, HEADER + GOOD + "2017-10-01 02:00:00,0,1,0,a\n2017-10-01 02:00:00,0.0004,1,0,a\n")
    table = read_trace(path, "philly", min_duration_s=0)
    assert table.n == 2 and table.report.filtered == {"jobs shorter than 0.001 s": 2}


def test_a_span_of_absurd_length_is_refused_with_both_lines(tmp_path):
    # 0 and 1e10 s are each valid times, but 2.8 million hours apart
    path = write(tmp_path, HEADER + "0,60,1,60,a\n1e10,60,1,60,a\n")
    with pytest.raises(TraceError, match=r"line 3: submit times span 2\.78e\+06 h \(from line 2"):
        read_trace(path, "philly")


@pytest.mark.xfail(not (Path(evalstop_gym.__file__).parent / "timebase.py").exists(), strict=True,
                   reason="float hours keep ~1e-10 h of rounding at 4e5 h (avg_queue_h -7e-11); exact with the "
                          "integer ticks of evalstop_gym.timebase")
def test_the_largest_allowed_span_replays_with_exact_nonnegative_queues(tmp_path):
    from evalstop_gym.baselines import make_policy

    from evalstop_gym import run_policy

    # jobs 100,000 h apart never wait: every queueing delay is exactly 0 even that far out
    rows = "".join(f"{i * 3.6e8:.0f},3600,1,3600,a\n" for i in range(5))
    w, _ = replay_trace(read_trace(write(tmp_path, HEADER + rows), "philly"), trace_config(gpus=4), rescale="none")
    m = run_policy(w, make_policy("fifo", "none"))
    assert m["avg_queue_h"] >= 0 and abs(m["avg_jct_h"] - 1.0) < 1e-6


@pytest.mark.parametrize("argv, needles", [
    (["--trace-gpu-scale", "1e30"], ("trace_gpu_scale=1e+30", "in (0, 1e+06]")),
    (["--trace-gpu-scale", "nan"], ("trace_gpu_scale=nan",)),
    (["--trace-min-duration", "-1"], ("trace_min_duration=-1.0",)),
    (["--trace-min-duration", "nan"], ("trace_min_duration=nan",)),
    (["--trace-window", "nan:5"], ("trace_window='nan:5'", "finite")),
    (["--load", "1e-9"], ("load=1e-09", "more than 1e+06 h")),
])
def test_absurd_trace_flags_name_the_flag(capsys, tmp_path, argv, needles):
    path = write(tmp_path, HEADER + GOOD)
    one_line(capsys, simulate(tmp_path, "--trace", path, *argv), *needles)


@pytest.mark.parametrize("argv, needles", [
    (["--load", "1e-9"], ("load=1e-09", "too low for 200 jobs", "more than 1e+06 h")),
    (["--jobs", "1000000000"], (f"jobs=1000000000 is invalid: must be an integer in [1, {MAX_JOBS}]",)),
    (["--jobs", "1000000", "--evals-per-job", "100"], ("evals_per_job=100 must be <= 20000000",)),
    (["--gpus", "10000000"], ("gpus=10000000",)),
])
def test_absurd_sizes_are_refused_up_front_and_fast(capsys, argv, needles):
    t0 = time.monotonic()
    one_line(capsys, ["simulate", *argv], *needles)
    assert time.monotonic() - t0 < 5


# -- duplicated jobs ------------------------------------------------------------------------------

def test_a_duplicated_helios_job_id_names_file_and_both_lines(tmp_path):
    rows = ("1,u,vc1,1,4,1,COMPLETED,2020-06-09 18:00:00,,,3600,0\n"
            "2,u,vc1,2,4,1,COMPLETED,2020-06-09 18:10:00,,,3600,0\n"
            "1,u,vc1,1,4,1,COMPLETED,2020-06-09 18:00:00,,,3600,0\n")
    path = write(tmp_path, HELIOS_HEADER + rows)
    with pytest.raises(TraceError) as e:
        read_trace(path, "helios")
    assert str(e.value).startswith(f"{path}, line 4: job_id='1' repeats line 2")
    table = read_trace(path, "helios", on_bad_row="skip")
    assert table.n == 2 and table.report.skipped == {"duplicate job_id": 1}
    assert "1 duplicate job_id (first at line 4)" in table.report.summary()


# -- flags that would do nothing ------------------------------------------------------------------

@pytest.mark.parametrize("argv, needle", [
    (["--trace-jobs", "5"], "--trace-jobs does nothing without --trace"),
    (["--trace-window", "0:5"], "--trace-window does nothing without --trace"),
    (["--trace-format", "helios"], "--trace-format does nothing without --trace"),
    (["--on-bad-row", "skip"], "--on-bad-row does nothing without --trace"),
    (["--trace-min-duration", "5"], "--trace-min-duration does nothing without --trace"),
    (["--trace-min-duration", "0"], "--trace-min-duration does nothing without --trace"),
    (["--trace-rescale", "none"], "--trace-rescale does nothing without --trace"),
    (["--trace-gpu-scale", "2"], "--trace-gpu-scale does nothing without --trace"),
    (["--trace-sample"], "--trace-sample does nothing without --trace"),
    (["--curves-format", "csv"], "--curves-format does nothing without --curves"),
])
def test_a_flag_without_the_flag_it_modifies_is_refused(capsys, argv, needle):
    one_line(capsys, ["simulate", *argv], needle)


def test_trace_sample_without_trace_jobs_is_refused(capsys, tmp_path):
    one_line(capsys, simulate(tmp_path, "--trace", write(tmp_path, HEADER + GOOD), "--trace-sample"),
             "--trace-sample does nothing without --trace-jobs")


# -- strict JSON ----------------------------------------------------------------------------------

def strict(text):
    def refuse(name):
        raise AssertionError(f"{name} in JSON output")
    return json.loads(text, parse_constant=refuse)


def test_simulate_json_is_strict_with_null_for_undefined_metrics(capsys):
    assert main(["simulate", "--jobs", "20", "--workload", "lora-heavy", "--hacking-fraction", "0", "--json"]) == 0
    metrics = strict(capsys.readouterr().out)
    assert metrics["recall"] is None and metrics["detection_delay_evals"] is None   # no hacking run


# -- curve logs -------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, needle", [
    ("job,step,eval_score\nr,0,0.1\nr,1,1e308\n", "eval_score='1e308' is not a finite number within +-1e+12"),
    ("job,step,eval_score\nr,0,0.1\nr,1e300,0.5\n", "step='1e300' is not a finite number"),
    ("job,step,eval_score\nr,0,0.1\nr,1,-inf\n", "eval_score='-inf'"),
])
def test_absurd_curve_values_name_the_line(tmp_path, text, needle):
    with pytest.raises(CurveLogError, match="line 3: " + needle.replace("+", r"\+").replace("(", r"\(")):
        read_curve_log(write(tmp_path, text, "log.csv"))


def test_jsonl_numbers_beyond_float_are_one_line(tmp_path):
    path = write(tmp_path, '{"job": "r", "step": 0, "eval_score": 0.1}\n{"job": "r", "step": 1, "eval_score": '
                 + "9" * 400 + "}\n", "log.jsonl")
    with pytest.raises(CurveLogError, match="line 2: eval_score="):
        read_curve_log(path)


def test_curve_logs_gzip_and_non_utf8(tmp_path):
    runs = read_curve_log(write(tmp_path, gzip.compress(CURVES.encode()), "log.csv"))
    assert runs["r"].eval_score.tolist() == [0.1, 0.5, 0.3]
    with pytest.raises(CurveLogError, match="line 3: the row holds bytes that are not UTF-8"):
        read_curve_log(write(tmp_path, CURVES.encode().replace(b"r,1,", b"\xff,1,"), "bad.csv"))
    with pytest.raises(CurveLogError, match="line 2: the line holds bytes that are not UTF-8"):
        read_curve_log(write(tmp_path, b'{"job": "r", "step": 0, "eval_score": 0.1}\n{"job": "\xff"}\n', "b.jsonl"))


def test_label_names_its_own_format_flag_and_uses_it(capsys, tmp_path):
    path = write(tmp_path, CURVES, "noext.txt")
    one_line(capsys, ["curves", "label", path], "unknown curve-log type", "--format")
    assert main(["curves", "label", path, "--format", "csv"]) == 0
    assert "runs hacking" in capsys.readouterr().out


@pytest.mark.parametrize("value", ["-1", "nan", "inf"])
def test_label_noise_floor_must_be_a_finite_number_ge_0(capsys, tmp_path, value):
    one_line(capsys, ["curves", "label", write(tmp_path, CURVES, "log.csv"), "--noise-floor", value],
             f"noise_floor={float(value)!r}")


def test_compare_uses_seed_as_the_first_seed(capsys, tmp_path):
    path = write(tmp_path, CURVES, "log.csv")
    args = ["curves", "compare", "--curves", path, "--seeds", "1", "--jobs", "20", "--scheduler", "fifo"]
    assert main([*args, "--seed", "3"]) == 0
    at3 = capsys.readouterr().out
    assert "seeds 3..3" in at3
    assert main([*args, "--seed", "0"]) == 0
    assert capsys.readouterr().out.splitlines()[1:] != at3.splitlines()[1:]    # another seed, other numbers


# -- TensorBoard event files --------------------------------------------------------------------------

@pytest.fixture
def event_file(tmp_path):
    pytest.importorskip("tensorboard")
    tb = pytest.importorskip("torch.utils.tensorboard")
    with tb.SummaryWriter(str(tmp_path / "tb" / "run")) as w:
        for i in range(40):
            w.add_scalar("eval/score", 0.1 + 0.01 * i, i)
    (f,) = (tmp_path / "tb" / "run").glob("*tfevents*")
    return f


def test_a_truncated_event_file_is_reported_not_half_read(capsys, event_file):
    root = str(event_file.parent.parent)
    assert len(read_curve_log(root)["run"].step) == 40
    data = event_file.read_bytes()
    event_file.write_bytes(data[: len(data) // 2])
    one_line(capsys, ["curves", "label", root], str(event_file), "is cut short (truncated)", "records before it are intact")


def test_a_flipped_byte_in_an_event_file_fails_its_crc(event_file):
    data = bytearray(event_file.read_bytes())
    data[len(data) // 2] ^= 0x01
    event_file.write_bytes(bytes(data))
    with pytest.raises(CurveLogError, match="is corrupt \\(failed its CRC check\\)"):
        read_curve_log(str(event_file.parent.parent))


# -- output paths are checked before any work ---------------------------------------------------------

def test_curves_generate_into_a_file_is_one_line_before_any_run(capsys, tmp_path):
    blocker = write(tmp_path, "", "a-file")
    t0 = time.monotonic()
    one_line(capsys, ["curves", "generate", "--out", blocker, "--runs", "1", "--steps", "1"], "out=", "cannot write there")
    assert time.monotonic() - t0 < 5


def test_train_tensorboard_into_a_file_is_one_line_before_training(capsys, tmp_path):
    pytest.importorskip("sb3_contrib")
    blocker = write(tmp_path, "", "a-file")
    one_line(capsys, ["train", "--env", "EvalStop-StopControl-v0", "--algo", "ppo", "--out", str(tmp_path / "m"),
                      "--tensorboard", blocker, "--timesteps", "64"], "tensorboard=", "cannot write there")
    assert not (tmp_path / "m" / "model.zip").exists()


@pytest.mark.parametrize("base", [WorkloadConfig(), WorkloadConfig(calibration="realistic", jobs=1, mix={"rlhf": 1.0}),
                                  WorkloadConfig(cluster="two-types", gpus=64)])
def test_a_new_seed_alone_gives_the_fully_checked_config(base):
    """replace(seed=...) alone (each env reset) skips re-checking the other fields; the config is the one
    dataclasses.replace builds and checks, and a bad seed is the same one-line error."""
    import dataclasses

    for seed in (0, 1, 2**63 - 1):
        fast = base.replace(seed=seed)
        assert fast == dataclasses.replace(base, seed=seed) and fast.seed == seed and base.seed == 0
        assert type(fast) is WorkloadConfig and fast.job_types is base.job_types
    for seed, needle in ((-1, "seed=-1"), (2**63, "seed="), (1.5, "seed=1.5"), ("3", "seed='3'")):
        with pytest.raises(ConfigError, match=needle):
            base.replace(seed=seed)
        with pytest.raises(ConfigError, match=needle):
            dataclasses.replace(base, seed=seed)
