"""Exact simulated time, checked against an independent reference simulator.

``reference`` below is a deliberately plain FIFO first-fit / SRTF (exact
lengths) event loop over integer seconds and Python lists. It shares no code
with the package. The package must agree with it exactly: every job's finish
second, the average JCT and the preemption count, on random workloads full of
same-second events and on real replayed Philly jobs. Without a stopper, no
metric may depend on how many eval checkpoints a job has.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalstop_gym.baselines import make_policy
from evalstop_gym import WorkloadConfig, generate
from evalstop_gym.metrics import compute_metrics
from evalstop_gym.policy import drive
from evalstop_gym.simulator import Simulator
from evalstop_gym.timebase import TICKS_PER_HOUR
from evalstop_gym.workload import workload_from_jobs

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PHILLY = os.path.join(REPO, "..", "shared", "traces", "philly_jobs_pollux.csv")
needs_philly = pytest.mark.skipif(not os.path.exists(PHILLY), reason="../shared/traces/philly_jobs_pollux.csv "
                                  "is not here (it ships beside the repository, not in it)")


# -- the reference: integer seconds, plain lists ------------------------------------------------
def reference(jobs: list[tuple[int, int, int]], total_gpus: int, policy: str):
    """Simulate ``jobs`` = [(submit_s, duration_s, gpus)] in submit order under ``"fifo"`` or ``"srtf"``.

    FIFO: at each instant, waiting jobs in submit order (ties: queue order) start
    if they fit (first-fit). SRTF: rank running jobs (in the order they started)
    then waiting jobs (in the order they queued) by remaining seconds with a
    stable sort, keep each job that fits in turn, preempt running jobs not kept
    (they queue again, keeping their progress) and start waiting jobs kept.
    Returns (finish second per job, number of preemptions).
    """
    n = len(jobs)
    gpus = [g for _, _, g in jobs]
    remaining = [d for _, d, _ in jobs]    # seconds of work left (as of ``since`` for running jobs)
    since = [0] * n                        # second a running job last started
    finish = [None] * n
    waiting: list[int] = []
    running: list[int] = []
    free, arrived, preemptions = total_gpus, 0, 0
    while arrived < n or waiting or running:
        ends = [since[j] + remaining[j] for j in running]
        t = min(ends + ([jobs[arrived][0]] if arrived < n else []))
        for j in [j for j in running if since[j] + remaining[j] == t]:
            running.remove(j)
            free += gpus[j]
            remaining[j] = 0
            finish[j] = t
        while arrived < n and jobs[arrived][0] == t:
            waiting.append(arrived)
            arrived += 1
        if policy == "fifo":
            for j in sorted(waiting, key=lambda j: jobs[j][0]):
                if gpus[j] <= free:
                    waiting.remove(j)
                    running.append(j)
                    since[j] = t
                    free -= gpus[j]
            continue
        left = {j: remaining[j] - (t - since[j]) for j in running}
        left.update({j: remaining[j] for j in waiting})
        keep, room = set(), total_gpus
        for j in sorted(running + waiting, key=lambda j: left[j]):
            if gpus[j] <= room:
                keep.add(j)
                room -= gpus[j]
        to_start = [j for j in waiting if j in keep]
        for j in [j for j in running if j not in keep]:
            remaining[j] = left[j]
            running.remove(j)
            waiting.append(j)
            free += gpus[j]
            preemptions += 1
        for j in to_start:
            waiting.remove(j)
            running.append(j)
            since[j] = t
            free -= gpus[j]
    return finish, preemptions


def package(jobs, total_gpus: int, policy: str, evals: int):
    """The same jobs through the package (SRTF-Est with exact estimates = SRTF)."""
    w = workload_from_jobs([{"submit_h": s / 3600, "length_h": d / 3600, "gpus": g} for s, d, g in jobs],
                           total_gpus, evals_per_job=evals)
    out = drive(Simulator(w), make_policy("fifo" if policy == "fifo" else "srtf-est"))
    return out


def assert_agree(jobs, total_gpus, policy, evals):
    finish, preemptions = reference(jobs, total_gpus, policy)
    out = package(jobs, total_gpus, policy, evals)
    ticks_per_s = TICKS_PER_HOUR // 3600
    assert (out.finish_ticks % ticks_per_s == 0).all()
    assert (out.finish_ticks // ticks_per_s).tolist() == finish
    assert out.preemptions == preemptions
    ref_avg_jct_h = sum(f - s for f, (s, _, _) in zip(finish, jobs)) / len(jobs) / 3600
    assert compute_metrics(out)["avg_jct_h"] == pytest.approx(ref_avg_jct_h, rel=1e-12)


# integer-second workloads with many same-second submits and completions
random_jobs = st.lists(st.tuples(st.sampled_from([0, 0, 1, 7, 30, 360]),     # gap to the previous submit, s
                                 st.sampled_from([1, 60, 120, 360, 1080, 3600]),   # duration, s
                                 st.sampled_from([1, 1, 2, 3, 4, 8])),
                       min_size=1, max_size=40)


def as_jobs(rows):
    t, jobs = 0, []
    for gap, dur, g in rows:
        t += gap
        jobs.append((t, dur, g))
    return jobs


@settings(max_examples=150, deadline=None)
@given(rows=random_jobs, policy=st.sampled_from(["fifo", "srtf"]), evals=st.sampled_from([1, 2, 3, 10, 37]))
def test_package_agrees_with_the_reference_on_random_workloads(rows, policy, evals):
    assert_agree(as_jobs(rows), 8, policy, evals)


def philly_jobs(n: int) -> list[tuple[int, int, int]]:
    from evalstop_gym.traces import load_trace, trace_config
    w = load_trace(PHILLY, "philly", trace_config(gpus=128), jobs=n, rescale="none", min_duration_s=60)
    submit_s, dur_s = np.rint(w.submit_h * 3600), np.rint(w.length_h * 3600)
    assert np.abs(submit_s - w.submit_h * 3600).max() < 1e-6   # the trace records whole seconds
    return list(zip(submit_s.astype(int).tolist(), dur_s.astype(int).tolist(), w.gpus.tolist()))


@needs_philly
@pytest.mark.parametrize("policy", ["fifo", "srtf"])
def test_package_agrees_with_the_reference_on_2000_replayed_philly_jobs(policy):
    jobs = philly_jobs(2000)
    finish, _ = reference(jobs, 64, policy)
    queued = sum(f - s - d for f, (s, d, _) in zip(finish, jobs))
    assert queued > 0  # the cluster is contended, so the comparison means something
    assert_agree(jobs, 64, policy, 10)


# -- same-instant events ----------------------------------------------------------------------------
def test_two_jobs_ending_in_the_same_second_free_their_gpus_together():
    """A ends at 0 + 0.3 h; B at 0.1 + 0.2 h (0.30000000000000004 in floating point): one instant.

    C (4 GPUs, queued first) then starts at 0.3 h on the 4 GPUs A and B free
    together; D (1 GPU) must not slip in between two near-instants.
    """
    w = workload_from_jobs([
        {"submit_h": 0.0, "gpus": 2, "length_h": 0.3},     # A
        {"submit_h": 0.1, "gpus": 2, "length_h": 0.2},     # B
        {"submit_h": 0.12, "gpus": 4, "length_h": 1.0},    # C
        {"submit_h": 0.13, "gpus": 1, "length_h": 0.5},    # D
    ], total_gpus=4, evals_per_job=10)
    out = drive(Simulator(w), make_policy("fifo"))
    h = TICKS_PER_HOUR
    assert out.finish_ticks[0] == out.finish_ticks[1] == 0.3 * h
    assert out.first_start_ticks[2] == 0.3 * h                # C starts the instant A and B end
    assert out.first_start_ticks[3] == (0.3 + 1.0) * h        # D waits for C
    assert out.jct_h.tolist() == pytest.approx([0.3, 0.2, 1.3 - 0.12, 1.8 - 0.13], abs=1e-12)
    assert compute_metrics(out)["avg_jct_h"] == pytest.approx((0.3 + 0.2 + 1.18 + 1.67) / 4, abs=1e-12)


# -- the eval count never moves a schedule that does not look at evals ---------------------------
SCHEDULE_METRICS = ("avg_jct_h", "p50_jct_h", "p99_jct_h", "makespan_h", "utilization", "avg_queue_h",
                    "gpu_hours", "preemptions", "jobs_stopped")
BLIND_SCHEDULERS = ("fifo", "sjf-est", "srtf-est", "tiresias")  # lossaware reads loss histories


def schedule_under(w, scheduler: str, evals: int):
    """Run ``w`` with its curves resampled on ``evals`` checkpoints (same jobs and times)."""
    grid = np.linspace(0.0, 1.0, evals)
    rows = lambda a: np.array([np.interp(grid, np.linspace(0, 1, a.shape[1]), r) for r in a])  # noqa: E731
    c = w.curves
    curves = dataclasses.replace(c, gold=rows(c.gold), eval_z=rows(c.eval_z), loss=rows(c.loss),
                                 proxy=rows(c.proxy))
    out = drive(Simulator(dataclasses.replace(w, curves=curves)), make_policy(scheduler))
    m = compute_metrics(out)
    return out.finish_ticks.tolist(), {k: m[k] for k in SCHEDULE_METRICS}


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), scheduler=st.sampled_from(BLIND_SCHEDULERS),
       load=st.sampled_from([0.5, 1.0, 2.0]), workload=st.sampled_from(["rlhf-heavy", "balanced", "lora-heavy"]))
def test_without_a_stopper_no_metric_depends_on_the_eval_count(seed, scheduler, load, workload):
    cfg = WorkloadConfig(workload=workload, jobs=40, load=load, seed=seed)
    by_evals = [schedule_under(generate(cfg), scheduler, e) for e in (1, 2, 10, 37)]
    assert all(r == by_evals[0] for r in by_evals[1:])
    # and generating with another eval count draws the same jobs, so it schedules them the same
    direct = [compute_metrics(drive(Simulator(generate(cfg.replace(evals_per_job=e))), make_policy(scheduler)))
              for e in (1, 37)]
    assert [{k: m[k] for k in SCHEDULE_METRICS} for m in direct] == [by_evals[0][1]] * 2


@needs_philly
@pytest.mark.parametrize("scheduler", ["fifo", "srtf-est", "tiresias"])
def test_replayed_philly_schedule_does_not_depend_on_the_eval_count(scheduler):
    from evalstop_gym.traces import load_trace, trace_config
    w = load_trace(PHILLY, "philly", trace_config(gpus=128), jobs=3000, rescale="none", min_duration_s=60)
    by_evals = [schedule_under(w, scheduler, e) for e in (1, 2, 10, 37)]
    assert all(r == by_evals[0] for r in by_evals[1:])


@needs_philly
def test_exact_estimate_srtf_from_the_cli_is_the_reference_srtf(capsys):
    import json

    from evalstop_gym.cli import main as cli_main

    def cli(*extra):
        cli_main(["simulate", "--trace", PHILLY, "--trace-jobs", "500", "--trace-rescale", "none",
                  "--trace-min-duration", "60", "--gpus", "128", "--scheduler", "srtf-est", "--json", *extra])
        return json.loads(capsys.readouterr().out)

    jobs = philly_jobs(500)
    finish, preemptions = reference(jobs, 128, "srtf")
    exact = cli("--estimate-error", "0")
    assert exact["avg_jct_h"] == pytest.approx(sum(f - s for f, (s, _, _) in zip(finish, jobs)) / 500 / 3600,
                                               rel=1e-12)
    assert exact["preemptions"] == preemptions > 0
    assert cli()["avg_jct_h"] != exact["avg_jct_h"]  # the default estimates are noisy
