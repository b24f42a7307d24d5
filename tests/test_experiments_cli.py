"""``evalstop-gym reproduce`` from the shell: output files, a killed run resumed, one-line errors."""

import json
import subprocess
import sys
import time

import pytest

SMALL = ["--jobs", "30", "--seeds", "2", "--no-progress"]


def cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "evalstop_gym.cli", "reproduce", *args], capture_output=True,
                          text=True, **kw)


def test_prints_each_table_and_writes_md_csv_png(tmp_path):
    r = cli("--experiments", "E5,E2", "--out", str(tmp_path), "--workers", "1", *SMALL)
    assert r.returncode == 0, r.stderr
    assert r.stdout.index("E5: k sensitivity") < r.stdout.index("E2: Composability")
    assert max(map(len, r.stdout.splitlines())) <= 120 and "![" not in r.stdout   # a terminal, not Markdown
    for name in ("E5", "E2"):
        assert f"in {tmp_path / name}.md)" in r.stdout   # where the full table is
        assert "![" in (tmp_path / f"{name}.md").read_text()
        assert (tmp_path / f"{name}.csv").read_text().count("\n") >= 3
        assert (tmp_path / f"{name}.png").stat().st_size > 1000
    assert not (tmp_path / "E1.md").exists()


def test_a_killed_run_resumes_to_the_same_tables(tmp_path):
    """Kill the process once some runs are on disk (SIGKILL: no cleanup), resume, compare."""
    args = ["--experiments", "E5", "--jobs", "400", "--seeds", "4", "--workers", "1", "--no-progress"]
    killed, whole = tmp_path / "killed", tmp_path / "whole"
    command = [sys.executable, "-m", "evalstop_gym.cli", "reproduce", *args, "--out", str(killed)]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    runs = killed / "runs.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if runs.exists() and runs.read_text().count("\n") >= 3:
            break
        time.sleep(0.005)
    proc.kill()
    proc.wait()
    done = runs.read_text().count("\n")
    assert 3 <= done < 24                       # really stopped mid-way
    with open(runs, "a") as f:    # as if killed in the middle of writing a record
        f.write('{"metrics": {"avg_jct')
    resumed = cli(*args, "--out", str(killed))
    assert resumed.returncode == 0, resumed.stderr
    assert cli(*args, "--out", str(whole)).returncode == 0
    for name in ("E5.md", "E5.csv", "summary.md"):
        assert (killed / name).read_bytes() == (whole / name).read_bytes()
    lines = runs.read_text().splitlines()
    assert len(lines) == 24 and len({json.loads(ln)["run_id"] for ln in lines}) == 24   # 6 points x 4 seeds


def test_max_runs_stops_early_and_says_how_to_resume(tmp_path):
    r = cli("--experiments", "E5", "--out", str(tmp_path), "--max-runs", "3", "--workers", "1", *SMALL)
    assert r.returncode == 0
    assert "stopped after 3 new runs; 9 remain" in r.stdout
    assert (tmp_path / "runs.jsonl").read_text().count("\n") == 3
    assert "reusing" not in r.stderr
    again = cli("--experiments", "E5", "--out", str(tmp_path), "--max-runs", "2", "--workers", "1", *SMALL)
    assert f"reusing 3 of 12 runs already finished in {tmp_path / 'runs.jsonl'}; 9 to run" in again.stderr


@pytest.mark.parametrize("args, words", [
    (["--experiments", "E1,E9"], "experiments='E9'"),
    (["--experiments", "bogus"], "experiments='BOGUS'"),
    (["--seeds", "0"], "seeds=0"),
    (["--seeds", "-2"], "seeds=-2"),
    (["--workers", "0"], "workers=0"),
    (["--backend", "slurm"], "backend='slurm'"),
    (["--base-scheduler", "nope"], "base_scheduler='nope'"),
    (["--detectors", "evalstop"], "detectors='evalstop'"),
    (["--detectors", "nope"], "detectors='nope'"),
    (["--jobs", "0"], "jobs=0"),
    (["--out", "FILE"], "cannot write there"),
    (["--out", "FILE/sub"], "cannot write there"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, words):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    args = [a.replace("FILE", str(blocker)) for a in args]
    defaults = ["--experiments", "E5", "--out", str(tmp_path / "out"), "--no-progress"]
    r = cli(*defaults, *args)    # the last of a repeated flag wins
    assert r.returncode == 2, r.stderr
    assert r.stdout == "" and "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("evalstop-gym reproduce: error:") and words in lines[0]
    assert not (tmp_path / "out" / "runs.jsonl").exists()
