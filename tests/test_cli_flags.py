"""Every flag of ``simulate``, ``evaluate``, ``reproduce`` and ``train`` reaches the code.

For each flag: the CLI's output equals the Python API's result with the same
parameters, and differs from the output without the flag, so a flag the CLI
parses and then silently drops fails here. A last test per command lists the
parser's flags and fails if one has no case here.
"""

import json

import numpy as np
import pytest

from evalstop_gym.baselines import make_policy
from evalstop_gym import WorkloadConfig, run_policy, simulate
from evalstop_gym.cli import build_parser, main
from evalstop_gym.cluster import uniform
from evalstop_gym.curvelog import apply_curve_log, read_curve_log, write_curve_log
from evalstop_gym.traces import read_trace, replay_trace, trace_config


def subparser(name):
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sub.choices[name]


def flags_of(command):
    return {s for a in subparser(command)._actions for s in a.option_strings if s.startswith("--")} - {"--help"}


def run_cli(capsys, argv, code=0):
    assert main(argv) == code, capsys.readouterr().err
    return capsys.readouterr()


# -- simulate ------------------------------------------------------------------------------

SIM = ["simulate", "--json", "--jobs", "40", "--seed", "3"]
SIM_API = dict(jobs=40, seed=3)

# flag -> (context flags, the flag with its value, API keywords of the context, API keywords of the flag);
# the context picks the stopper the flag belongs to
SIMULATE_CASES = {
    "--workload": ([], ["--workload", "balanced"], {}, {"workload": "balanced"}),
    "--jobs": ([], ["--jobs", "25"], {}, {"jobs": 25}),
    "--gpus": ([], ["--gpus", "32"], {}, {"gpus": 32}),
    "--load": ([], ["--load", "1.7"], {}, {"load": 1.7}),
    "--noise": (["--stopper", "evalstop"], ["--noise", "0.1"], {"stopper": "evalstop"}, {"noise": 0.1}),
    "--hacking-fraction": (["--stopper", "evalstop"], ["--hacking-fraction", "0.2"], {"stopper": "evalstop"},
                           {"hacking_fraction": 0.2}),
    "--evals-per-job": (["--stopper", "evalstop"], ["--evals-per-job", "20"], {"stopper": "evalstop"},
                        {"evals_per_job": 20}),
    "--seed": ([], ["--seed", "4"], {}, {"seed": 4}),
    "--estimate-error": (["--scheduler", "srtf-est"], ["--estimate-error", "0"], {"scheduler": "srtf-est"},
                         {"estimate_error": 0.0}),
    "--calibration": ([], ["--calibration", "realistic"], {}, {"calibration": "realistic"}),
    "--cluster": ([], ["--cluster", "two-types"], {}, {"cluster": "two-types"}),
    "--nodes": (["--scheduler", "srtf-est"], ["--nodes", "4"], {"scheduler": "srtf-est"}, {"cluster": uniform(4, 16)}),
    "--gpus-per-node": (["--scheduler", "srtf-est"], ["--gpus-per-node", "16"], {"scheduler": "srtf-est"},
                        {"cluster": uniform(4, 16)}),
    "--scheduler": ([], ["--scheduler", "tiresias"], {}, {"scheduler": "tiresias"}),
    "--stopper": ([], ["--stopper", "evalstop"], {}, {"stopper": "evalstop"}),
    "--k": (["--stopper", "evalstop"], ["--k", "1"], {"stopper": "evalstop"}, {"k": 1}),
    "--stop-progress": (["--stopper", "stopat"], ["--stop-progress", "0.3"], {"stopper": "stopat"}, {"p": 0.3}),
    "--window": (["--stopper", "lossplateau"], ["--window", "1"], {"stopper": "lossplateau"}, {"window": 1}),
    "--tolerance": (["--stopper", "lossplateau"], ["--tolerance", "0.2"], {"stopper": "lossplateau"},
                    {"tolerance": 0.2}),
    "--patience": (["--stopper", "patience"], ["--patience", "1"], {"stopper": "patience"}, {"patience": 1}),
    "--min-delta": (["--stopper", "patience"], ["--min-delta", "0.05"], {"stopper": "patience"},
                    {"min_delta": 0.05}),
    "--threshold": (["--stopper", "cusum"], ["--threshold", "0.5"], {"stopper": "cusum"}, {"threshold": 0.5}),
    "--drift": (["--stopper", "cusum", "--threshold", "0.5"], ["--drift", "1.0"],
                {"stopper": "cusum", "threshold": 0.5}, {"drift": 1.0}),
    "--sigma": (["--stopper", "cusum"], ["--sigma", "0.005"], {"stopper": "cusum"}, {"sigma": 0.005}),
}
# flags that two stoppers share: the second stopper's reading is checked too
SHARED_STOPPER_CASES = {
    "--window smoothed": (["--stopper", "smoothed"], ["--window", "6"], {"stopper": "smoothed"}, {"window": 6}),
    "--threshold smoothed": (["--stopper", "smoothed"], ["--threshold", "2"], {"stopper": "smoothed"},
                             {"threshold": 2.0}),
    "--sigma smoothed": (["--stopper", "smoothed", "--threshold", "1"], ["--sigma", "0.1"],   # threshold 0
                         {"stopper": "smoothed", "threshold": 1.0}, {"sigma": 0.1}),        # ignores sigma
}


def default_of(command, dest):
    """The CLI's default for a flag: the API call is made with the same value."""
    return subparser(command).get_default(dest)


def api_simulate(scheduler=None, stopper="none", **params):
    return simulate(scheduler or default_of("simulate", "scheduler"), stopper, **{**SIM_API, **params})


@pytest.mark.parametrize("case", [*SIMULATE_CASES, *SHARED_STOPPER_CASES])
def test_simulate_flag_reaches_the_simulation(capsys, case):
    context, flag, api_context, api_flag = {**SIMULATE_CASES, **SHARED_STOPPER_CASES}[case]
    got = json.loads(run_cli(capsys, [*SIM, *context, *flag]).out)
    assert got == api_simulate(**api_context, **api_flag)
    without = json.loads(run_cli(capsys, [*SIM, *context]).out)
    assert without == api_simulate(**api_context)
    assert got != without, f"{case} changed nothing: pick a value that matters"


# a tiny Philly-layout trace: 40 jobs, some at equal times, demands 1-8 GPUs, 5 min to 5 h
def philly_text(rows=40, bad_line=False):
    lines = ["timestamp,duration,num_gpus,gpu_time,cluster"]
    for i in range(rows):
        minute = (i * 37) % 60
        hour = i // 3
        dur = 300 + (i * 2741) % 18000
        gpus = (1, 2, 4, 8, 1, 1, 2)[i % 7]
        lines.append(f"2017-10-01 {hour:02d}:{minute:02d}:00,{dur},{gpus},{dur * gpus},vc{i % 3}")
    if bad_line:
        lines.append("2017-10-01 25:99:00,60,1,60,vc0")
    return "\n".join(lines) + "\n"


HELIOS_TEXT = "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n" + "".join(
    f"{i},u{i % 2},vc{i % 3},{(1, 2, 4)[i % 3]},4,1,COMPLETED,2020-06-09 {10 + i // 4:02d}:{(i * 13) % 60:02d}:00,"
    f",,{600 + 997 * i % 9000},0\n" for i in range(30))


@pytest.fixture
def trace_files(tmp_path):
    files = {}
    for name, text in (("philly.csv", philly_text()), ("bad.csv", philly_text(bad_line=True)),
                       ("helios.csv", HELIOS_TEXT)):
        (tmp_path / name).write_text(text)
        files[name] = str(tmp_path / name)
    return files


def api_trace(path, fmt="philly", on_bad_row="error", min_duration_s=1.0, stopper="evalstop", **replay):
    """The Python API's replay: read, replay on a trace config, run the policy."""
    cfg = trace_config(jobs=40, seed=3, gpus=16)
    table = read_trace(path, fmt, on_bad_row=on_bad_row, min_duration_s=min_duration_s)
    w, _ = replay_trace(table, cfg, on_bad_row=on_bad_row, **replay)
    return run_policy(w, make_policy(default_of("simulate", "scheduler"), stopper))


TRACE = ["simulate", "--json", "--jobs", "40", "--seed", "3", "--gpus", "16", "--stopper", "evalstop"]

# flag -> (flags, API keywords); each is compared with the same replay without the flag
TRACE_CASES = {
    "--trace-jobs": (["--trace-jobs", "15"], {"jobs": 15}),
    "--trace-sample": (["--trace-jobs", "15", "--trace-sample"], {"jobs": 15, "sample": True}),
    "--trace-window": (["--trace-window", "2:9"], {"window": "2:9"}),
    "--trace-rescale": (["--trace-rescale", "none"], {"rescale": "none"}),
    "--trace-gpu-scale": (["--trace-gpu-scale", "0.5"], {"gpu_scale": 0.5}),
    "--trace-min-duration": (["--trace-min-duration", "3000"], {"min_duration_s": 3000.0}),
}


@pytest.mark.parametrize("case", TRACE_CASES)
def test_trace_flag_reaches_the_replay(capsys, trace_files, case):
    flag, api = TRACE_CASES[case]
    path = trace_files["philly.csv"]
    got = json.loads(run_cli(capsys, [*TRACE, "--trace", path, *flag]).out)
    assert got == api_trace(path, **api)
    without = json.loads(run_cli(capsys, [*TRACE, "--trace", path]).out)
    if case == "--trace-sample":           # the first 15 jobs, not a sample of 15
        without = json.loads(run_cli(capsys, [*TRACE, "--trace", path, "--trace-jobs", "15"]).out)
    assert got != without


def test_tie_flag_picks_the_base_schedulers_tie_rule(capsys, trace_files):
    """--tie arrival is make_policy(..., tie="arrival"); on this trace it moves tiresias (equal submit times)."""
    path = trace_files["philly.csv"]
    cfg = trace_config(jobs=40, seed=3, gpus=16)
    w, _ = replay_trace(read_trace(path, "philly"), cfg)
    runs = {tie: json.loads(run_cli(capsys, [*TRACE, "--trace", path, "--scheduler", "tiresias", "--tie", tie]).out)
            for tie in ("running", "arrival")}
    for tie, got in runs.items():
        assert got == run_policy(w, make_policy("tiresias", "evalstop", tie=tie))
    assert runs["arrival"] != runs["running"]
    default = json.loads(run_cli(capsys, [*TRACE, "--trace", path, "--scheduler", "tiresias"]).out)
    assert default == runs["running"]
    generated = json.loads(run_cli(capsys, [*SIM, "--scheduler", "tiresias", "--tie", "arrival"]).out)
    assert generated == api_simulate(make_policy("tiresias", "none", tie="arrival"))
    assert generated != json.loads(run_cli(capsys, [*SIM, "--scheduler", "tiresias"]).out)   # it moves here too
    with pytest.raises(SystemExit) as bad:
        main([*SIM, "--tie", "newest"])
    assert bad.value.code == 2 and "invalid choice: 'newest'" in capsys.readouterr().err


def test_trace_gpu_scale_fit_and_rescale_cluster(capsys, trace_files):
    path = trace_files["philly.csv"]
    small = ["--gpus", "4"]     # the trace's 8-GPU jobs do not fit: fit scales them by 4 / 8
    got = json.loads(run_cli(capsys, [*TRACE, *small, "--trace", path, "--trace-gpu-scale", "fit"]).out)
    cfg = trace_config(jobs=40, seed=3, gpus=4)
    w, rep = replay_trace(read_trace(path, "philly"), cfg, gpu_scale="fit")
    assert rep.gpu_scale == 0.5 and got == run_policy(w, make_policy(default_of("simulate", "scheduler"), "evalstop"))
    got = json.loads(run_cli(capsys, [*TRACE, "--trace", path, "--trace-rescale", "cluster"]).out)
    assert got == api_trace(path, rescale="cluster") != api_trace(path)


def test_trace_flag_itself_and_format_and_bad_rows(capsys, trace_files):
    philly, helios, bad = trace_files["philly.csv"], trace_files["helios.csv"], trace_files["bad.csv"]
    got = json.loads(run_cli(capsys, [*TRACE, "--trace", philly]).out)
    assert got == api_trace(philly) != json.loads(run_cli(capsys, TRACE).out)
    # --trace-format: the Helios file read as Helios; read as Philly (the default) it is an error
    got = json.loads(run_cli(capsys, [*TRACE, "--trace", helios, "--trace-format", "helios"]).out)
    assert got == api_trace(helios, "helios")
    assert "missing column" in run_cli(capsys, [*TRACE, "--trace", helios], code=2).err
    # --on-bad-row skip: the bad row is dropped; by default it is an error
    got = json.loads(run_cli(capsys, [*TRACE, "--trace", bad, "--on-bad-row", "skip"]).out)
    assert got == api_trace(bad, on_bad_row="skip") == api_trace(philly)
    assert "line 42" in run_cli(capsys, [*TRACE, "--trace", bad], code=2).err


def curve_rows():
    x = np.linspace(0, 1, 21)
    hack, ok = 0.1 + 0.5 * np.sin(np.pi * x), 0.1 + 0.7 * x
    return [{"job": name, "step": float(s), "eval_score": float(curve[s]), "gold": float(curve[s])}
            for name, curve in (("hack", hack), ("ok", ok)) for s in range(21)]   # gold: the runs are labelled


def test_curves_and_curves_format_reach_the_replay(capsys, tmp_path):
    log = tmp_path / "lib.jsonl"
    write_curve_log(str(log), curve_rows())
    unnamed = tmp_path / "lib.log"               # no extension: only --curves-format says what it is
    unnamed.write_text(log.read_text())
    ctx = ["--stopper", "evalstop"]
    cfg = WorkloadConfig(jobs=40, seed=3)
    from evalstop_gym.workload import generate

    expected = run_policy(apply_curve_log(generate(cfg), read_curve_log(str(log)), seed=3),
                          make_policy(default_of("simulate", "scheduler"), "evalstop"))
    got = json.loads(run_cli(capsys, [*SIM, *ctx, "--curves", str(log)]).out)
    assert got == expected != api_simulate(stopper="evalstop")
    got = json.loads(run_cli(capsys, [*SIM, *ctx, "--curves", str(unnamed), "--curves-format", "jsonl"]).out)
    assert got == expected
    assert "unknown curve-log type" in run_cli(capsys, [*SIM, *ctx, "--curves", str(unnamed)], code=2).err


def test_curves_metric_and_mode_reach_the_replay(capsys, tmp_path):
    from evalstop_gym.logs.logged import read_runs
    from evalstop_gym.workload import generate

    log = tmp_path / "metrics.csv"   # a Lightning CSVLogger file: two eval metrics, val_loss by default
    x = np.linspace(0, 1, 11)
    log.write_text("step,val_acc,val_loss\n" + "".join(f"{10 * i},{0.5 + 0.3 * np.sin(3 * v)},{1 - 0.5 * v}\n"
                                                         for i, v in enumerate(x)))
    ctx = ["--stopper", "evalstop", "--curves", str(log)]
    policy = make_policy(default_of("simulate", "scheduler"), "evalstop")

    def expected(metric=None, mode="auto"):   # no gold in the log: the detection figures are not measured
        from evalstop_gym.commands.simulate import without_labels

        return without_labels(run_policy(apply_curve_log(generate(WorkloadConfig(jobs=40, seed=3)),
                                                         read_runs(str(log), metric, mode), seed=3), policy))

    default = json.loads(run_cli(capsys, [*SIM, *ctx]).out)
    assert default == expected()
    got = json.loads(run_cli(capsys, [*SIM, *ctx, "--curves-metric", "val_acc"]).out)
    assert got == expected("val_acc") != default
    got = json.loads(run_cli(capsys, [*SIM, *ctx, "--curves-mode", "max"]).out)
    assert got == expected(None, "max") != default
    assert "--curves-metric does nothing without --curves" in run_cli(capsys, [*SIM, "--curves-metric", "x"], code=2).err


def test_every_simulate_flag_has_a_case():
    # --json: tests/test_cli.py compares the table with the JSON, value by value
    # --placement goes with --nodes or --cluster (both set `cluster`): tests/test_placement.py,
    # test_cli_cluster_flags_match_the_python_api, compares it with the API
    covered = {*SIMULATE_CASES, *TRACE_CASES, "--json", "--tie", "--trace", "--trace-format", "--on-bad-row", "--curves",
               "--curves-format", "--curves-metric", "--curves-mode", "--placement"}
    assert flags_of("simulate") <= covered, flags_of("simulate") - covered


# -- evaluate ------------------------------------------------------------------------------

EVAL = ["evaluate", "--json", "--policy", "evalstop", "--seeds", "1", "--jobs", "30"]
WORKLOAD_FLAGS = {   # flag -> (value on the command line, WorkloadConfig field, value there)
    "--workload": ("balanced", "workload", "balanced"),
    "--jobs": ("25", "jobs", 25),
    "--gpus": ("32", "gpus", 32),
    "--load": ("1.7", "load", 1.7),
    "--noise": ("0.1", "noise", 0.1),
    "--hacking-fraction": ("0.2", "hacking_fraction", 0.2),
    "--evals-per-job": ("20", "evals_per_job", 20),
    "--seed": ("5", "seed", 5),
    "--calibration": ("realistic", "calibration", "realistic"),
}
# the cluster flags set `cluster` (and `gpus`) together and exclude one another: their cases are the
# simulate ones above, through the same add_workload_flags / workload_kwargs code
CLUSTER_FLAGS = {"--cluster", "--nodes", "--gpus-per-node", "--placement"}


def api_evaluate(policies=("evalstop",), scheduler=None, seeds=1, **wl):
    from evalstop_gym.agents.evaluate import evaluate

    scheduler = scheduler or default_of("evaluate", "scheduler")
    wl = {"jobs": 30, **wl}
    first = wl.pop("seed", 0)
    ev = evaluate(list(policies), scheduler=scheduler, seeds=seeds, first_seed=first, base=WorkloadConfig(**wl))
    return ev, json.loads(json.dumps(ev.rows))      # as printed: NaN and tuples as JSON has them


EVALUATE_CASES = {
    "--policy": (["--policy", "srtf-est+cusum:threshold=1"], {"policies": ("evalstop", "srtf-est+cusum:threshold=1")}),
    "--scheduler": (["--scheduler", "fifo"], {"scheduler": "fifo"}),
    "--seeds": (["--seeds", "2"], {"seeds": 2}),
    **{flag: ([flag, text], {name: value}) for flag, (text, name, value) in WORKLOAD_FLAGS.items()},
}


@pytest.mark.parametrize("case", EVALUATE_CASES)
def test_evaluate_flag_reaches_the_evaluation(capsys, case):
    flag, api = EVALUATE_CASES[case]
    got = json.loads(run_cli(capsys, [*EVAL, *flag]).out)
    assert got == api_evaluate(**api)[1]
    assert got != api_evaluate()[1] == json.loads(run_cli(capsys, EVAL).out)


def test_evaluate_out_and_table(capsys, tmp_path):
    from evalstop_gym.experiments.tables import csv_table

    ev, _ = api_evaluate()
    table = run_cli(capsys, [a for a in EVAL if a != "--json"] + ["--out", str(tmp_path / "o")]).out
    assert ev.table in table and "held-out seeds 0-0 (n = 1)" in table   # no --json: the Markdown table
    assert (tmp_path / "o" / "evaluate.csv").read_text() == csv_table(ev.experiment, ev.rows)
    assert ev.table in (tmp_path / "o" / "evaluate.md").read_text()


def test_every_evaluate_flag_has_a_case():
    covered = {*EVALUATE_CASES, "--json", "--out", *CLUSTER_FLAGS}
    assert flags_of("evaluate") <= covered, flags_of("evaluate") - covered


# -- reproduce -----------------------------------------------------------------------------

REPRO = ["reproduce", "--experiments", "E5", "--jobs", "20", "--seeds", "1", "--workers", "1", "--no-progress"]


def outputs(out):
    """What a reproduce run leaves: its records by run id, and its CSV tables by name."""
    records = {}
    if (out / "runs.jsonl").exists():
        for line in (out / "runs.jsonl").read_text().splitlines():
            r = json.loads(line)
            records[r["run_id"]] = r
    return records, {p.name: p.read_text() for p in sorted(out.glob("*.csv"))}


def cli_reproduce(capsys, out, *flags):
    run_cli(capsys, [*REPRO, "--out", str(out), *flags])
    return outputs(out)


def api_reproduce(out, names=("E5",), seeds=1, jobs=20, first_seed=0, workers=1, **kw):
    from evalstop_gym.experiments import reproduce

    wl = kw.pop("workload", {})
    reproduce(list(names), seeds=seeds, first_seed=first_seed, out=out, base=WorkloadConfig(jobs=jobs, **wl),
              workers=workers, progress=False, echo=lambda _: None, **kw)
    return outputs(out)


REPRODUCE_CASES = {
    "--experiments": (["--experiments", "E7"], {"names": ("E7",)}),
    "--seeds": (["--seeds", "2"], {"seeds": 2}),
    "--base-scheduler": (["--base-scheduler", "fifo"], {"base_scheduler": "fifo"}),
    "--detectors": (["--experiments", "E1", "--detectors", "patience"], {"names": ("E1",), "detectors": ["patience"]}),
    "--max-runs": (["--max-runs", "2"], {"max_runs": 2}),
    # the large preset's 5,000-job, 1,024-GPU workload, one run of it
    "--scale": (["--scale", "large", "--max-runs", "1"], {"max_runs": 1, "jobs": 5000, "workload": {"gpus": 1024}}),
}


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)          # a dropped --out would write ./results here, not in the repo
    return tmp_path


@pytest.fixture
def default_reproduce(in_tmp, capsys):
    return cli_reproduce(capsys, in_tmp / "default")


@pytest.mark.parametrize("case", REPRODUCE_CASES)
def test_reproduce_flag_reaches_the_suite(capsys, in_tmp, default_reproduce, case):
    flag, api = REPRODUCE_CASES[case]
    if case == "--detectors":     # compared with E1 and its default detectors
        default_reproduce = cli_reproduce(capsys, in_tmp / "default-e1", "--experiments", "E1")
    got = cli_reproduce(capsys, in_tmp / "cli", *flag)
    assert got == api_reproduce(in_tmp / "api", **api)
    assert got != default_reproduce
    assert not (in_tmp / "results").exists()
    assert default_reproduce == api_reproduce(in_tmp / "api-default", **({"names": ("E1",)} if case == "--detectors"
                                                                           else {}))


def test_reproduce_workload_flags_reach_every_run(capsys, in_tmp, default_reproduce):
    argv, fields = [], {}
    for flag, (text, name, value) in WORKLOAD_FLAGS.items():
        argv += [flag, text]
        fields[name] = value
    got = cli_reproduce(capsys, in_tmp / "cli", *argv)
    first = fields.pop("seed")
    jobs = fields.pop("jobs")
    assert got == api_reproduce(in_tmp / "api", jobs=jobs, first_seed=first, workload=fields)
    records = got[0].values()
    assert len(records) == len(default_reproduce[0]) > 0
    for r in records:      # each flag's value is in every run's workload
        for flag, (_, name, value) in WORKLOAD_FLAGS.items():
            assert r["spec"]["workload"][name] == value, flag


def test_reproduce_backend_and_workers_reach_the_runner(capsys, in_tmp, default_reproduce, monkeypatch):
    """Backend and workers change where runs go, not results: the runner is asked for them (and runs
    inline here, so the test starts neither Ray nor a pool)."""
    from evalstop_gym.experiments import runner, suite

    asked = []

    def spy(specs, store, *, backend="local", workers=1, ray_address=None, **kw):
        asked.append((backend, workers, ray_address))
        return runner.run_sweep(specs, store, backend="local", workers=1, **kw)

    monkeypatch.setattr(suite, "run_sweep", spy)
    got = cli_reproduce(capsys, in_tmp / "cli", "--backend", "ray", "--workers", "3", "--ray-address", "127.0.0.1:1")
    assert asked == [("ray", 3, "127.0.0.1:1")] and got == default_reproduce
    asked.clear()
    cli_reproduce(capsys, in_tmp / "cli2")
    assert asked == [("local", 1, None)]


def test_reproduce_out_and_progress(capsys, in_tmp, monkeypatch):
    import sys

    argv = [a for a in REPRO if a != "--no-progress"]
    assert main([*argv, "--out", "piped"]) == 0
    assert "reproduce" not in capsys.readouterr().err   # stderr is not a terminal: no bar
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert main([*argv, "--out", "here"]) == 0
    err = capsys.readouterr().err
    assert "reproduce: 100%" in err                   # the progress bar, on stderr
    assert (in_tmp / "here" / "E5.csv").is_file() and not (in_tmp / "results").exists()
    for flag, out in (("--no-progress", "there"), ("--quiet", "quiet")):
        assert main([*argv, "--out", out, flag]) == 0
        assert "reproduce" not in capsys.readouterr().err
        assert outputs(in_tmp / "here") == outputs(in_tmp / out)


def test_every_reproduce_flag_has_a_case():
    covered = {*REPRODUCE_CASES, *WORKLOAD_FLAGS, "--backend", "--workers", "--ray-address", "--out", "--no-progress",
               "--force",   # tests/test_results_worlds.py
               "--quiet", "--strict",   # tests/test_experiments_verdicts.py
               "--model", *CLUSTER_FLAGS}
    assert flags_of("reproduce") <= covered, flags_of("reproduce") - covered
