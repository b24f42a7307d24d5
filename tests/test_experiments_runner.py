"""The runner: pure runs, JSONL results, resume after an interruption, and the backends.

Small workloads (30 jobs) and 3 seeds keep each sweep under a couple of seconds.
"""

import json

import pytest

import evalstop_gym
from evalstop_gym.config import ConfigError, WorkloadConfig
from evalstop_gym.experiments import ResultStore, RunSpec, reproduce, run_sweep
from evalstop_gym.experiments.runner import JOBS_KEY, estimated_cost, execute, execute_record, record, serialize
from evalstop_gym.experiments.spec import Point

SMALL = WorkloadConfig(jobs=30)
SUITE = dict(names=["E1", "E5"], seeds=3, base=SMALL, progress=False, echo=lambda s: None)
TABLES = ("E1.md", "E1.csv", "E5.md", "E5.csv", "summary.md")


def tables(folder):
    return {name: (folder / name).read_bytes() for name in TABLES}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The reference: the whole sweep in one go, in-process."""
    out = tmp_path_factory.mktemp("ref")
    reproduce(out=out, workers=1, **SUITE)
    return out


def test_a_run_is_the_same_episode_as_simulate():
    spec = RunSpec.of(Point("k=2", "fifo", "evalstop", (("k", 2),), (("noise", 0.05),)), SMALL, seed=4)
    got = execute(spec)
    detail = got.pop(JOBS_KEY)
    assert got == evalstop_gym.simulate("fifo", "evalstop", k=2, jobs=30, noise=0.05, seed=4)
    assert len(detail["jct_h"]) == len(detail["stopped"]) == 30
    assert sum(detail["stopped"]) == got["jobs_stopped"]
    assert sum(detail["jct_h"]) / 30 == pytest.approx(got["avg_jct_h"])
    described = spec.describe()
    assert described["workload"]["seed"] == 4 and described["params"] == {"k": 2}


def test_run_ids_are_stable_and_tell_specs_apart():
    p = Point("none", "fifo")
    a = RunSpec.of(p, SMALL, 1)
    assert a.run_id == RunSpec.of(p, WorkloadConfig(jobs=30), 1).run_id
    others = [RunSpec.of(p, SMALL, 2), RunSpec.of(p, SMALL.replace(noise=0.05), 1),
              RunSpec.of(Point("k=2", "fifo", "evalstop", (("k", 2),)), SMALL, 1),
              RunSpec.of(Point("k=3", "fifo", "evalstop", (("k", 3),)), SMALL, 1)]
    assert len({a.run_id, *(o.run_id for o in others)}) == 5


def test_run_ids_change_with_the_simulator_or_policy_code(monkeypatch):
    from evalstop_gym.experiments import runner

    before = RunSpec.of(Point("none", "fifo"), SMALL, 1).run_id
    monkeypatch.setattr(runner, "code_fingerprint", lambda: "edited")
    assert RunSpec.of(Point("none", "fifo"), SMALL, 1).run_id != before


def test_results_are_appended_one_line_per_run(tmp_path):
    specs = [RunSpec.of(Point("none", "fifo"), SMALL, s) for s in range(4)]
    store = ResultStore(tmp_path / "runs.jsonl")
    assert run_sweep(specs + specs[:2], store, limit=3) == 3          # duplicates run once
    lines = (tmp_path / "runs.jsonl").read_text().splitlines()
    assert [json.loads(ln)["run_id"] for ln in lines] == [s.run_id for s in specs[:3]]
    assert run_sweep(specs, ResultStore(tmp_path / "runs.jsonl")) == 1   # only the missing one
    assert run_sweep(specs, ResultStore(tmp_path / "runs.jsonl")) == 0


def started(path):
    return [json.loads(ln)["run_id"] for ln in path.read_text().splitlines()]


# (scheduler, jobs) with their hand-computed estimated costs, jobs x (10 evals + 1) x factor:
# fifo 1; srtf-est preempts (2); srtf-progress and lossaware also re-rank running jobs (2 x 3);
# tiresias preempts and keeps its own lists (2 x 2.5).
COSTED = [("fifo", 30, 330), ("srtf-progress", 30, 1980), ("fifo", 40, 440), ("tiresias", 40, 2200),
          ("lossaware", 30, 1980), ("srtf-est", 30, 660)]


def costed_specs():
    return [RunSpec.of(Point("none", sched), WorkloadConfig(jobs=jobs, evals_per_job=10), 0)
            for sched, jobs, _ in COSTED]


def test_the_estimated_cost_counts_events_and_scheduler_work():
    assert [estimated_cost(s) for s in costed_specs()] == [cost for _, _, cost in COSTED]


@pytest.mark.parametrize("workers", [1, 2])
def test_runs_start_longest_estimated_first_each_once_and_resume_skips_finished(tmp_path, workers):
    specs = costed_specs()
    fifo30, progress, fifo40, tiresias, lossaware, srtf = (s.run_id for s in specs)
    path = tmp_path / "runs.jsonl"
    assert run_sweep(specs + specs[:2], ResultStore(path), workers=workers, limit=3) == 3
    # the three costliest start first; srtf-progress before lossaware (equal cost, given order)
    assert sorted(started(path)) == sorted([tiresias, progress, lossaware])
    if workers == 1:   # one worker finishes runs in the order they start
        assert started(path) == [tiresias, progress, lossaware]
    assert run_sweep(specs, ResultStore(path), workers=workers) == 3   # only the rest, each once
    assert sorted(started(path)) == sorted(s.run_id for s in specs)
    if workers == 1:
        assert started(path)[3:] == [srtf, fifo40, fifo30]
    assert run_sweep(specs, ResultStore(path), workers=workers) == 0


def test_a_worker_sends_the_record_line_and_what_a_resume_reads_back(tmp_path):
    spec = RunSpec.of(Point("none", "fifo"), SMALL, 3)
    line, metrics = execute_record(spec)
    assert (line, metrics) == serialize(record(spec, execute(spec)))
    store = ResultStore(tmp_path / "runs.jsonl")
    store.append(spec.run_id, line, metrics)
    assert ResultStore(tmp_path / "runs.jsonl").metrics == store.metrics == {spec.run_id: metrics}


def test_a_truncated_last_line_is_dropped_and_rerun(tmp_path, capsys):
    path = tmp_path / "runs.jsonl"
    specs = [RunSpec.of(Point("none", "fifo"), SMALL, s) for s in range(3)]
    run_sweep(specs[:2], ResultStore(path))
    whole = path.read_text()
    path.write_text(whole + whole.splitlines()[0][:40])          # a writer killed mid-line
    store = ResultStore(path)
    assert len(store) == 2 and path.read_text() == whole           # cut back to the last full line
    assert run_sweep(specs, store) == 1
    assert [json.loads(ln)["run_id"] for ln in path.read_text().splitlines()] == [s.run_id for s in specs]
    assert capsys.readouterr().err == ""


def test_an_unreadable_middle_line_is_skipped_with_a_warning(tmp_path, capsys):
    path = tmp_path / "runs.jsonl"
    run_sweep([RunSpec.of(Point("none", "fifo"), SMALL, 0)], ResultStore(path))
    path.write_text("not json\n" + path.read_text())
    assert len(ResultStore(path)) == 1
    assert "runs.jsonl:1: bad record skipped, its run will be run again: not valid strict JSON" in capsys.readouterr().err


def test_interrupted_sweep_resumes_to_identical_tables(tmp_path, uninterrupted):
    first = reproduce(out=tmp_path, workers=2, max_runs=7, **SUITE)
    assert not first.complete and first.new_runs == 7 and not (tmp_path / "E1.md").exists()
    assert len((tmp_path / "runs.jsonl").read_text().splitlines()) == 7
    with open(tmp_path / "runs.jsonl", "a") as f:                  # and a kill mid-write
        f.write('{"metrics": {"avg_jct_h": 1.')
    second = reproduce(out=tmp_path, workers=2, **SUITE)
    assert second.complete and second.new_runs == first.remaining
    assert tables(tmp_path) == tables(uninterrupted)


def test_worker_count_does_not_change_results(tmp_path, uninterrupted):
    reproduce(out=tmp_path, workers=2, **SUITE)
    assert tables(tmp_path) == tables(uninterrupted)
    rerun = reproduce(out=tmp_path, workers=2, **SUITE)             # everything is on disk already
    assert rerun.new_runs == 0 and tables(tmp_path) == tables(uninterrupted)


def test_outputs_per_experiment_and_summary(uninterrupted):
    for name in ("E1", "E5"):
        assert (uninterrupted / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        md = (uninterrupted / f"{name}.md").read_text()
        assert md.startswith(f"## {name}: ") and f"![{name}]({name}.png)" in md
    summary = (uninterrupted / "summary.md").read_text()
    assert "## Compared with the paper" in summary and "| 98%" in summary
    assert summary.index("## E1") < summary.index("## E5")


def test_bad_runner_arguments(tmp_path):
    with pytest.raises(ConfigError, match="seeds"):
        reproduce(["E5"], seeds=0, out=tmp_path, progress=False)
    with pytest.raises(ConfigError, match="workers"):
        reproduce(["E5"], workers=0, out=tmp_path, progress=False)
    with pytest.raises(ConfigError, match="backend"):
        reproduce(["E5"], backend="slurm", out=tmp_path, progress=False)


def test_ray_backend_gives_the_same_tables(tmp_path, uninterrupted):
    ray = pytest.importorskip("ray")
    try:
        reproduce(out=tmp_path, backend="ray", workers=2, **SUITE)
    finally:
        if ray.is_initialized():
            ray.shutdown()
    assert tables(tmp_path) == tables(uninterrupted)
