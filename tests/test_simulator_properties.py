"""Invariants of the simulator under arbitrary (random but legal) decisions."""

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from evalstop_gym.baselines import FIFO, EvalStop
from evalstop_gym import WorkloadConfig, generate
from evalstop_gym.metrics import compute_metrics
from evalstop_gym.policy import drive
from evalstop_gym.simulator import DONE, EVAL, Simulator
from evalstop_gym.timebase import TICKS_PER_HOUR, to_ticks
from evalstop_gym.view import COMPLETED, RUNNING, STOPPED, WAITING

configs = st.builds(
    WorkloadConfig,
    workload=st.sampled_from(["rlhf-heavy", "balanced", "lora-heavy"]),
    jobs=st.integers(1, 40),
    gpus=st.sampled_from([16, 24, 64]),
    load=st.floats(0.3, 3.0),
    noise=st.sampled_from([0.0, 0.02, 0.1]),
    evals_per_job=st.integers(2, 12),
    seed=st.integers(0, 10_000),
)


def random_rollout(cfg, decision_seed):
    """Drive the simulator with random legal decisions, checking invariants at every step."""
    rnd = random.Random(decision_seed)
    sim = Simulator(generate(cfg))
    c = sim.cluster
    last_t, used_gpu_ticks, ends = 0, 0, 0
    while True:
        t_before = c.now_ticks
        used_before = c.total_gpus - c.free_gpus
        kind = sim.advance()
        assert isinstance(c.now_ticks, int) and c.now_ticks >= last_t, "time went back"
        assert c.now_h == c.now_ticks / TICKS_PER_HOUR
        used_gpu_ticks += used_before * (c.now_ticks - t_before)
        last_t = c.now_ticks
        assert 0 <= c.free_gpus <= c.total_gpus
        assert sum(v.gpus for v in c.running.values()) == c.total_gpus - c.free_gpus
        assert all(v.status == RUNNING for v in c.running.values())
        assert all(v.status == WAITING for v in c.waiting.values())
        if kind == DONE:
            break
        if kind == EVAL:
            if rnd.random() < 0.1:
                sim.stop(sim.decision_job.job_id)
            continue
        for j in list(c.running):
            if rnd.random() < 0.2:
                sim.preempt(j)
        for j, v in list(c.waiting.items()):
            if v.gpus <= c.free_gpus and (rnd.random() < 0.7 or not c.running):
                sim.start(j)
    out = sim.outcome()
    statuses = [v.status for v in sim.views]
    assert all(s in (COMPLETED, STOPPED) for s in statuses)            # every job ended ...
    assert c.finished == cfg.jobs                                      # ... exactly once
    assert sum(statuses.count(s) for s in (COMPLETED, STOPPED)) == cfg.jobs
    w = out.workload
    length = to_ticks(w.length_h)
    assert (out.finish_ticks >= out.submit_ticks).all()
    done = ~out.stopped
    # exact integers: a completed job ran exactly its length, whatever preemptions it saw
    assert (out.service_ticks[done] == length[done]).all()
    assert (out.service_ticks[out.stopped] <= length[out.stopped]).all()
    # GPU-time adds up exactly: per-job service x GPUs equals the integral of busy GPUs over time
    assert int((out.service_ticks * w.gpus).sum()) == used_gpu_ticks
    return out


@settings(max_examples=60, deadline=None)
@given(cfg=configs, decision_seed=st.integers(0, 1000))
def test_invariants_under_random_decisions(cfg, decision_seed):
    random_rollout(cfg, decision_seed)


@settings(max_examples=25, deadline=None)
@given(cfg=configs)
def test_same_seed_same_metrics_and_evalstop_never_wastes_more(cfg):
    a = compute_metrics(drive(Simulator(generate(cfg)), EvalStop(FIFO(), k=2)))
    b = compute_metrics(drive(Simulator(generate(cfg)), EvalStop(FIFO(), k=2)))
    assert a == b
    m = compute_metrics(drive(Simulator(generate(cfg)), FIFO()))
    # without stops, every job runs to completion and nothing is stopped
    assert m["jobs_stopped"] == 0 and m["false_positives"] == 0
    assert 0.0 <= m["utilization"] <= 1.0 + 1e-9
    # a stop only ever shortens a job, so it can only cut the GPU-hours run past a true peak
    assert a["compute_waste_gpu_h"] <= m["compute_waste_gpu_h"] + 1e-9
