"""``reproduce`` under races, kills, bad result files and full disks: nothing duplicated, lost or orphaned."""

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evalstop_gym.cli import main as cli_main
from evalstop_gym.config import WorkloadConfig
from evalstop_gym.experiments import ResultStore, RunSpec, run_sweep
from evalstop_gym.experiments import runner
from evalstop_gym.experiments.spec import Point

TINY = ["--experiments", "E5", "--jobs", "30", "--seeds", "2", "--no-progress"]   # 6 points x 2 seeds
SMALL = WorkloadConfig(jobs=30)


def command(*args):
    return [sys.executable, "-m", "evalstop_gym.cli", "reproduce", *args]


def run_ids(path: Path) -> list[str]:
    return [json.loads(ln)["run_id"] for ln in path.read_text().splitlines()]


def test_two_concurrent_reproduce_on_one_fresh_folder_never_duplicate_a_run(tmp_path):
    out = tmp_path / "fresh" / "D"            # neither process finds the folder: no mkdir / probe race
    procs = [subprocess.Popen(command(*TINY, "--workers", "1", "--out", str(out)), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in results]
    ids = run_ids(out / "runs.jsonl")
    assert len(ids) == 12 and len(set(ids)) == 12
    # both print the same complete tables; the one that waited reused every run
    assert results[0][0] == results[1][0] and "E5: k sensitivity" in results[0][0]


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"     # a zombie has ended; only its exit status waits for a reaper


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_kill_9_of_reproduce_leaves_no_worker_running(tmp_path):
    args = ["--experiments", "E5", "--jobs", "400", "--seeds", "6", "--workers", "2", "--no-progress"]
    proc = subprocess.Popen(command(*args, "--out", str(tmp_path)), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    workers = []
    while time.monotonic() < deadline and proc.poll() is None:
        workers = _children(proc.pid)
        if len(workers) >= 2 and (tmp_path / "runs.jsonl").exists():
            break
        time.sleep(0.05)
    assert proc.poll() is None and len(workers) >= 2, "the sweep ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_alive(w) for w in workers):
        time.sleep(0.05)
    orphans = [w for w in workers if _alive(w)]
    for w in orphans:                        # do not leave them running if the check fails
        os.kill(w, signal.SIGKILL)
    assert not orphans


def _store_with_two_runs(path):
    specs = [RunSpec.of(Point("none", "fifo"), SMALL, s) for s in range(2)]
    run_sweep(specs, ResultStore(path))
    return specs


@pytest.mark.parametrize("edit, problem", [
    (lambda r: r["metrics"].update(avg_jct_h=r["metrics"]["avg_jct_h"] + 1), "checksum does not match"),
    (lambda r: r.update(metrics={}), "metrics is not a non-empty object"),
    (lambda r: r.update(metrics=None), "metrics is not a non-empty object"),
    (lambda r: r.update(metrics="fast"), "metrics is not a non-empty object"),
    (lambda r: r["metrics"].update(avg_jct_h="1.0"), "metric 'avg_jct_h' is '1.0'"),
    (lambda r: r.update(run_id=42), "run_id is not"),
    (lambda r: r.pop("checksum"), "checksum does not match"),
])
def test_a_bad_record_is_reported_set_aside_and_rerun(tmp_path, capsys, edit, problem):
    path = tmp_path / "runs.jsonl"
    specs = _store_with_two_runs(path)
    first, second = path.read_text().splitlines()
    rec = json.loads(first)
    edit(rec)
    path.write_text(json.dumps(rec) + "\n" + second + "\n")
    store = ResultStore(path)
    err = capsys.readouterr().err
    assert f"runs.jsonl:1: bad record skipped, its run will be run again: {problem}" in err
    assert len(store) == 1 and specs[0].run_id not in store
    assert path.read_text() == second + "\n"                                     # set aside, once
    assert (tmp_path / "runs.jsonl.rejected").read_text() == json.dumps(rec) + "\n"
    assert run_sweep(specs, store) == 1                                          # and run again
    assert sorted(run_ids(path)) == sorted(s.run_id for s in specs)
    assert ResultStore(path).metrics == store.metrics and capsys.readouterr().err == ""


def test_nan_in_a_record_is_not_strict_json_and_is_rerun(tmp_path, capsys):
    path = tmp_path / "runs.jsonl"
    _store_with_two_runs(path)
    text = path.read_text()
    key = '"avg_jct_h": '
    i = text.index(key) + len(key)
    j = text.index(",", i)
    path.write_text(text[:i] + "NaN" + text[j:])
    assert len(ResultStore(path)) == 1
    assert "not valid strict JSON" in capsys.readouterr().err


def test_runs_jsonl_being_a_directory_is_one_line(tmp_path):
    (tmp_path / "runs.jsonl").mkdir()
    r = subprocess.run(command(*TINY, "--workers", "1", "--out", str(tmp_path)), capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "runs.jsonl is a directory" in lines[0]


def test_out_empty_is_refused(tmp_path):
    repo = str(Path(__file__).resolve().parents[1])      # this checkout's code, run from another folder
    r = subprocess.run(command(*TINY, "--out", ""), capture_output=True, text=True, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": repo})
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "out=''" in r.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_is_one_line_and_keeps_the_runs_so_far(tmp_path, monkeypatch, capsys):
    real, calls = runner._append_line, []

    def disk_fills_up(path, line):
        calls.append(line)
        if len(calls) > 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        real(path, line)

    monkeypatch.setattr(runner, "_append_line", disk_fills_up)
    assert cli_main(["reproduce", *TINY, "--workers", "1", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "No space left on device" in err[0] and "the 3 runs recorded so far are kept" in err[0]
    assert len(run_ids(tmp_path / "runs.jsonl")) == 3
    monkeypatch.setattr(runner, "_append_line", real)            # space again: resume runs the other 9
    assert cli_main(["reproduce", *TINY, "--workers", "1", "--out", str(tmp_path)]) == 0
    assert len(set(run_ids(tmp_path / "runs.jsonl"))) == 12
