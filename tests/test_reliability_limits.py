"""Bounded work and size first: range flags are refused as they are read, before anything is allocated, and
readers refuse kernel files and oversized inputs before parsing them."""

import time

import pytest

from evalstop_gym.commands.common import MAX_SEEDS, seed_range
from evalstop_gym.config import ConfigError


def test_a_seed_range_by_hand():
    assert seed_range("5") == range(5, 6) and seed_range("3-7") == range(3, 8)
    assert len(seed_range(f"0-{MAX_SEEDS - 1}")) == MAX_SEEDS
    for text, says in [(f"0-{MAX_SEEDS}", f"{MAX_SEEDS + 1} seeds, more than the {MAX_SEEDS} allowed"),
                       ("7-3", "0 <= A <= B"), ("-1-3", "range A-B of integers"), ("a-b", "range A-B of integers"),
                       (f"0-{2**64}", "B <= 9223372036854775807")]:
        with pytest.raises(ConfigError, match=says):
            seed_range(text, "seeds")


@pytest.mark.parametrize("argv,says", [
    (["audit", "--seeds", "0-1000000000000"], f"more than the {MAX_SEEDS} allowed"),
    (["audit", "--seeds", "0-99999999999999999999999"], "B <= 9223372036854775807"),
])
def test_a_huge_seed_range_is_one_line_at_once(cli_error, argv, says):
    start = time.perf_counter()
    assert says in cli_error(argv)
    assert time.perf_counter() - start < 2   # it once grew by 5 MB/s without an answer


@pytest.mark.parametrize("argv", [["reproduce", "--out", "unused"], ["evaluate", "--policy", "fifo"], ["targets"],
                                  ["targets", "--seeds", "2", "--validation-seeds"]])
def test_a_huge_seed_count_is_one_line_before_anything_runs(cli_error, tmp_path, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    err = cli_error(argv + ([] if argv[-1] == "--validation-seeds" else ["--seeds"]) + ["1000000000000"])
    assert f"seeds=1000000000000 is invalid: must be an integer in [1, {MAX_SEEDS}]" in err
    assert list(tmp_path.iterdir()) == []   # no output folder, no run


def test_kernel_files_are_refused_by_every_reader(cli_error, tmp_path):
    err = cli_error(["simulate", "--trace", "/proc/self/mem", "--jobs", "5"])
    assert "is a kernel file (/proc, /sys), not a trace" in err
    err = cli_error(["bench", "--leaderboard", "/proc/self/status", "--leaderboard-out", "-"])
    assert "is a kernel file" in err


def test_a_mix_that_is_not_a_mapping_is_one_config_error():
    from evalstop_gym.api import simulate

    for mix in ([0.5, 0.5], "lora", {}):
        with pytest.raises(ConfigError, match="mix=.*must be a mapping of job type to fraction"):
            simulate("fifo", jobs=5, mix=mix)
    assert simulate("fifo", jobs=5, mix={"lora": 1.0})["avg_jct_h"] > 0


def test_a_trace_may_start_with_blank_lines(tmp_path):
    from evalstop_gym.traces import TraceError, read_trace

    body = "timestamp,duration,num_gpus,cluster\n0,3600,1,a\n60,7200,2,a\n"
    plain, padded = tmp_path / "plain.csv", tmp_path / "padded.csv"
    plain.write_text(body)
    padded.write_text("\n \n\n" + body)
    a, b = read_trace(plain, "philly", cache=False), read_trace(padded, "philly", cache=False)
    assert list(a.duration_s) == list(b.duration_s) == [3600, 7200] and list(b.gpus) == [1, 2]
    assert list(b.line) == [5, 6]   # lines as in the file
    (tmp_path / "blank.csv").write_text("\n\n  \n")
    with pytest.raises(TraceError, match="the file is empty"):
        read_trace(tmp_path / "blank.csv", "philly", cache=False)
    (tmp_path / "other.csv").write_text("\n\nfoo,bar\n1,2\n")
    with pytest.raises(TraceError, match=r"other.csv, line 3: missing column\(s\)"):
        read_trace(tmp_path / "other.csv", "philly", cache=False)
