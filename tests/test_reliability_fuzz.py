"""Property-based fuzzing (hypothesis) of the trace and curve-log readers.

For arbitrary bytes and for arbitrary rows the readers either give a clean
one-line :class:`ConfigError` or a valid replay: a workload that validates and
an episode whose metrics are finite numbers or ``None`` (strict JSON). Never any
other exception, never NaN or Infinity.
"""

import json
import math
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalstop_gym.baselines import make_policy
from evalstop_gym import generate, run_policy
from evalstop_gym.config import ConfigError, WorkloadConfig
from evalstop_gym.curvelog import apply_curve_log, eval_score_shape, label_run, read_curve_log
from evalstop_gym.traces import LAYOUTS, read_trace, replay_trace, trace_config

FUZZ = settings(max_examples=int(__import__("os").environ.get("FUZZ_EXAMPLES", 100)), deadline=None, suppress_health_check=[HealthCheck.too_slow])
CFG = trace_config(gpus=16, seed=1)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """One folder for every example of the module (hypothesis reruns a test body, not its fixtures)."""
    return tmp_path_factory.mktemp("fuzz")


def write_tmp(folder: Path, data: bytes, suffix: str) -> str:
    with tempfile.NamedTemporaryFile(delete=False, suffix=suffix, dir=folder) as f:
        f.write(data)
    return f.name


def assert_clean(error: ConfigError) -> None:
    text = str(error)
    assert text and "\n" not in text and "\r" not in text, repr(text)


def assert_finite_metrics(metrics: dict) -> None:
    json.dumps(metrics, allow_nan=False)          # raises on NaN / Infinity
    for k, v in metrics.items():
        assert v is None or (isinstance(v, (int, float)) and math.isfinite(v)), (k, v)
    assert metrics["avg_jct_h"] >= 0 and metrics["makespan_h"] >= 0


def replay_or_clean_error(path: str, fmt: str, on_bad_row: str, rescale: str) -> None:
    try:
        table = read_trace(path, fmt, on_bad_row=on_bad_row)
        w, report = replay_trace(table, CFG, on_bad_row=on_bad_row, rescale=rescale, gpu_scale="fit")
    except ConfigError as e:
        assert_clean(e)
        return
    w.validate()
    for a in (w.submit_h, w.length_h, w.est_length_h):
        assert np.all(np.isfinite(a))
    assert "\n" not in report.summary()
    assert_finite_metrics(run_policy(w, make_policy("fifo", "evalstop")))


# -- traces ------------------------------------------------------------------------------------------

@FUZZ
@given(data=st.binary(max_size=600), fmt=st.sampled_from(sorted(LAYOUTS)), skip=st.booleans())
def test_trace_reader_on_arbitrary_bytes(folder, data, fmt, skip):
    header = ",".join(_columns(fmt)).encode() + b"\n"
    for blob in (data, header + data):        # raw bytes, and bytes behind a valid header
        replay_or_clean_error(write_tmp(folder, blob, ".csv"), fmt, "skip" if skip else "error", "arrivals")


def _columns(fmt):
    lay = LAYOUTS[fmt]
    cols = [lay.submit, lay.duration, lay.gpus, lay.tenant] + ([lay.kind] if lay.kind else [])
    return cols + ([lay.job_id] if lay.job_id else [])


GARBAGE_TEXT = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-10**25, max_value=10**25).map(str),
    st.sampled_from(["", " ", "nan", "inf", "-0", "1e308", "-1e308", "1e-320", "0x10", "1_000", "\u0663"]),
    st.text(max_size=6),
)


def mostly(plausible, garbage=GARBAGE_TEXT):
    """``plausible`` values with about one in five ``garbage``, so replays happen as well as errors."""
    return st.integers(0, 4).flatmap(lambda i: garbage if i == 0 else plausible)


SECONDS = st.one_of(st.integers(0, 10**6).map(str), st.floats(0, 1e6).map(repr))
GPUS = st.integers(0, 40).map(str)
TIME_TEXT = st.one_of(
    st.integers(0, 10**7).map(str),
    st.datetimes().map(lambda t: t.strftime("%Y-%m-%d %H:%M:%S")),
    st.sampled_from(["2020-02-30 00:00:00", "2020-06-09 18:00:00+25:00", "9999-12-31 23:59:59", "1e10"]),
)


@st.composite
def trace_rows(draw, fmt):
    lay = LAYOUTS[fmt]
    cols = _columns(fmt)
    rows = []
    for _ in range(draw(st.integers(1, 8))):
        row = {lay.submit: draw(mostly(TIME_TEXT)), lay.duration: draw(mostly(SECONDS)),
               lay.gpus: draw(mostly(GPUS)), lay.tenant: draw(st.text(max_size=3))}
        if lay.kind:
            row[lay.kind] = draw(st.sampled_from(["Pretrain", "Eval", "SFT", "x", ""]))
        if lay.job_id:
            row[lay.job_id] = draw(st.sampled_from(["1", "2", "3", "4", "5", "6", "7", "8", "9", ""]))
        rows.append(row)
    return cols, rows


@FUZZ
@given(data=st.data(), fmt=st.sampled_from(sorted(LAYOUTS)), skip=st.booleans(),
       rescale=st.sampled_from(["arrivals", "cluster", "none"]))
def test_trace_reader_on_arbitrary_rows(folder, data, fmt, skip, rescale):
    import csv
    import io

    cols, rows = data.draw(trace_rows(fmt))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols)
    w.writeheader()
    w.writerows(rows)
    replay_or_clean_error(write_tmp(folder, buf.getvalue().encode("utf-8", "surrogatepass"), ".csv"), fmt,
                          "skip" if skip else "error", rescale)


# -- curve logs ---------------------------------------------------------------------------------------

def label_or_clean_error(path: str) -> None:
    try:
        runs = read_curve_log(path)
    except ConfigError as e:
        assert_clean(e)
        return
    for run in runs.values():
        lab = label_run(run) or eval_score_shape(run, noise_floor=0.02)   # without gold: its shape, no label
        for v in (lab.peak_step, lab.peak_progress, lab.drop, lab.threshold, lab.noise):
            assert math.isfinite(v)
    w = apply_curve_log(generate(WorkloadConfig(jobs=10, seed=2)), runs, seed=2)
    assert_finite_metrics(run_policy(w, make_policy("fifo", "lossplateau")))


@FUZZ
@given(data=st.binary(max_size=600), suffix=st.sampled_from([".csv", ".jsonl"]))
def test_curve_log_reader_on_arbitrary_bytes(folder, data, suffix):
    header = b"job,step,eval_score,train_loss\n" if suffix == ".csv" else b""
    for blob in (data, header + data):
        label_or_clean_error(write_tmp(folder, blob, suffix))


GARBAGE_VALUE = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True),
                          st.integers(min_value=-10**20, max_value=10**20), st.sampled_from(["", "x", "1e400"]))


@st.composite
def curve_rows(draw):
    """Up to 16 rows; in half the examples every value is plausible (a whole valid log), else about one
    in five is garbage."""
    clean = draw(st.booleans())

    def value(plausible, garbage=GARBAGE_VALUE):
        return draw(plausible if clean else mostly(plausible, garbage))

    return [{"job": value(st.sampled_from(["a", "b"]), st.one_of(st.text(max_size=3), st.none(), st.integers())),
             "step": value(st.integers(0, 60)), "eval_score": value(st.floats(-10, 10)),
             "train_loss": value(st.one_of(st.just(0.0), st.floats(-5, 5))),
             "proxy_reward": value(st.one_of(st.none(), st.floats(-5, 5)))}
            for _ in range(draw(st.integers(1, 16)))]


@FUZZ
@given(rows=curve_rows(), suffix=st.sampled_from([".csv", ".jsonl"]))
def test_curve_log_reader_on_arbitrary_rows(folder, rows, suffix):
    if suffix == ".jsonl":
        text = "".join(json.dumps(r) + "\n" for r in rows)      # NaN / Infinity too: not strict JSON input
    else:
        import csv
        import io

        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows([{k: ("" if v is None else v) for k, v in r.items()} for r in rows])
        text = buf.getvalue()
    label_or_clean_error(write_tmp(folder, text.encode("utf-8", "surrogatepass"), suffix))


# -- the reader layer itself (evalstop_gym.files): every input ends in a value or one line, within a bound --

import gzip  # noqa: E402
import time  # noqa: E402

from evalstop_gym import files  # noqa: E402
from evalstop_gym.files import DataFileError  # noqa: E402

CASE_SECONDS = 2.0   # wall time any one input may take; hypothesis fails an example that runs longer
BOUNDED = settings(FUZZ, deadline=int(CASE_SECONDS * 1000))
YAML_PIECES = ["a: ", "- ", "&x ", "*x", "&y [", "*y, ", "]", "{", "}", ", ", ": ", "\n", "  ", "!!str ", "!!python/name:os.system ",
               "<<: *x", "'q", '"', "\\xff", "#", "? ", "|", ">", "---\n", "...\n", "1e400", ".nan", "~", "\t"]


def bounded(call):
    t0 = time.monotonic()
    try:
        call()
    except DataFileError as e:
        assert_clean(e)
    assert time.monotonic() - t0 < CASE_SECONDS


def maybe_gzip(data: bytes, how: str) -> bytes:
    if how == "plain":
        return data
    packed = gzip.compress(data)
    return packed if how == "gzip" else packed[: max(10, len(packed) // 2)]


@BOUNDED
@given(pieces=st.lists(st.sampled_from(YAML_PIECES), max_size=80), noise=st.binary(max_size=20),
       how=st.sampled_from(["plain", "gzip", "cut"]))
def test_yaml_and_json_readers_give_a_value_or_one_line(folder, pieces, noise, how):
    text = "".join(pieces).encode("utf-8", "surrogateescape") + noise
    for suffix, load in ((".yml", files.load_yaml), (".json", files.load_json)):
        path = write_tmp(folder, maybe_gzip(text, how), suffix)
        bounded(lambda: load(path))


@BOUNDED
@given(data=st.binary(max_size=4000), how=st.sampled_from(["plain", "gzip", "cut"]))
def test_line_and_csv_readers_give_rows_or_one_line(folder, data, how):
    path = write_tmp(folder, maybe_gzip(data, how), ".csv")

    def read_all():
        with files.open_text(path, DataFileError, "file") as f:
            for _ in files.csv_rows(f, path, DataFileError, "file"):
                pass
    bounded(read_all)


@settings(BOUNDED, max_examples=max(FUZZ.max_examples // 5, 10))   # each example parses two large files
@given(depth=st.integers(1, 5000), width=st.integers(1, 12), levels=st.integers(1, 12))
def test_nesting_and_alias_bombs_are_refused_within_the_bound(folder, depth, width, levels):
    nested = write_tmp(folder, ("[" * depth + "]" * depth).encode(), ".yml")
    bounded(lambda: files.load_yaml(nested))
    bounded(lambda: files.load_json(nested))
    lines = [f"l0: &l0 [{', '.join(['x'] * width)}]"] + [
        f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels + 1)]
    laughs = write_tmp(folder, "\n".join(lines).encode(), ".yml")
    expanded = sum(width ** i for i in range(1, levels + 2))
    if expanded > files.MAX_CONFIG_NODES * 2:
        with pytest.raises(DataFileError, match="billion laughs"):
            files.load_yaml(laughs)
    bounded(lambda: files.load_yaml(laughs))
