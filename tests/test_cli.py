"""The command line: JSON output, determinism, and one-line errors with exit code 2."""

import json
import os
import subprocess
import sys

import pytest

import evalstop_gym
import evalstop_gym.cli
from evalstop_gym.metrics import METRIC_KEYS

REQUIRED = ("avg_jct_h", "p99_jct_h", "makespan_h", "compute_waste_gpu_h", "utilization", "precision",
            "recall", "fpr", "jobs_stopped", "delivered_quality_regret")


def cli(*args):
    return subprocess.run([sys.executable, "-m", "evalstop_gym.cli", *args], capture_output=True, text=True)


def test_json_is_exactly_one_object_with_the_metrics():
    r = cli("simulate", "--stopper", "evalstop", "--jobs", "30", "--seed", "4", "--json")
    assert r.returncode == 0, r.stderr
    m = json.loads(r.stdout)
    assert all(k in m for k in REQUIRED)
    assert m == evalstop_gym.simulate("srtf-est", "evalstop", jobs=30, seed=4)   # srtf-est: the default


def test_one_default_scheduler_everywhere():
    import gymnasium as gym

    from evalstop_gym.api import DEFAULT_SCHEDULER
    from evalstop_gym.cli import build_parser

    assert DEFAULT_SCHEDULER == "srtf-est"   # the paper's base
    parser = build_parser()
    assert parser.parse_args(["simulate"]).scheduler == DEFAULT_SCHEDULER
    assert parser.parse_args(["evaluate", "--policy", "evalstop"]).scheduler == DEFAULT_SCHEDULER
    assert parser.parse_args(["curves", "compare", "--curves", "x"]).scheduler == DEFAULT_SCHEDULER
    assert gym.make("EvalStop-StopControl-v0").unwrapped.scheduler_name == DEFAULT_SCHEDULER
    from evalstop_gym.experiments.spec import build_suite

    (e1,) = build_suite(["E1"])
    assert {p.scheduler for p in e1.points} == {DEFAULT_SCHEDULER}


def test_same_seed_identical_json_different_seed_differs():
    a = cli("simulate", "--stopper", "evalstop", "--jobs", "40", "--seed", "7", "--json").stdout
    b = cli("simulate", "--stopper", "evalstop", "--jobs", "40", "--seed", "7", "--json").stdout
    c = cli("simulate", "--stopper", "evalstop", "--jobs", "40", "--seed", "8", "--json").stdout
    assert a == b and a != c


def test_table_shows_every_metric_as_the_json_has_it():
    args = ("simulate", "--jobs", "40", "--seed", "3", "--stopper", "evalstop")
    table, m = cli(*args).stdout, json.loads(cli(*args, "--json").stdout)
    scheduler = evalstop_gym.cli.build_parser().parse_args(args).scheduler     # the CLI's default
    assert table.splitlines()[0] == f"{scheduler} + evalstop on rlhf-heavy, seed 3"
    cells = dict((c.strip() for c in line.strip("|").split("|")) for line in table.splitlines()[3:])
    assert list(cells) == list(METRIC_KEYS)          # title, header, rule, then one row per metric in order
    for k, v in m.items():
        assert cells[k] == ("n/a" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)), k
    assert m["gpu_hours"] > 1000                     # a value tabulate would round to 6 digits on its own


@pytest.mark.parametrize("args, field", [
    (["--workload", "nope"], "workload"),
    (["--scheduler", "nope"], "scheduler"),
    (["--stopper", "nope"], "stopper"),
    (["--gpus", "0"], "gpus"),
    (["--gpus", "-3"], "gpus"),
    (["--gpus", "8"], "gpus"),                 # an RLHF job may need 16 GPUs
    (["--noise", "-0.1"], "noise"),
    (["--hacking-fraction", "1.5"], "hacking_fraction"),
    (["--hacking-fraction", "-0.1"], "hacking_fraction"),
    (["--stopper", "evalstop", "--k", "0"], "k"),
    (["--jobs", "0"], "jobs"),
    (["--evals-per-job", "0"], "evals_per_job"),
    (["--load", "0"], "load"),
    (["--seed", "-1"], "seed"),
    (["--jobs", "ten"], "--jobs"),             # argparse's own type check
])
def test_bad_input_one_line_error_exit_2(args, field):
    r = cli("simulate", *args)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
    assert field in lines[-1]
    assert r.stdout == ""



def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path, monkeypatch):
    """`evalstop-gym simulate | head -1`: stdout's reader left, so writing raises BrokenPipeError; the
    command ends with the shell's exit code for SIGPIPE instead of a traceback."""
    from evalstop_gym.cli import main

    class ClosedPipe:
        def __init__(self, fd):
            self.fd = fd

        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            pass

        def fileno(self):
            return self.fd

    fd = os.open(tmp_path / "stdout", os.O_WRONLY | os.O_CREAT)
    try:
        monkeypatch.setattr(sys, "stdout", ClosedPipe(fd))
        assert main(["simulate", "--jobs", "20"]) == 141
    finally:
        os.close(fd)
