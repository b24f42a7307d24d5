"""Same command, same answer: the trace cache is keyed by content, keeps every field and checks itself;
the trace and curve-log readers are strict; hostile sizes are refused in seconds, in one line."""

import dataclasses
import gzip
import json
import os
import pickle
import time
import zlib

import numpy as np
import pytest

from evalstop_gym import trace_cache
from evalstop_gym.cli import main
from evalstop_gym.config import ConfigError
from evalstop_gym.curvelog import CurveLogError, read_curve_log
from evalstop_gym.traces import TraceError, TraceTable, read_trace, replay_trace, trace_config

HELIOS_HEADER = "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"
ACME_HEADER = "job_id,user,node_num,gpu_num,cpu_num,type,state,submit_time,start_time,end_time,duration,queue,gpu_time\n"
PHILLY_HEADER = "timestamp,duration,num_gpus,gpu_time,cluster\n"


def helios_rows(n=60):
    """Jobs of 1-8 GPUs, every third one recorded spread over more nodes than it needs."""
    rows = []
    for i in range(n):
        gpus = (1, 2, 4, 8)[i % 4]
        nodes = 4 if i % 3 == 0 else max(1, gpus // 8)
        rows.append(f"j{i},u{i % 5},vc{i % 3},{gpus},4,{nodes},COMPLETED,2020-04-01 {i // 6:02d}:{i % 6 * 10:02d}:00,"
                    f",,{600 + 97 * i},q\n")
    return HELIOS_HEADER + "".join(rows)


def acme_rows(n=60):
    kinds = ("Debug", "SFT", "Pretrain", "Eval")
    return ACME_HEADER + "".join(
        f"a{i},u{i % 4},{4 if i % 3 == 0 else 1},{(1, 2, 4, 8)[i % 4]},8,{kinds[i % 4]},COMPLETED,"
        f"2023-07-01 {i // 6:02d}:{i % 6 * 10:02d}:00,,,{500 + 61 * i},q,0\n" for i in range(n))


def philly_rows(n=60):
    return PHILLY_HEADER + "".join(f"{1_500_000_000 + 600 * i},{300 + 53 * i},{(1, 2, 4, 8)[i % 4]},0,vc{i % 2}\n"
                                   for i in range(n))


TRACES = {"philly": philly_rows, "helios": helios_rows, "acme": acme_rows}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALSTOP_GYM_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "traces"


def write(tmp_path, text, name="trace.csv"):
    p = tmp_path / name
    (p.write_bytes if isinstance(text, bytes) else p.write_text)(text)
    return p


def assert_same_table(a: TraceTable, b: TraceTable):
    for f in dataclasses.fields(TraceTable):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            assert isinstance(x, np.ndarray) and isinstance(y, np.ndarray), f.name
            assert x.dtype == y.dtype and np.array_equal(x, y), f.name
        else:
            assert x == y, f.name


@pytest.mark.parametrize("fmt", sorted(TRACES))
def test_a_cached_table_equals_a_fresh_one_field_for_field(tmp_path, cache, fmt):
    p = write(tmp_path, TRACES[fmt]())
    fresh = read_trace(p, fmt, cache=False)
    first, cached = read_trace(p, fmt), read_trace(p, fmt)
    assert list(cache.glob("*.npz"))
    assert_same_table(fresh, first)
    assert_same_table(fresh, cached)
    if fmt != "philly":
        assert cached.nodes is not None and (cached.nodes == 4).sum() == 20   # the recorded node counts
    # and the replays built from them, on a cluster of nodes that reads the node counts
    cfg = trace_config(gpus=64, cluster={"nodes": 8, "gpus_per_node": 8}, seed=3)
    (a, ra), (b, rb) = replay_trace(fresh, cfg), replay_trace(cached, cfg)
    assert pickle.dumps(a) == pickle.dumps(b) and ra == rb   # every field, the hidden curves' arrays included


def simulate_json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_simulate_with_spread_node_counts_gives_the_same_answer_every_run(tmp_path, cache, capsys):
    p = write(tmp_path, helios_rows())
    argv = ["simulate", "--trace", str(p), "--trace-format", "helios", "--nodes", "8", "--gpus-per-node", "8",
            "--json"]
    first, second, third = (simulate_json(capsys, argv) for _ in range(3))
    assert first == second == third


def test_a_same_size_edit_with_the_old_mtime_is_read_again(tmp_path, cache):
    p = write(tmp_path, philly_rows())
    st = os.stat(p)
    assert read_trace(p, "philly").duration_s.max() == 300 + 53 * 59
    p.write_text(philly_rows().replace(f",{300 + 53 * 59},", f",{300 + 53 * 58 + 1:4d},"))   # same size
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))   # as cp -p, rsync -t and tar keep it
    assert os.stat(p).st_size == st.st_size
    assert read_trace(p, "philly").duration_s.max() == 300 + 53 * 58 + 1
    assert len(list(cache.glob("*.npz"))) == 1   # the entry was replaced, not kept beside


@pytest.mark.parametrize("damage", ["empty", "truncated", "flipped", "other"])
def test_a_damaged_cache_entry_is_rebuilt_never_raised(tmp_path, cache, damage):
    p = write(tmp_path, helios_rows())
    fresh = read_trace(p, "helios", cache=False)
    read_trace(p, "helios")
    (entry,) = cache.glob("*.npz")
    data = entry.read_bytes()
    entry.write_bytes({"empty": b"", "truncated": data[: len(data) // 2],
                       "flipped": data[:200] + bytes([data[200] ^ 1]) + data[201:],
                       "other": b"PK\x03\x04" + b"\0" * 100}[damage])
    assert_same_table(fresh, read_trace(p, "helios"))
    assert_same_table(fresh, read_trace(p, "helios"))   # and the rebuilt entry is whole again


def test_an_entry_whose_arrays_were_edited_fails_its_checksum(tmp_path, cache):
    p = write(tmp_path, philly_rows())
    read_trace(p, "philly")
    (entry,) = cache.glob("*.npz")
    with np.load(entry) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["duration_s"] = arrays["duration_s"] * 2
    with open(entry, "wb") as f:
        np.savez(f, **arrays)
    assert np.array_equal(read_trace(p, "philly").duration_s, read_trace(p, "philly", cache=False).duration_s)


def test_the_cache_does_not_import_the_trace_reader():
    import ast

    tree = ast.parse(open(trace_cache.__file__).read())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not any(m and "traces" in m for m in imported), imported


def test_an_unbalanced_quote_is_an_error_naming_its_line(tmp_path):
    rows = philly_rows(1000).splitlines(keepends=True)
    rows[10] = rows[10].replace(",vc", ',"vc', 1)   # row 10 (line 11) opens a quote it never closes
    p = write(tmp_path, "".join(rows))
    with pytest.raises(TraceError, match=r"line 11: .*unbalanced quote"):
        read_trace(p, "philly", cache=False)
    rows[10] = rows[10].replace('"vc', '"vc\n0,1', 1)   # closed again on a later line
    rows[12] = rows[12].replace(",vc", ',vc"', 1)
    with pytest.raises(TraceError, match=r"line 11"):
        read_trace(write(tmp_path, "".join(rows)), "philly", cache=False)


@pytest.mark.parametrize("node", ["\u00b2", "\u0663", "9" * 40, "1e400", "-3", "2000000"])
def test_unusable_node_counts_are_noted_not_a_traceback(tmp_path, node):
    p = write(tmp_path, HELIOS_HEADER + f"1,u,vc,8,4,{node},COMPLETED,2020-04-01 00:00:00,,,600,q\n"
                                        "2,u,vc,8,4,1,COMPLETED,2020-04-01 00:10:00,,,600,q\n")
    t = read_trace(p, "helios", cache=False)
    assert list(t.nodes) == [0, 1]
    assert any("node_num" in k for k in t.report.notes)


@pytest.mark.parametrize("text, needle", [
    ("job,step,eval_score\nr,0,0.1\nr,1,nan\nr,2,0.3\n", "line 3: eval_score='nan' is not a number"),
    ("job,step,eval_score\nr,0,0.1\nr,1,NaN\nr,2,0.3\n", "line 3"),
    ("job,step,eval_score\nr,0,0.1\nr,nan,0.2\nr,2,0.3\n", "step='nan'"),
])
def test_a_written_nan_in_a_curve_log_is_an_error(tmp_path, text, needle):
    with pytest.raises(CurveLogError, match=needle):
        read_curve_log(write(tmp_path, text, "log.csv"))


@pytest.mark.parametrize("job", [1, 1.5, True, None, ["r"], {"a": 1}])
def test_a_jsonl_job_name_must_be_a_string(tmp_path, job):
    rows = [{"job": job, "step": 0, "eval_score": 0.1}, {"job": "1", "step": 1, "eval_score": 0.2}]
    p = write(tmp_path, "".join(json.dumps(r) + "\n" for r in rows), "log.jsonl")
    with pytest.raises(CurveLogError, match=r"line 1: (job=.* must be a string|empty job name)"):
        read_curve_log(p)


@pytest.mark.parametrize("window", [("a", "b"), (0, "b"), (float("nan"), 1), (0,), 5, (True, 2)])
def test_replay_window_of_other_types_is_a_config_error(tmp_path, window):
    table = read_trace(write(tmp_path, philly_rows()), "philly", cache=False)
    with pytest.raises(ConfigError, match="trace_window"):
        replay_trace(table, trace_config(), window=window)


@pytest.mark.parametrize("job_types", [{"lora": 1}, {"lora": "x", "dpo": 1, "rlhf": 1}, 7])
def test_simulate_with_bad_job_types_is_a_config_error(job_types):
    from evalstop_gym import simulate

    with pytest.raises(ConfigError, match="job_types"):
        simulate(job_types=job_types)


def gzip_bomb(path, line: bytes, total_bytes: int, head: bytes = b""):
    """A small gzip file that inflates to ``head`` then ``total_bytes`` of ``line`` repeated."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = line * (2**20 // len(line))
    parts = [z.compress(head)] + [z.compress(block) for _ in range(total_bytes // len(block))] + [z.flush()]
    path.write_bytes(b"".join(parts))
    return path


@pytest.mark.parametrize("line", [b"\n", b"2017-10-01 00:00:00,60,1,60,a\n"])
def test_a_gzip_bomb_trace_is_refused_within_seconds(tmp_path, capsys, line):
    p = gzip_bomb(tmp_path / "bomb.csv.gz", line, 256 * 2**20, PHILLY_HEADER.encode())
    assert p.stat().st_size < 2**20
    t0 = time.monotonic()
    assert main(["simulate", "--trace", str(p), "--json"]) == 2
    assert time.monotonic() - t0 < 10
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "decompression bomb" in err, err


def test_a_gzip_bomb_curve_log_is_refused_within_seconds(tmp_path, capsys):
    p = gzip_bomb(tmp_path / "bomb.jsonl.gz", b'{"job": "r", "step": 1, "eval_score": 0.5}\n', 256 * 2**20)
    t0 = time.monotonic()
    assert main(["curves", "label", str(p), "--format", "jsonl"]) == 2
    assert time.monotonic() - t0 < 10
    assert "decompression bomb" in capsys.readouterr().err


def test_a_gzip_file_of_ordinary_ratio_is_read_whole(tmp_path):
    p = tmp_path / "t.csv.gz"
    p.write_bytes(gzip.compress(philly_rows(3000).encode()))
    assert read_trace(p, "philly", cache=False).n == 3000


def test_walking_a_huge_tree_stops_at_the_stated_limits(tmp_path, monkeypatch, capsys):
    from evalstop_gym import files

    monkeypatch.setattr(files, "MAX_WALK_ENTRIES", 50)
    for i in range(60):
        (tmp_path / f"d{i}").mkdir()
    t0 = time.monotonic()
    assert main(["curves", "label", str(tmp_path)]) == 2
    assert "more than 50 files and folders" in capsys.readouterr().err
    deep = tmp_path / "deep"
    deep.mkdir()
    d = deep
    for i in range(12):   # event files below the depth limit are not looked for
        d = d / f"l{i}"
    d.mkdir(parents=True)
    (d / "events.out.tfevents.1").write_bytes(b"")
    assert [f for _, names in files.walk(deep, CurveLogError, "log") for f in names] == []
    assert time.monotonic() - t0 < 10


def test_curves_label_of_the_root_folder_ends_in_one_line_within_seconds(capsys):
    t0 = time.monotonic()
    assert main(["curves", "label", "/"]) == 2
    assert time.monotonic() - t0 < 10
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


def tfrecord(data: bytes, length: int | None = None) -> bytes:
    import struct

    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    head = struct.pack("<Q", len(data) if length is None else length)
    return head + struct.pack("<I", masked_crc32c(head)) + data + struct.pack("<I", masked_crc32c(data))


def test_a_tensorboard_record_claiming_a_huge_length_is_refused_before_allocating(tmp_path, capsys):
    pytest.importorskip("tensorboard")
    run = tmp_path / "run"
    run.mkdir()
    (run / "events.out.tfevents.1.host").write_bytes(tfrecord(b"x" * 10) + tfrecord(b"", length=2**62))
    assert main(["curves", "label", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "record 2 claims 4611686018427387904 bytes" in err and err.count("\n") == 1


def test_a_dangling_event_file_link_is_one_line(tmp_path, capsys):
    pytest.importorskip("tensorboard")
    run = tmp_path / "run"
    run.mkdir()
    (run / "events.out.tfevents.1.host").symlink_to(tmp_path / "gone")
    assert main(["curves", "label", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "cannot open" in err and err.count("\n") == 1


@pytest.mark.parametrize("argv, needle", [
    (["curves", "label", "LOG", "--evals", "99999999999"], "evals=99999999999"),
    (["curves", "generate", "--out", "OUT", "--evals", "99999999999"], "evals=99999999999"),
    (["curves", "generate", "--out", "OUT", "--runs", "1000000000000"], "runs=1000000000000"),
    (["curves", "generate", "--out", "OUT", "--steps", "1000000000000"], "steps=1000000000000"),
    (["curves", "generate", "--out", "OUT", "--eval-items", "1000000000000"], "eval_items=1000000000000"),
    (["simulate", "--nodes", "99999999999", "--gpus-per-node", "8"], "cluster.nodes=99999999999"),
    (["simulate", "--evals", "99999999999"], "evals_per_job=99999999999"),
])
def test_counts_from_flags_are_range_checked_before_allocating(tmp_path, capsys, argv, needle):
    log = write(tmp_path, "job,step,eval_score,gold\nr,0,0.1,0.1\nr,1,0.5,0.5\nr,2,0.3,0.3\n", "log.csv")
    t0 = time.monotonic()
    assert main([{"LOG": str(log), "OUT": str(tmp_path / "out")}.get(a, a) for a in argv]) == 2
    assert time.monotonic() - t0 < 10
    assert needle in capsys.readouterr().err
