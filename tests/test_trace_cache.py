"""The parsed-trace cache returns exactly what parsing returns, and never a stale table."""

import os

import numpy as np
import pytest

from evalstop_gym import trace_cache
from evalstop_gym.traces import TraceError, read_trace

ROWS = """timestamp,duration,num_gpus,gpu_time,cluster
2017-10-01 02:00:00,3600.0,8,28800.0,vcB
2017-10-01 00:00:00,1800.0,1,1800.0,vcA
2017-10-01 01:00:00,0.5,2,1.0,vcA
2017-10-01 03:00:00,360.0,0,0.0,vcC
"""
ARRAYS = ("submit_s", "duration_s", "gpus", "tenant", "tier", "line")  # nodes: see test_reliability_cache.py


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALSTOP_GYM_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "traces"


@pytest.fixture
def parses(monkeypatch):
    """Counts real parses (calls of the parser with the cache off)."""
    calls = []
    real = trace_cache.cached

    def counting(path, options, code, parse):
        return real(path, options, code, lambda: calls.append(1) or parse())
    monkeypatch.setattr(trace_cache, "cached", counting)
    return calls


def write(tmp_path, text):
    p = tmp_path / "trace.csv"
    p.write_text(text)
    return p


def same(a, b):
    return (all(np.array_equal(getattr(a, k), getattr(b, k)) and getattr(a, k).dtype == getattr(b, k).dtype
                for k in ARRAYS) and a.tenant_names == b.tenant_names and a.report == b.report)


def test_a_cached_table_equals_the_parsed_one_and_skips_parsing(tmp_path, cache, parses):
    p = write(tmp_path, ROWS)
    first, again = read_trace(p, "philly"), read_trace(p, "philly")
    assert len(parses) == 1 and len(list(cache.glob("*.npz"))) == 1
    assert same(first, again) and same(again, read_trace(p, "philly", cache=False))
    # the report's filter counts come back too: 1 CPU-only job, 1 shorter than a second
    assert sum(again.report.filtered.values()) == 2 and again.n == 2


def test_a_changed_file_or_other_options_are_parsed_again(tmp_path, cache, parses):
    p = write(tmp_path, ROWS)
    read_trace(p, "philly")
    read_trace(p, "philly", min_duration_s=0.1)  # other options: their own entry
    assert len(parses) == 2
    assert read_trace(p, "philly", min_duration_s=0.1).n == 3 and len(parses) == 2
    st = os.stat(p)
    p.write_text(ROWS.replace("3600.0,8", "3000.0,8"))  # same size, new content
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert read_trace(p, "philly").duration_s.max() == 3000.0 and len(parses) == 3
    assert len(list(cache.glob("*.npz"))) == 2  # the stale entry was replaced, not kept beside


def test_a_broken_cache_file_is_parsed_again(tmp_path, cache, parses):
    p = write(tmp_path, ROWS)
    read_trace(p, "philly")
    for f in cache.glob("*.npz"):
        f.write_bytes(b"not a zip file")
    assert same(read_trace(p, "philly"), read_trace(p, "philly", cache=False)) and len(parses) == 2


def test_bad_traces_are_not_cached(tmp_path, cache):
    p = write(tmp_path, ROWS + "not a time,1,1,1,vcA\n")
    for _ in range(2):
        with pytest.raises(TraceError, match="line 6"):
            read_trace(p, "philly")
    assert not list(cache.glob("*.npz"))


def test_an_unwritable_cache_only_costs_the_parse(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("EVALSTOP_GYM_CACHE_DIR", str(blocker))  # a file: no directory can be made in it
    p = write(tmp_path, ROWS)
    assert same(read_trace(p, "philly"), read_trace(p, "philly", cache=False))
