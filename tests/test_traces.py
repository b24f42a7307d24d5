"""Cluster-trace replay: one tiny hand-written fixture per layout, the rules, and the real Philly file."""

import math
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

from evalstop_gym import WorkloadConfig, run_policy
from evalstop_gym.config import JOB_TYPES, ConfigError
from evalstop_gym.traces import (TraceError, TraceWarning, assign_job_types, load_trace, read_trace,
                                 replay_trace, trace_config)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PHILLY = os.path.join(REPO, "..", "shared", "traces", "philly_jobs_pollux.csv")

# six jobs, deliberately out of submit order (as in the real file)
PHILLY_ROWS = """timestamp,duration,num_gpus,gpu_time,cluster
2017-10-01 02:00:00,3600.0,8,28800.0,vcB
2017-10-01 00:00:00,1800.0,1,1800.0,vcA
2017-10-01 01:00:00,7200.0,2,14400.0,vcA
2017-10-01 03:00:00,360.0,1,360.0,vcC
2017-10-01 04:00:00,36000.0,16,576000.0,vcB
2017-10-01 05:00:00,900.0,4,3600.0,vcA
"""

HELIOS_ROWS = """job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue
1,uA,vc1,1,4,1,COMPLETED,2020-06-09 18:00:00,2020-06-09 18:00:00,2020-06-09 19:00:00,3600,0
2,uB,vc2,0,16,1,COMPLETED,2020-06-09 18:30:00,2020-06-09 18:30:00,2020-06-09 18:40:00,600,0
3,uA,vc1,8,32,1,FAILED,2020-06-09 19:00:00,2020-06-09 19:00:00,2020-06-09 21:00:00,7200,0
4,uC,vc3,2,8,1,CANCELLED,2020-06-09 20:00:00,2020-06-09 20:00:00,2020-06-09 20:00:00,0,0
5,uC,vc3,4,8,1,COMPLETED,2020-06-09 21:00:00,2020-06-09 21:00:00,2020-06-09 21:30:00,1800,0
"""

ACME_ROWS = """job_id,user,node_num,gpu_num,cpu_num,type,state,submit_time,start_time,end_time,duration,queue,gpu_time
10,u1,1,8,128,Pretrain,COMPLETED,2023-03-01 00:00:00+08:00,2023-03-01 00:00:10+08:00,2023-03-01 00:10:10+08:00,600,10,4800
11,u2,1,8,128,Eval,COMPLETED,2023-03-01 01:00:00+08:00,2023-03-01 01:00:00+08:00,2023-03-01 03:00:00+08:00,7200,0,57600
12,u1,1,4,64,SFT,FAILED,2023-03-01 02:00:00+08:00,2023-03-01 02:00:00+08:00,2023-03-01 02:30:00+08:00,1800,0,7200
13,u3,1,1,16,Debug,CANCELLED,2023-03-01 03:00:00+08:00,2023-03-01 03:00:00+08:00,2023-03-01 03:01:00+08:00,60,0,60
14,u2,2,16,256,MLLM,COMPLETED,2023-02-28 20:00:00+00:00,2023-02-28 20:00:00+00:00,2023-02-28 21:00:00+00:00,3600,0,57600
"""


def write(tmp_path, text, name="trace.csv"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


CFG = WorkloadConfig(gpus=16, load=1.0, seed=3)


# -- the three layouts -------------------------------------------------------------------

def test_philly_rows_sorted_by_submit_with_hours_gpus_and_tenants(tmp_path):
    w, rep = replay_trace(read_trace(write(tmp_path, PHILLY_ROWS), "philly"), CFG, rescale="none")
    assert w.n == 6 and rep.jobs == 6 and rep.rows == 6
    np.testing.assert_allclose(w.submit_h, [0, 1, 2, 3, 4, 5])
    np.testing.assert_allclose(w.length_h, [0.5, 2.0, 1.0, 0.1, 10.0, 0.25])
    assert w.gpus.tolist() == [1, 2, 8, 1, 16, 4]
    # tenants numbered by first appearance in the file: vcB, vcA, vcC
    assert w.tenant.tolist() == [1, 1, 0, 2, 0, 1]
    assert w.total_gpus == 16


def test_helios_filters_cpu_only_and_zero_length_jobs_and_counts_them(tmp_path):
    table = read_trace(write(tmp_path, HELIOS_ROWS), "helios")
    assert table.n == 3
    assert table.report.filtered == {"CPU-only jobs (0 GPUs)": 1, "jobs shorter than 1 s": 1}
    w, rep = replay_trace(table, CFG, rescale="none")
    np.testing.assert_allclose(w.submit_h, [0, 1, 3])
    assert w.gpus.tolist() == [1, 8, 4]
    assert "CPU-only" in rep.summary() and "5 rows" in rep.summary()


def test_acme_utc_offsets_and_type_tiers(tmp_path):
    w, _ = replay_trace(read_trace(write(tmp_path, ACME_ROWS), "acme"),
                        CFG.replace(mix={"lora": 0.4, "dpo": 0.2, "rlhf": 0.4}), rescale="none")
    # 2023-02-28 20:00 UTC is 2023-03-01 04:00+08:00: the last row is the 5th job
    np.testing.assert_allclose(w.submit_h, [0, 1, 2, 3, 4])
    types = [JOB_TYPES[t] for t in w.job_type]
    # tiers: Debug/Eval 0 < SFT 1 < Pretrain/MLLM 2, then GPU-hours; cuts at 40% / 60% of 5 jobs
    # order: Debug(1 GPU-min), Eval(16 GPU-h), SFT(2 GPU-h), Pretrain(1.33 GPU-h), MLLM(16 GPU-h)
    assert types == ["rlhf", "lora", "dpo", "lora", "rlhf"]


def test_type_rule_cuts_at_the_mix_by_gpu_hours():
    gh = np.array([5.0, 1.0, 3.0, 2.0, 4.0, 0.5, 9.0, 7.0, 8.0, 6.0])
    t = assign_job_types(gh, np.zeros(10, int), {"lora": 0.1, "dpo": 0.1, "rlhf": 0.8})
    assert [JOB_TYPES[i] for i in t] == ["rlhf", "dpo", "rlhf", "rlhf", "rlhf", "lora", "rlhf", "rlhf",
                                         "rlhf", "rlhf"]


def test_hidden_parts_come_from_the_calibrated_model_and_the_seed(tmp_path):
    path = write(tmp_path, PHILLY_ROWS)
    w1 = load_trace(path, "philly", CFG)
    w2 = load_trace(path, "philly", CFG)
    w3 = load_trace(path, "philly", CFG.replace(seed=4))
    assert w1.curves.gold.shape == (6, CFG.evals_per_job)
    np.testing.assert_array_equal(w1.curves.gold, w2.curves.gold)
    np.testing.assert_array_equal(w1.est_length_h, w2.est_length_h)
    assert not np.array_equal(w1.est_length_h, w3.est_length_h)
    assert not np.any(w1.hacking & (w1.job_type != JOB_TYPES.index("rlhf")))
    assert np.all(np.isnan(w1.curves.proxy[w1.job_type != JOB_TYPES.index("rlhf")]))
    assert np.all(w1.est_length_h > 0)


# -- options -------------------------------------------------------------------------------

def test_rescale_arrivals_gives_the_configured_offered_load(tmp_path):
    table = read_trace(write(tmp_path, PHILLY_ROWS), "philly")
    for load in (0.5, 1.0, 2.0):
        w, rep = replay_trace(table, CFG.replace(load=load))
        offered = np.sum(w.gpus * w.length_h) / (w.total_gpus * w.submit_h[-1])
        assert offered == pytest.approx(load)
        assert rep.time_factor == pytest.approx(np.sum(w.gpus * w.length_h) / (16 * load * 5))


def test_rescale_cluster_keeps_times_and_sizes_the_cluster(tmp_path):
    table = read_trace(write(tmp_path, PHILLY_ROWS), "philly")
    w, _ = replay_trace(table, CFG.replace(load=1.0), rescale="cluster")
    np.testing.assert_allclose(w.submit_h, [0, 1, 2, 3, 4, 5])
    gpu_hours = 0.5 + 4 + 8 + 0.1 + 160 + 1
    assert w.total_gpus == max(math.ceil(gpu_hours / 5.0), 16)
    w, _ = replay_trace(table, CFG.replace(load=0.5), rescale="cluster")
    assert w.total_gpus == math.ceil(gpu_hours / 2.5)


def test_window_jobs_and_seeded_sample(tmp_path):
    table = read_trace(write(tmp_path, PHILLY_ROWS), "philly")
    w, rep = replay_trace(table, CFG, window="1:4", rescale="none")
    np.testing.assert_allclose(w.length_h, [2.0, 1.0, 0.1])   # submitted at 1, 2, 3 h
    assert rep.filtered["jobs outside the window"] == 3
    w, _ = replay_trace(table, CFG, window=(None, 2), rescale="none")
    assert w.n == 2
    w, rep = replay_trace(table, CFG, jobs=2, rescale="none")
    np.testing.assert_allclose(w.length_h, [0.5, 2.0])
    assert rep.filtered["jobs not selected (trace_jobs)"] == 4
    a, _ = replay_trace(table, CFG, jobs=3, sample=True)
    b, _ = replay_trace(table, CFG, jobs=3, sample=True)
    np.testing.assert_array_equal(a.length_h, b.length_h)
    picks = {tuple(replay_trace(table, CFG.replace(seed=s), jobs=3, sample=True)[0].length_h) for s in range(8)}
    assert len(picks) > 1


def test_gpu_scale_number_and_fit(tmp_path):
    table = read_trace(write(tmp_path, PHILLY_ROWS), "philly")
    w, _ = replay_trace(table, CFG, gpu_scale=0.5, rescale="none")
    assert w.gpus.tolist() == [1, 1, 4, 1, 8, 2]     # rounded half up, at least 1
    w, rep = replay_trace(table, trace_config(gpus=4), gpu_scale="fit", rescale="none")
    assert max(w.gpus) == 4 and rep.gpu_scale == 0.25 and w.total_gpus == 4


def test_trace_config_allows_small_clusters():
    with pytest.raises(ConfigError):
        WorkloadConfig(gpus=4)          # an RLHF job of the generator may need 16 GPUs
    assert trace_config(gpus=4, seed=2).gpus == 4


def test_replays_run_under_a_policy(tmp_path):
    from evalstop_gym.baselines import make_policy

    w = load_trace(write(tmp_path, ACME_ROWS), "acme", CFG)
    m = run_policy(w, make_policy("fifo", "evalstop"))
    assert m["jobs"] == 5


# -- bad input -----------------------------------------------------------------------------

HEADER = "timestamp,duration,num_gpus,gpu_time,cluster\n"
GOOD = "2017-10-01 00:00:00,60,1,60,a\n"


@pytest.mark.parametrize("body, line, problem", [
    (GOOD + "2017-13-45 00:00:00,60,1,60,a\n", 3, "not a time"),
    (GOOD + "yesterday,60,1,60,a\n", 3, "not a time"),
    (GOOD + "nan,60,1,60,a\n", 3, "not a time"),
    (GOOD + "2017-10-01 01:00:00,-5,1,-5,a\n", 3, "finite and >= 0"),
    (GOOD + "2017-10-01 01:00:00,inf,1,inf,a\n", 3, "finite and >= 0"),
    (GOOD + "2017-10-01 01:00:00,1e12,1,1e12,a\n", 3, "more than max_duration_h"),
    (GOOD + "2017-10-01 01:00:00,abc,1,1,a\n", 3, "not a number of seconds"),
    (GOOD + "2017-10-01 01:00:00,60,-2,1,a\n", 3, "whole number >= 0"),
    (GOOD + "2017-10-01 01:00:00,60,1.5,1,a\n", 3, "whole number >= 0"),
    (GOOD + "2017-10-01 01:00:00,,1,1,a\n", 3, "empty duration"),
    (GOOD + "2017-10-01 01:00:00,60\n", 3, "only 2 fields"),
    (GOOD + "2017-10-01 01:00:00,60,64,3840,a\n", 3, "demands 64 GPUs, more than the cluster's gpus=16"),
])
def test_bad_row_names_file_line_and_problem(tmp_path, body, line, problem):
    path = write(tmp_path, HEADER + body)
    with pytest.raises(TraceError) as e:
        load_trace(path, "philly", CFG)
    msg = str(e.value)
    assert path in msg and f"line {line}:" in msg and problem in msg
    assert isinstance(e.value, ConfigError) and isinstance(e.value, ValueError)
    assert e.value.line == line


@pytest.mark.parametrize("text, problem", [
    ("", "the file is empty"),
    ("\n\n", "the file is empty"),
    (HEADER, "no job rows"),
    ("timestamp,duration,cluster\n" + "2017-10-01 00:00:00,60,a\n", "missing column(s) num_gpus"),
    (HEADER + "2017-10-01 00:00:00,60,0,0,a\n", "no replayable job"),
])
def test_whole_file_problems_are_errors_even_when_skipping(tmp_path, text, problem):
    path = write(tmp_path, text)
    with pytest.raises(TraceError) as e:
        read_trace(path, "philly", on_bad_row="skip")
    assert path in str(e.value) and problem in str(e.value)


@pytest.mark.parametrize("fmt, rows, column", [("helios", HELIOS_ROWS, "vc"), ("acme", ACME_ROWS, "type"),
                                                ("acme", ACME_ROWS, "submit_time")])
def test_each_layout_names_its_own_missing_column(tmp_path, fmt, rows, column):
    header, *body = rows.splitlines()
    cols = header.split(",")
    i = cols.index(column)
    text = "\n".join(",".join(c for k, c in enumerate(r.split(",")) if k != i) for r in [header, *body])
    with pytest.raises(TraceError, match=f"line 1: missing column\\(s\\) {column} for the {fmt} layout"):
        read_trace(write(tmp_path, text), fmt)


def test_missing_file_is_a_trace_error(tmp_path):
    with pytest.raises(TraceError, match="cannot open"):
        read_trace(str(tmp_path / "nope.csv"))


def test_skip_drops_bad_rows_counts_them_and_warns(tmp_path):
    body = (GOOD + "bad time,60,1,60,a\n" + "2017-10-01 01:00:00,-1,1,-1,a\n" + "2017-10-01 02:00:00,-1,1,-1,b\n"
            + "2017-10-01 03:00:00,60,64,1,a\n" + "2017-10-01 04:00:00,120,2,240,b\n")
    path = write(tmp_path, HEADER + body)
    with pytest.warns(TraceWarning, match="skipped 4 bad rows") as rec:
        w = load_trace(path, "philly", CFG, on_bad_row="skip")
    assert w.n == 2
    msg = str(rec[0].message)
    assert "2 negative duration (first at line 4)" in msg and "1 unparsable timestamp (first at line 3)" in msg
    assert "1 demand exceeds the cluster (first at line 6)" in msg


def test_bad_options_are_config_errors(tmp_path):
    table = read_trace(write(tmp_path, PHILLY_ROWS), "philly")
    for kwargs, name in [({"rescale": "both"}, "trace_rescale"), ({"jobs": 0}, "trace_jobs"),
                         ({"window": "5"}, "trace_window"), ({"window": "4:2"}, "trace_window"),
                         ({"window": "100:200"}, "trace_window"), ({"gpu_scale": -1.0}, "trace_gpu_scale"),
                         ({"gpu_scale": "big"}, "trace_gpu_scale"), ({"on_bad_row": "ignore"}, "on_bad_row")]:
        with pytest.raises(ConfigError, match=name):
            replay_trace(table, CFG, **kwargs)
    with pytest.raises(ConfigError, match="trace_format"):
        read_trace(write(tmp_path, PHILLY_ROWS), "alibaba")


# -- command line ---------------------------------------------------------------------------

def cli(*args):
    return subprocess.run([sys.executable, "-m", "evalstop_gym.cli", *args], capture_output=True, text=True)


def test_cli_trace_error_is_one_line_exit_2(tmp_path):
    path = write(tmp_path, HEADER + GOOD + "2017-10-01 01:00:00,-5,1,-5,a\n")
    r = cli("simulate", "--trace", path, "--json")
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert path in last and "line 3" in last and ">= 0" in last


def test_cli_skip_reports_counts_on_stderr_and_json_on_stdout(tmp_path):
    import json

    path = write(tmp_path, PHILLY_ROWS + "garbage,1,1,1,a\n")
    r = cli("simulate", "--trace", path, "--on-bad-row", "skip", "--stopper", "evalstop", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["jobs"] == 6
    assert "skipped 1 bad rows: 1 unparsable timestamp (first at line 8)" in r.stderr


def test_cli_acme_trace_with_options(tmp_path):
    r = cli("simulate", "--trace", write(tmp_path, ACME_ROWS), "--trace-format", "acme", "--gpus", "8",
            "--trace-gpu-scale", "fit", "--trace-jobs", "3", "--trace-sample", "--trace-window", "0:",
            "--seed", "2")
    assert r.returncode == 0, r.stderr
    assert "| jobs " in r.stdout and "3 jobs replayed, on 8 GPUs" in r.stderr and "x0.5" in r.stderr


# -- the real Philly file (../shared/traces from the repo root) -----------------------------

needs_philly = pytest.mark.skipif(not os.path.exists(PHILLY), reason=f"real Philly trace not found at {PHILLY}")


@needs_philly
def test_real_philly_file_reads_every_row():
    table = read_trace(PHILLY, "philly")
    assert table.n == 82247 and not table.report.skipped and not table.report.filtered
    assert set(np.unique(table.gpus)) == {1, 2, 4, 8, 12, 16, 24, 32, 64, 128}
    assert len(table.tenant_names) == 15
    assert np.all(np.diff(table.submit_s) >= 0)


@needs_philly
def test_real_philly_sample_replays_under_srtf_and_evalstop():
    from evalstop_gym.baselines import SCHEDULERS, make_policy

    sched = "srtf-est" if "srtf-est" in SCHEDULERS else "fifo"
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # nothing skipped, so no warning
        w = load_trace(PHILLY, "philly", trace_config(gpus=128, seed=1), jobs=3000, sample=True)
    m = run_policy(w, make_policy(sched, "evalstop", k=2))
    assert m["jobs"] == 3000 and m["precision"] > 0.9


@needs_philly
@pytest.mark.slow
def test_real_philly_whole_file_under_60_s_each():
    import time

    from evalstop_gym.baselines import SCHEDULERS, make_policy

    table = read_trace(PHILLY, "philly")
    w, _ = replay_trace(table, trace_config(seed=0), rescale="cluster")
    sched = "srtf-est" if "srtf-est" in SCHEDULERS else "fifo"
    for policy in (make_policy("fifo"), make_policy(sched, "evalstop", k=2)):
        t = time.perf_counter()
        m = run_policy(w, policy)
        assert m["jobs"] == 82247
        assert time.perf_counter() - t <= 60


def test_trace_replay_in_the_realistic_world_keeps_the_trace_and_adds_the_worlds_draws(tmp_path):
    table = read_trace(write(tmp_path, PHILLY_ROWS), "philly")
    paper, _ = replay_trace(table, CFG, rescale="none")
    real, _ = replay_trace(table, CFG.replace(calibration="realistic"), rescale="none")
    np.testing.assert_array_equal(real.submit_h, paper.submit_h)
    np.testing.assert_array_equal(real.gpus, paper.gpus)
    np.testing.assert_array_equal(real.est_length_h, paper.est_length_h)
    assert (real.items > 0).all() and (paper.items == 0).all()
    assert (real.length_h > paper.length_h).all()   # evals take time and stragglers slow runs down


# -- what a replay reports, word for word ---------------------------------------------------------

REPORTED = """job_id,user,node_num,gpu_num,cpu_num,type,state,submit_time,start_time,end_time,duration,queue,gpu_time
1,u1,1,8,1,Pretrain,COMPLETED,2023-03-01 00:00:00,,,3600,0,0
2,u2,1,2,1,Weird,COMPLETED,2023-03-01 01:00:00,,,1800,0,0
3,u1,1,0,1,Debug,COMPLETED,2023-03-01 02:00:00,,,600,0,0
4,u3,1,1,1,Eval,COMPLETED,2023-03-01 03:00:00,,,0.5,0,0
5,u3,1,1,1,SFT,FAILED,2023-03-01 04:00:00,,,-5,0,0
6,u3,1,1,1,SFT,FAILED,yesterday,,,60,0,0
7,u2,1,4,1,SFT,COMPLETED,2023-03-01 05:00:00,,,7200,0,0
8,u2,1,2,1,Other,COMPLETED,2023-03-01 06:00:00,,,60,0,0
9,u2,1,2,1,Weird,COMPLETED,2023-03-01 07:00:00,,,60,0,0
10,u2,1,2,1,Odd,COMPLETED,2023-03-01 08:00:00,,,60,0,0
"""


def test_the_replay_summary_names_every_count(tmp_path):
    # lines 2, 3, 8 replayed (lines 9-11 fall after the 0-5.5 h window); line 4 CPU-only and line 5 a 0.5 s
    # run are filtered; lines 6 (negative duration) and 7 (no time) are bad rows, skipped; types Weird (twice)
    # and Odd are unknown
    table = read_trace(write(tmp_path, REPORTED, "t.csv"), "acme", on_bad_row="skip")
    w, rep = replay_trace(table, trace_config(gpus=16, seed=0), window="0:5.5", rescale="none", gpu_scale=0.5)
    assert w.gpus.tolist() == [4, 1, 2] and w.n == 3
    assert rep.summary() == (
        "trace t.csv (acme): 10 rows, 3 jobs replayed, on 16 GPUs, GPU demands x0.5; "
        "skipped 2 bad rows: 1 negative duration (first at line 6), 1 unparsable timestamp (first at line 7); "
        "filtered: 1 CPU-only jobs (0 GPUs), 3 jobs outside the window, 1 jobs shorter than 1 s; "
        "notes: 1 rows with unknown type 'Odd' (kept, tier 1), 2 rows with unknown type 'Weird' (kept, tier 1)")
    # the table's own report is left as read: the replay counts into a copy
    assert "jobs outside the window" not in table.report.filtered and table.report.jobs == 0
    _, rep = replay_trace(table, trace_config(gpus=16, seed=0), rescale="arrivals")
    assert rep.time_factor != 1.0 and f"arrival times x{rep.time_factor:.4g}" in rep.summary()
    assert rep.filtered["jobs outside the window"] == 0 and "GPU demands" not in rep.summary()


@pytest.mark.parametrize("options, message", [
    ({"window": "5"}, "trace_window='5' is invalid: must be START:END in hours since the first submit, "
                      "e.g. 0:168 (either side may be empty)"),
    ({"window": "a:b"}, "trace_window='a:b' is invalid: START and END must be numbers of hours"),
    ({"window": "1:2:3"}, "trace_window='1:2:3' is invalid: START and END must be numbers of hours"),
    ({"window": "5:2"}, "trace_window='5.0:2.0' is invalid: END must be greater than START"),
    ({"window": "2:2"}, "trace_window='2.0:2.0' is invalid: END must be greater than START"),
    ({"window": "100:200"}, "trace_window='100.0:200.0' is invalid: no job of {path} falls in this window "
                            "(the trace spans 5.0 h)"),
    ({"gpu_scale": 0}, "trace_gpu_scale=0 is invalid: must be a number in (0, 1e+06] or 'fit'"),
    ({"gpu_scale": "big"}, "trace_gpu_scale='big' is invalid: must be a number > 0 or 'fit'"),
    ({"rescale": "bogus"}, "trace_rescale='bogus' is invalid: must be one of arrivals, cluster, none"),
    ({"on_bad_row": "ignore"}, "on_bad_row='ignore' is invalid: must be one of error, skip"),
])
def test_bad_replay_options_say_what_is_allowed(tmp_path, options, message):
    path = write(tmp_path, PHILLY_ROWS)
    with pytest.raises(ConfigError) as e:
        replay_trace(read_trace(path, "philly"), CFG, **options)
    assert str(e.value) == message.format(path=path)


def test_open_ended_windows():
    from evalstop_gym.traces import parse_window

    assert parse_window(":5") == (None, 5.0) and parse_window("2.5:") == (2.5, None)
    assert parse_window(":") == (None, None) and parse_window(" 1 : 2 ") == (1.0, 2.0)


T0 = "2017-10-01 00:00:00"
ONE_OF_EACH = [                  # (row, what the reader makes of it)
    (f"{T0},3600,1,0,a", "good"),
    ("junk", "short row"),
    ("  ", "blank"),
    ("", "blank"),
    (f"{T0},60", "short row"),
    (",60,1,0,a", "missing value"),
    ("soon,60,1,0,a", "unparsable timestamp"),
    (f"{T0},long,1,0,a", "unparsable duration"),
    (f"{T0},-5,1,0,a", "negative duration"),
    (f"{T0},inf,1,0,a", "absurd duration"),
    (f"{T0},1e12,1,0,a", "absurd duration"),
    (f"{T0},60,1.5,0,a", "bad GPU count"),
    (f"{T0},60,-1,0,a", "bad GPU count"),
    (f"{T0},60,two,0,a", "bad GPU count"),
    (f"{T0},31537000,1,0,a", "absurd duration"),          # a year (8760 h) and 1000 s
    (f"{T0},60,0,0,b", "CPU-only jobs (0 GPUs)"),
    (f"{T0},0.5,1,0,b", "jobs shorter than 1 s"),
    (f"{T0},120,2,0,b", "good"),
]


def test_every_kind_of_bad_row_is_skipped_and_counted(tmp_path):
    """Two rounds of every problem, good rows between them: each is counted, none stops the reading."""
    rows = [r for r, _ in ONE_OF_EACH] * 2
    table = read_trace(write(tmp_path, HEADER + "\n".join(rows) + "\n"), "philly", on_bad_row="skip")
    rep = table.report
    assert table.n == 4 and table.duration_s.tolist() == [3600, 120, 3600, 120]
    assert rep.rows == 2 * 16                                  # blank lines are not rows
    bad = ["short row", "missing value", "unparsable timestamp", "unparsable duration", "negative duration",
           "absurd duration", "bad GPU count"]
    assert dict(rep.skipped) == {k: 2 * sum(w == k for _, w in ONE_OF_EACH) for k in bad}
    # first lines: the header is line 1, so ONE_OF_EACH[i] is on line i + 2
    assert rep.first_bad_line == {k: 2 + [w for _, w in ONE_OF_EACH].index(k) for k in bad}
    assert dict(rep.filtered) == {"CPU-only jobs (0 GPUs)": 2, "jobs shorter than 1 s": 2}


@pytest.mark.parametrize("row, problem", [
    (f"{T0},60", "only 2 fields, the philly layout needs 5"),
    ("junk", "only 1 fields, the philly layout needs 5"),
    (",60,1,0,a", "empty timestamp"),
    (f"{T0},,,0,a", "empty duration, num_gpus"),
    ("soon,60,1,0,a", "timestamp='soon' is not a time (YYYY-MM-DD HH:MM:SS[+HH:MM] or seconds, within 1e+11 s of 1970)"),
    (f"{T0},long,1,0,a", "duration='long' is not a number of seconds"),
    (f"{T0},-5,1,0,a", "duration=-5 seconds: a run time must be finite and >= 0"),
    (f"{T0},inf,1,0,a", "duration=inf seconds: a run time must be finite and >= 0"),
    (f"{T0},1e12,1,0,a", "duration=1e12 seconds is 2.78e+08 h, more than max_duration_h=8760"),
    (f"{T0},60,1.5,0,a", "num_gpus='1.5' must be a whole number >= 0 (at most 1000000)"),
])
def test_a_bad_row_is_an_error_naming_file_line_and_problem(tmp_path, row, problem):
    path = write(tmp_path, HEADER + GOOD + row + "\n")
    with pytest.raises(TraceError) as e:
        read_trace(path, "philly")
    assert str(e.value) == (f"{path}, line 3: {problem} (use on_bad_row='skip' / --on-bad-row skip to drop bad "
                            "rows and count them)")
    assert (e.value.path, e.value.line, e.value.field) == (path, 3, "trace")


def test_a_duration_just_at_the_limits_is_kept(tmp_path):
    rows = f"{T0},1,1,0,a\n{T0},{365 * 24 * 3600},1,0,a\n"       # 1 s (the minimum) and exactly a year
    table = read_trace(write(tmp_path, HEADER + rows), "philly")
    assert table.duration_s.tolist() == [1.0, 365 * 24 * 3600.0]


def test_replay_selection_scaling_and_cluster_sizing_by_hand(tmp_path):
    table = read_trace(write(tmp_path, PHILLY_ROWS), "philly")
    assert table.tenant_names == ["vcB", "vcA", "vcC"]            # in order of first appearance
    sub = table.subset(np.array([0]))
    assert sub.report is table.report and sub.tenant_names == table.tenant_names and sub.n == 1
    # every job, or exactly one: nothing counted as "not selected" when all are kept
    w, rep = replay_trace(table, CFG, jobs=6)
    assert w.n == 6 and "jobs not selected (trace_jobs)" not in rep.filtered
    assert replay_trace(table, CFG, jobs=1)[0].n == 1
    # a seeded sample draws distinct jobs (the six lengths differ)
    for seed in range(10):
        w, _ = replay_trace(table, CFG.replace(seed=seed), jobs=5, sample=True)
        assert len(set(w.length_h.tolist())) == 5
    # doubling demands; and "fit" never scales up, nor under rescale="cluster"
    doubled = replay_trace(table, trace_config(gpus=32), gpu_scale=2.0)[0].gpus
    assert doubled.tolist() == [2, 4, 16, 2, 32, 8] and doubled.dtype.kind == "i"
    w, rep = replay_trace(table, trace_config(gpus=32), gpu_scale="fit")
    assert rep.gpu_scale == 1.0 and w.gpus.tolist() == [1, 2, 8, 1, 16, 4] and w.gpus.dtype.kind == "i"
    w, rep = replay_trace(table, trace_config(gpus=4), gpu_scale="fit", rescale="cluster")
    assert rep.gpu_scale == 1.0 and w.gpus.max() == 16 and w.total_gpus >= 16     # the cluster grows instead
    # the user's estimates: one log-normal error per job, not one for all
    ratios = w.est_length_h / w.length_h
    assert len(set(ratios.round(12).tolist())) == 6


@pytest.mark.parametrize("options, message", [
    ({"jobs": 0}, "trace_jobs=0 is invalid: must be an integer >= 1"),
    ({"jobs": True}, "trace_jobs=True is invalid: must be an integer >= 1"),
    ({"jobs": 2.5}, "trace_jobs=2.5 is invalid: must be an integer >= 1"),
])
def test_bad_trace_jobs(tmp_path, options, message):
    with pytest.raises(ConfigError) as e:
        replay_trace(read_trace(write(tmp_path, PHILLY_ROWS), "philly"), CFG, **options)
    assert str(e.value) == message


def test_demands_above_the_cluster_are_named_with_their_line(tmp_path):
    path = write(tmp_path, PHILLY_ROWS)
    with pytest.raises(TraceError) as e:       # the 16-GPU job of line 6, scaled to 12, on 8 GPUs
        replay_trace(read_trace(path, "philly"), trace_config(gpus=8), gpu_scale=0.75)
    assert str(e.value) == (f"{path}, line 6: the job demands 12 GPUs (16 recorded, x0.75), more than the "
                            "cluster's gpus=8 (1 such jobs); use more GPUs, --trace-gpu-scale, --trace-rescale "
                            "cluster, or --on-bad-row skip")
    big = write(tmp_path, HEADER + f"{T0},60,2,0,a\n{T0},60,4,0,a\n", "big.csv")
    with pytest.raises(TraceError) as e:
        replay_trace(read_trace(big, "philly"), trace_config(gpus=1), on_bad_row="skip")
    assert str(e.value) == f"{big}: every job demands more than the cluster's gpus=1"
    assert (e.value.path, e.value.line, e.value.value) == (big, None, big)


def test_arrival_rescaling_and_cluster_sizing_by_hand(tmp_path):
    # two jobs 30 min apart: 1 h on 2 GPUs and 2 h on 1 GPU, 4 GPU-hours in all over a 0.5 h span
    half = write(tmp_path, HEADER + f"{T0},3600,2,0,a\n2017-10-01 00:30:00,7200,1,0,a\n", "half.csv")
    w, rep = replay_trace(read_trace(half, "philly"), trace_config(gpus=16, load=1.0))
    assert rep.time_factor == pytest.approx(4 / (16 * 1.0 * 0.5)) and w.submit_h.tolist() == [0.0, 0.25]
    w, rep = replay_trace(read_trace(half, "philly"), trace_config(gpus=16, load=1.0), rescale="cluster")
    assert w.total_gpus == math.ceil(4 / (0.5 * 1.0))                      # 8
    # both at one instant: no arrival scaling; the cluster sized over the longest run, 2 h
    once = write(tmp_path, HEADER + f"{T0},3600,2,0,a\n{T0},7200,1,0,a\n", "once.csv")
    w, rep = replay_trace(read_trace(once, "philly"), trace_config(gpus=16))
    assert rep.time_factor == 1.0 and w.submit_h.tolist() == [0.0, 0.0]
    w, _ = replay_trace(read_trace(once, "philly"), trace_config(gpus=16, load=0.5), rescale="cluster")
    assert w.total_gpus == math.ceil(4 / (2.0 * 0.5))                      # 4


def test_job_types_follow_gpu_hours_not_gpus_per_hour():
    # A: 1 GPU x 4 h = 4 GPU-h, B: 4 GPUs x 0.5 h = 2, C: 2 GPUs x 4 h = 8 -> B lora, A dpo, C rlhf
    gpus, hours = np.array([1, 4, 2]), np.array([4.0, 0.5, 4.0])
    types = assign_job_types(gpus * hours, np.zeros(3, int), {"lora": 1 / 3, "dpo": 1 / 3, "rlhf": 1 / 3})
    assert [JOB_TYPES[t] for t in types] == ["dpo", "lora", "rlhf"]
    # a mix without DPO cuts the rest in two
    types = assign_job_types(np.array([1.0, 2.0, 3.0, 4.0]), np.zeros(4, int), {"lora": 0.5, "rlhf": 0.5})
    assert [JOB_TYPES[t] for t in types] == ["lora", "lora", "rlhf", "rlhf"]
    assert trace_config(gpus=1).gpus == 1


def test_read_errors_word_for_word(tmp_path):
    missing = str(tmp_path / "none.csv")
    cases = [
        (missing, "philly", f"{missing}: cannot open the trace: No such file or directory"),
        (write(tmp_path, "", "empty.csv"), "philly",
         f"{tmp_path / 'empty.csv'}: the file is empty (a header row and at least one job are needed)"),
        (write(tmp_path, HEADER, "head.csv"), "philly", f"{tmp_path / 'head.csv'}: the file has a header but no job rows"),
        (write(tmp_path, "when,x\n1,2\n", "cols.csv"), "philly",
         f"{tmp_path / 'cols.csv'}, line 1: missing column(s) timestamp, duration, num_gpus, cluster for the philly "
         "layout (header has: when, x)"),
    ]
    for path, fmt, message in cases:
        with pytest.raises(TraceError) as e:
            read_trace(path, fmt)
        assert str(e.value) == message
    for kw, message in [({"format": "nope"}, "trace_format='nope' is invalid: must be one of philly, helios, acme"),
                        ({"on_bad_row": "ignore"}, "on_bad_row='ignore' is invalid: must be one of error, skip")]:
        with pytest.raises(ConfigError) as e:
            read_trace(write(tmp_path, PHILLY_ROWS), **kw)
        assert str(e.value) == message


def test_a_byte_order_mark_is_not_part_of_the_first_column(tmp_path):
    p = tmp_path / "bom.csv"
    p.write_bytes("\ufeff".encode("utf-8") + PHILLY_ROWS.encode())
    assert read_trace(str(p), "philly").n == 6


def test_load_trace_passes_its_options_and_warns_at_the_caller(tmp_path):
    rows = HEADER + f"{T0},1.5,1,0,a\n{T0},3600,1,0,a\n2017-10-01 01:00:00,600,1,0,a\nbad,60,1,0,a\n"
    path = write(tmp_path, rows)
    with pytest.warns(TraceWarning) as caught:
        w = load_trace(path, config=CFG, on_bad_row="skip")         # the format defaults to philly
    assert w.n == 3                                              # a 1.5 s job is kept by default
    if "MUTANT_UNDER_TEST" not in os.environ:   # mutmut's wrappers add a frame between caller and code
        assert caught[0].filename == __file__   # the warning points at the caller's line
    with pytest.warns(TraceWarning):
        assert load_trace(path, config=CFG, on_bad_row="skip", min_duration_s=2.0).n == 2
    with pytest.warns(TraceWarning):
        assert load_trace(path, config=CFG, on_bad_row="skip", jobs=1).n == 1


def test_replayed_job_types_labels_and_estimates(tmp_path):
    # PHILLY_ROWS by submit time: 0.5, 4, 8, 0.1, 160, 1 GPU-hours; a balanced mix cuts them in thirds:
    # LoRA 0.1 and 0.5, DPO 1 and 4, RLHF 8 and 160
    w, _ = replay_trace(read_trace(write(tmp_path, PHILLY_ROWS), "philly"), CFG.replace(workload="balanced"))
    assert [JOB_TYPES[t] for t in w.job_type] == ["lora", "dpo", "rlhf", "lora", "rlhf", "dpo"]
    # sixty RLHF-heavy jobs: one hacking draw and one estimate error per job
    rows = "".join(f"2017-10-01 {i // 6:02d}:{i % 6 * 10:02d}:00,{600 + 97 * i},1,0,a\n" for i in range(60))
    w, _ = replay_trace(read_trace(write(tmp_path, HEADER + rows, "sixty.csv"), "philly"),
                        CFG.replace(hacking_fraction=0.5, estimate_error=0.5))
    rlhf = w.job_type == JOB_TYPES.index("rlhf")
    assert 0 < w.hacking.sum() < rlhf.sum() and not w.hacking[~rlhf].any()
    assert 0.3 < np.log(w.est_length_h / w.length_h).std() < 0.7


def test_load_trace_passes_the_duration_limit(tmp_path):
    path = write(tmp_path, HEADER + f"{T0},7200,1,0,a\n{T0},600,1,0,a\n")
    with pytest.raises(TraceError, match="more than max_duration_h=1"):
        load_trace(path, config=CFG, max_duration_h=1)
