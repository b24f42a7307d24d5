"""The bench draws each workload once per process: the same object every run, read-only, and every run on it
gives the metrics of a run on a fresh draw."""

import numpy as np
import pytest

from evalstop_gym.bench import play as bench_play
from evalstop_gym.bench.play import BenchSpec, cached_workload, warm_workloads
from evalstop_gym.bench.policies import builtin
from evalstop_gym.bench.suite import Row

ROW = Row("toy-cache", calibration="realistic", jobs=24, gpus=16, cluster="flat", seeds=(1000, 1001))


@pytest.fixture(autouse=True)
def empty_cache():
    bench_play._workloads.clear()
    yield
    bench_play._workloads.clear()


def test_a_workload_is_drawn_once_and_read_only():
    spec = BenchSpec.make(builtin("fifo"), ROW, 1000)
    w = spec.workload()
    assert BenchSpec.make(builtin("srtf-progress", "cusum"), ROW, 1000).workload() is w   # another policy, same draw
    assert BenchSpec.make(builtin("fifo"), ROW, 1001).workload() is not w                  # another seed
    with pytest.raises(ValueError, match="read-only"):
        w.gpus[0] = 1
    with pytest.raises(ValueError, match="read-only"):
        w.curves.loss[0, 0] = 0.0
    fresh = spec.draw_workload()
    for name in ("submit_h", "gpus", "length_h", "est_length_h", "restart_h", "ckpt_service_h"):
        assert np.array_equal(getattr(w, name), getattr(fresh, name)), name
    assert np.array_equal(w.observed, fresh.observed)


@pytest.mark.parametrize("scheduler,stopper", [("srtf-progress", "cusum"), ("fifo", "evalstop")])
@pytest.mark.parametrize("compiled", ["", "0"])   # the compiled path where it applies; the Python path
def test_runs_on_the_cached_workload_equal_runs_on_fresh_draws(monkeypatch, scheduler, stopper, compiled):
    monkeypatch.setenv("EVALSTOP_COMPILED", compiled)
    spec = BenchSpec.make(builtin(scheduler, stopper), ROW, 1001)
    cached = [spec.play() for _ in range(2)]   # the second run reads what the first one played
    assert cached_workload(spec) is spec.workload()
    monkeypatch.setattr(BenchSpec, "workload", BenchSpec.draw_workload)
    assert cached[0] == cached[1] == spec.play()


def test_the_cache_keeps_the_most_recently_used(monkeypatch):
    monkeypatch.setattr(bench_play, "WORKLOAD_CACHE", 2)
    specs = [BenchSpec.make(builtin("fifo"), ROW, s) for s in (1000, 1001, 1002)]
    first = specs[0].workload()
    specs[1].workload()
    assert specs[0].workload() is first   # used again: now the most recent
    specs[2].workload()                   # drops seed 1001's, the least recently used
    assert list(bench_play._workloads) == [specs[0].workload_key, specs[2].workload_key]


def test_warming_draws_every_seed_of_every_row_and_loads_the_kernel(monkeypatch):
    monkeypatch.setattr("multiprocessing.get_start_method", lambda allow_none=False: "fork")
    warm_workloads([ROW], builtin("fifo"))
    assert list(bench_play._workloads) == [BenchSpec.make(builtin("fifo"), ROW, s).workload_key for s in ROW.seeds]
    pytest.importorskip("numba")
    from evalstop_gym.compiled.kernel import episode

    assert episode.signatures   # machine code in this process, for the workers forked from it
