"""A trace's shape: fitted quantiles checked by hand, jobs drawn from it that follow the trace, its file's errors,
the shipped Philly shape reproduced by the command it records, and a bench row that plays it without the trace."""

import dataclasses
import json
import re
from collections import Counter

import numpy as np
import pytest
from scipy.stats import ks_2samp

from evalstop_gym.bench.play import BenchSpec
from evalstop_gym.bench.policies import parse_policy
from evalstop_gym.bench.suite import PHILLY, PHILLY_SHAPE, TRACES_ENV, V2
from evalstop_gym.config import ConfigError, WorkloadConfig
from evalstop_gym.data import DATA_DIR
from evalstop_gym.trace_shape import QUANTILES, TAIL, ShapeError, fit_shape, read_shape, sample_jobs
from evalstop_gym.traces import TraceReport, TraceTable, load_trace


def _table(gpus, duration_s, submit_s=None, tenant=None):
    n = len(gpus)
    submit_s = np.arange(n, dtype=float) * 60.0 if submit_s is None else np.asarray(submit_s, float)
    tenant = np.zeros(n, dtype=np.int64) if tenant is None else np.asarray(tenant)
    return TraceTable(submit_s, np.asarray(duration_s, float), np.asarray(gpus, dtype=np.int64), tenant,
                      [str(i) for i in range(int(tenant.max()) + 1)], np.zeros(n, dtype=np.int64),
                      np.arange(1, n + 1), TraceReport(path="hand.csv", format="philly"))


@pytest.fixture
def hand():
    # 250 single-GPU jobs of 10, 20, ..., 2500 s; 250 four-GPU jobs of 1,000 s each; 5 sixteen-GPU jobs (too few
    # for a band: they join the four-GPU band); submits a minute apart; tenants 0 (300 jobs) and 1 (205)
    gpus = [1] * 250 + [4] * 250 + [16] * 5
    dur = [10.0 * (i + 1) for i in range(250)] + [1000.0] * 255
    return _table(gpus, dur, tenant=[0] * 300 + [1] * 205)


def test_the_fitted_quantiles_are_the_ones_worked_by_hand(hand):
    shape = fit_shape(hand)
    assert shape["jobs"] == 505 and shape["gpus"] == {"1": 250, "4": 250, "16": 5}
    assert [(b["min_gpus"], b["max_gpus"], b["jobs"]) for b in shape["bands"]] == [(1, 3, 250), (4, None, 255)]
    one = shape["bands"][0]["duration_s"]
    assert len(one) == QUANTILES + 1 and one[0] == 10.0 and one[-1] == 2500.0
    # knot 128 sits at probability 1 - 0.5^2 = 0.75: position 0.75 * 249 = 186.75 of 10..2500, i.e. 10 * 187.75
    assert TAIL[128] == 0.75 and one[128] == pytest.approx(1877.5)
    assert set(shape["bands"][1]["duration_s"]) == {1000.0}
    submit = shape["submit_h"]   # 505 submits a minute apart: 0 to 504 / 60 h, the median at 252 / 60 h
    assert submit[0] == 0.0 and submit[-1] == pytest.approx(504 / 60) and submit[128] == pytest.approx(252 / 60)
    assert shape["tenants"] == [300, 205]


def test_jobs_drawn_from_a_shape_follow_the_trace(hand):
    rng = np.random.default_rng(7)
    n = 4000
    gpus = rng.choice([1, 2, 8], size=n, p=[0.7, 0.2, 0.1])
    dur = np.where(gpus == 1, rng.lognormal(7, 1.5, n), np.where(gpus == 2, rng.lognormal(3, 1, n),
                                                                 rng.lognormal(10, 0.5, n)))
    trace = _table(gpus, dur, submit_s=np.sort(rng.exponential(1.0, n).cumsum() * 3600))
    drawn = sample_jobs(fit_shape(trace), 20000, seed=3)
    share = Counter(drawn.gpus.tolist())
    for c, p in ((1, 0.7), (2, 0.2), (8, 0.1)):   # each share within 4 sd of its binomial count
        assert abs(share[c] - 20000 * p) < 4 * np.sqrt(20000 * p * (1 - p)), (c, share[c])
    for c in (1, 2, 8):   # each band's run times from the same distribution as the trace's
        assert ks_2samp(drawn.duration_s[drawn.gpus == c], dur[gpus == c]).pvalue > 1e-3, c
    assert ks_2samp(drawn.submit_s, trace.submit_s - trace.submit_s[0]).pvalue > 1e-3
    assert np.all(np.diff(drawn.submit_s) >= 0) and drawn.submit_s.min() >= 0


def test_a_draw_is_seeded(hand):
    shape = fit_shape(hand)
    a, b, c = sample_jobs(shape, 300, 5), sample_jobs(shape, 300, 5), sample_jobs(shape, 300, 6)
    for f in ("submit_s", "duration_s", "gpus", "tenant"):
        assert np.array_equal(getattr(a, f), getattr(b, f))
    assert not np.array_equal(a.duration_s, c.duration_s)


@pytest.mark.parametrize("edit, field", [
    (lambda d: d.update(format="other"), "format"),
    (lambda d: d["submit_h"].reverse(), "submit_h"),
    (lambda d: d.update(submit_h=d["submit_h"][:10]), "submit_h"),
    (lambda d: d["bands"][0]["duration_s"].__setitem__(3, float("nan")), "bands[0].duration_s"),
    (lambda d: d.update(gpus={"1": 250, "4": 250, "16": 5, "x": 1}), "gpus"),
    (lambda d: d.update(bands=d["bands"][:1]), "bands"),
    (lambda d: d.update(tenants=[]), "tenants"),
    (lambda d: d.update(gpus={"01": 250, "4": 250, "16": 5}), "gpus"),
    (lambda d: d.update(gpus={"\u00b2": 250, "4": 250, "16": 5}), "gpus"),
    (lambda d: d["bands"][0].update(max_gpus=4), "bands"),              # 4 GPUs in both bands
    (lambda d: d["bands"][1].update(min_gpus=0), "bands[1]"),
])
def test_a_bad_shape_file_names_its_field(hand, tmp_path, edit, field):
    data = fit_shape(hand)
    edit(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ShapeError, match=rf"bad\.json: field {re.escape(repr(field))}"):
        read_shape(path)


def test_the_command_fits_a_shape_and_refuses_bad_input_in_one_line(hand, tmp_path, capsys):
    from evalstop_gym.cli import main

    csv = tmp_path / "t.csv"
    csv.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n" + "".join(
        f"2017-10-09 07:{i // 60:02d}:{i % 60:02d},{10 * (i + 1)},1,{10 * (i + 1)},c{i % 3}\n" for i in range(300)))
    assert main(["shape", str(csv), "--out", str(tmp_path / "s.json")]) == 0
    shape = read_shape(tmp_path / "s.json")
    assert shape["jobs"] == 300 and shape["tenants"] == [100, 100, 100] and shape["command"].startswith(
        "evalstop-gym shape t.csv --format philly")
    assert main(["shape", str(tmp_path / "none.csv"), "--out", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "none.csv" in err
    small = tmp_path / "small.csv"                      # valid, but too few jobs for a shape
    small.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n" + "2017-10-09 07:00:00,60,1,60,c\n" * 50)
    assert main(["shape", str(small), "--out", str(tmp_path / "y.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "small.csv" in err and "at least 200" in err


def test_a_shape_replay_needs_a_job_count():
    with pytest.raises(ConfigError, match="trace_jobs"):
        load_trace(PHILLY_SHAPE.path(), "shape", WorkloadConfig(seed=1))


def test_the_shipped_philly_shape_is_what_its_command_makes_of_the_trace(tmp_path):
    from evalstop_gym.cli import main

    shipped = read_shape(PHILLY_SHAPE.path())
    trace = PHILLY.path()
    if trace is None:
        pytest.skip(f"the trace {PHILLY.file} is not on this machine (../shared/traces or ${TRACES_ENV})")
    from evalstop_gym.trace_shape import file_sha256

    assert shipped["sha256"] == file_sha256(trace)
    out = tmp_path / "philly_shape.json"
    assert main(["shape", str(trace), "--out", str(out), "--licence", shipped["licence"]]) == 0
    assert out.read_bytes() == (PHILLY_SHAPE.path()).read_bytes()


def test_a_row_of_the_shape_plays_without_the_trace(tmp_path, monkeypatch):
    monkeypatch.setenv(TRACES_ENV, str(tmp_path))      # no trace here: a clone
    row = dataclasses.replace(next(r for r in V2 if r.trace is not None), trace=PHILLY_SHAPE)
    assert PHILLY.path() is None and str(PHILLY_SHAPE.path()).startswith(DATA_DIR)
    spec = BenchSpec.make(parse_policy("srtf-est+evalstop:k=2"), row, row.seeds[0])
    first, again = spec.play(), BenchSpec.make(parse_policy("srtf-est+evalstop:k=2"), row, row.seeds[0]).play()
    assert first == again and first["jobs"] == PHILLY_SHAPE.jobs
    assert spec.trace_sha and spec.run_id != BenchSpec.make(parse_policy("srtf-est+evalstop:k=2"), row,
                                                            row.seeds[1]).run_id


def test_a_shape_fits_demands_to_the_cluster_as_the_trace_does():
    # the shipped shape's largest demand is 128 GPUs: "fit" on 64 GPUs halves every demand, rounded half up
    # (at least 1), as a replay of the trace's own rows does, whatever the draw's own largest demand
    shape = read_shape(PHILLY_SHAPE.path())
    assert max(int(c) for c in shape["gpus"]) == 128
    cfg = WorkloadConfig(seed=11, gpus=64)
    w = load_trace(PHILLY_SHAPE.path(), "shape", cfg, jobs=500, sample=True, gpu_scale="fit", on_bad_row="skip")
    drawn = sample_jobs(shape, 500, 11).gpus
    assert np.array_equal(np.sort(w.gpus), np.sort(np.maximum(1, np.floor(drawn * 0.5 + 0.5)).astype(int)))
