"""Processes and writes: pools start no more workers than tasks and CPUs and end with their parent; a Ray
address that does not answer fails fast; files are written all or nothing, and a full disk is one line."""

import errno
import io
import json
import os
import signal
import subprocess
import sys
import time
import zipfile

import pytest

from evalstop_gym import files
from evalstop_gym.cli import main
from evalstop_gym.config import ConfigError
from evalstop_gym.processes import cap_workers, cpu_count
from test_reliability_reproduce import _alive, _children


@pytest.mark.parametrize("workers, tasks", [(1_000_000, 12), (3, 1), (1, 50), (8, 0)])
def test_workers_are_capped_by_the_tasks_and_the_cpus(workers, tasks):
    assert cap_workers(workers, tasks) == max(1, min(workers, tasks, cpu_count()))


@pytest.mark.parametrize("workers", [0, -1, 1.5, True, "2"])
def test_a_bad_worker_count_is_a_config_error(workers):
    with pytest.raises(ConfigError, match="workers"):
        cap_workers(workers, 4)


def test_reproduce_with_a_million_workers_starts_at_most_one_per_cpu(tmp_path, monkeypatch, capsys):
    from evalstop_gym.experiments import runner

    started = []

    class Recording(runner.ProcessPoolExecutor):
        def __init__(self, max_workers=None, **kw):
            started.append(max_workers)
            super().__init__(max_workers=max_workers, **kw)

    monkeypatch.setattr(runner, "ProcessPoolExecutor", Recording)
    assert main(["reproduce", "--experiments", "E5", "--jobs", "20", "--seeds", "1", "--no-progress",
                 "--workers", "1000000", "--out", str(tmp_path)]) == 0
    assert started and max(started) <= cpu_count()
    capsys.readouterr()


def wait_for(predicate, timeout_s):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_kill_9_of_curves_generate_leaves_no_worker_running(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "evalstop_gym.cli", "curves", "generate", "--out",
                             str(tmp_path / "lib"), "--runs", "4", "--workers", "2", "--steps", "400"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers = []
    try:
        def pool_started():
            workers[:] = _children(proc.pid)
            return len(workers) >= 2 or proc.poll() is not None
        assert wait_for(pool_started, 120) and proc.poll() is None, "the generator ended before it could be killed"
        time.sleep(1.0)   # let the workers get past their start-up
        workers[:] = _children(proc.pid)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    wait_for(lambda: not any(_alive(w) for w in workers), 5)
    orphans = [w for w in workers if _alive(w)]
    for w in orphans:   # do not leave them running if the check fails
        os.kill(w, signal.SIGKILL)
    assert not orphans


def test_a_ray_address_that_does_not_answer_fails_within_ten_seconds():
    from evalstop_gym.experiments.runner import check_ray_address

    t0 = time.monotonic()
    with pytest.raises(ConfigError, match="ray_address='127.0.0.1:1' is invalid: does not answer"):
        check_ray_address("127.0.0.1:1")
    with pytest.raises(ConfigError, match="does not answer"):
        check_ray_address("ray://localhost:1", timeout_s=1.0)
    assert time.monotonic() - t0 < 10
    for bad in ("nohost", "host:port", "host:99999"):
        with pytest.raises(ConfigError, match="HOST:PORT"):
            check_ray_address(bad)


def test_reproduce_on_a_silent_ray_address_is_one_line_within_ten_seconds(tmp_path, capsys):
    pytest.importorskip("ray")
    t0 = time.monotonic()
    assert main(["reproduce", "--experiments", "E5", "--jobs", "20", "--seeds", "1", "--no-progress",
                 "--backend", "ray", "--ray-address", "127.0.0.1:1", "--out", str(tmp_path)]) == 2
    assert time.monotonic() - t0 < 10
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not answer" in err


class FullDisk(io.FileIO):
    """A file whose writes fail as on a full disk (``ENOSPC``) once ``room`` bytes are written."""

    room = 0

    def write(self, data):
        if len(data) > self.room:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.room -= len(data)
        return super().write(data)


def fill_disk(monkeypatch, room):
    """``os.fdopen`` (how every atomic write opens its temporary file) gives files on a disk with ``room`` bytes."""
    def fdopen(fd, mode="r", encoding=None, newline=None, **kw):
        raw = FullDisk(fd, "wb")
        raw.room = room
        buffered = io.BufferedWriter(raw)
        return buffered if "b" in mode else io.TextIOWrapper(buffered, encoding=encoding, newline=newline)
    monkeypatch.setattr(files.os, "fdopen", fdopen)


@pytest.fixture
def full_disk(monkeypatch):
    fill_disk(monkeypatch, 100)


def error_lines(err):
    return [ln for ln in err.splitlines() if "error:" in ln or "Traceback" in ln]


def leftovers(folder):
    return sorted(p.name for p in folder.rglob("*") if p.name.endswith(".tmp"))


def test_an_atomic_write_on_a_full_disk_keeps_the_old_file_and_no_temporary(tmp_path, full_disk):
    target = tmp_path / "table.md"
    target.write_text("old")
    with pytest.raises(ConfigError, match=r"table.md.*No space left on device.*nothing half-written"):
        files.write_atomic(target, "x" * 10_000)
    assert target.read_text() == "old" and leftovers(tmp_path) == []


def test_evaluate_out_on_a_full_disk_is_one_line_and_writes_nothing(tmp_path, capsys, full_disk):
    out = tmp_path / "ev"
    assert main(["evaluate", "--policy", "evalstop", "--seeds", "1", "--jobs", "10", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No space left on device" in err and "evaluate.md" in err
    assert sorted(p.name for p in out.iterdir()) == []


def test_curves_generate_reports_and_records_the_workers_it_used(tmp_path, capsys, monkeypatch):
    from evalstop_gym.overopt import library

    monkeypatch.setattr(library, "run", lambda settings: [
        {"job": settings.name, "step": s, "eval_score": 0.1 * s, "gold": 0.1 * s, "kl": s} for s in range(20)])
    out = tmp_path / "lib"
    assert main(["curves", "generate", "--out", str(out), "--runs", "1", "--workers", "64"]) == 0
    assert "with 1 workers" in capsys.readouterr().out   # one run: one worker, whatever was asked
    assert json.loads((out / "runs.json").read_text())["workers"] == 1


def test_a_fifo_as_a_curve_log_is_refused_at_once(tmp_path, capsys):
    fifo = tmp_path / "log.csv"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    assert main(["curves", "label", str(fifo)]) == 2
    assert time.monotonic() - t0 < 5 and "not a regular file" in capsys.readouterr().err


def test_curves_generate_on_a_full_disk_is_one_line_and_leaves_no_half_written_run(tmp_path, capsys, monkeypatch,
                                                                                   full_disk):
    from evalstop_gym.overopt import library

    rows = [{"job": "r", "step": s, "eval_score": 0.1 * s, "gold": 0.1 * s} for s in range(200)]
    monkeypatch.setattr(library, "run", lambda settings: rows)   # the generator itself is not under test
    out = tmp_path / "lib"
    assert main(["curves", "generate", "--out", str(out), "--runs", "2", "--workers", "1"]) == 2
    (err,) = error_lines(capsys.readouterr().err)   # beside the progress bar, one line
    assert "No space left on device" in err
    assert leftovers(out) == [] and not list((out / "runs").glob("*.csv"))


pytest.importorskip("sb3_contrib")
STOP_ID = "EvalStop-StopControl-v0"
TINY = {"n_steps": 64, "batch_size": 64, "n_epochs": 1, "eval_freq": 64, "n_eval_episodes": 1,
        "eval_workload": {"jobs": 10}}


def test_train_records_the_steps_it_trains(tmp_path):
    from evalstop_gym.agents.train import train

    said = []
    config = train(STOP_ID, "ppo", out=tmp_path, timesteps=100, n_envs=1, overrides=TINY, echo=said.append)
    with zipfile.ZipFile(tmp_path / "final_model.zip") as z:   # what SB3 itself counted
        trained = json.loads(z.read("data"))["num_timesteps"]
    assert trained == 128 and config["timesteps"] == 128
    assert json.loads((tmp_path / "config.json").read_text())["timesteps"] == 128
    assert any("100 steps asked" in s and "128 are trained" in s for s in said)


def test_train_on_a_full_disk_is_one_line_and_leaves_no_truncated_model(tmp_path, capsys, monkeypatch):
    fill_disk(monkeypatch, 4096)
    import yaml

    recipe = tmp_path / "x.yml"
    recipe.write_text(yaml.safe_dump({STOP_ID: {"n_timesteps": 64, "n_envs": 1, "n_steps": 64, "batch_size": 64,
                                                "n_epochs": 1, "env_wrapper": ["JobFeatures"]},
                                      "evalstop-gym": {STOP_ID: {"eval_freq": 64, "n_eval_episodes": 1,
                                                                 "eval_workload": {"jobs": 10}}}}))
    out = tmp_path / "m"
    assert main(["train", "--env", STOP_ID, "--algo", "ppo", "--hyperparams", str(recipe), "--out", str(out)]) == 2
    (err,) = error_lines(capsys.readouterr().err)   # beside the progress lines, one line
    assert "No space left on device" in err and "final_model.zip" in err
    # what stays is the training's own logs (SB3's monitor CSV, EvalCallback's evaluations, TensorBoard), never a model
    left = sorted(p.name for p in out.iterdir())
    assert all(n.endswith(".monitor.csv") or n in ("evaluations.npz", "tensorboard") for n in left), left
