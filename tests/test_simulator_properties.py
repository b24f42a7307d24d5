"""Invariants of the simulator under arbitrary (random but legal) decisions."""

import heapq
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from evalstop_gym import simulator
from evalstop_gym.baselines import FIFO, EvalStop, make_policy
from evalstop_gym import WorkloadConfig, generate
from evalstop_gym.metrics import compute_metrics
from evalstop_gym.policy import apply_plan, drive
from evalstop_gym.simulator import DONE, EVAL, Simulator
from evalstop_gym.timebase import TICKS_PER_HOUR, to_ticks
from evalstop_gym.view import COMPLETED, RUNNING, STOPPED, WAITING
from evalstop_gym.workload import workload_from_jobs

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


def random_decisions(sim: Simulator, kind: int, rnd: random.Random, stop: float) -> None:
    """Seeded random legal decisions: at an eval, stop with probability ``stop``; at a scheduling
    point, preempt some running jobs and start some waiting ones that fit."""
    c = sim.cluster
    if kind == EVAL:
        if rnd.random() < stop:
            sim.stop(sim.decision_job.job_id)
        return
    for j in list(c.running):
        if rnd.random() < 0.2:
            sim.preempt(j)
    for j, v in list(c.waiting.items()):
        if v.gpus <= c.free_gpus and (rnd.random() < 0.7 or not c.running):
            sim.start(j)


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
        random_decisions(sim, kind, rnd, stop=0.1)
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


def all_events_in_one_heap(sim: Simulator) -> Simulator:
    """The plain design the simulator's event queue must equal: arrivals pushed into the one heap
    as ``(submit tick, job id)`` beside every other event, none read from the sorted arrival list,
    and void checkpoints left in the heap until their time."""
    sim._heap.extend((t, j, simulator._ARRIVAL, j, 0) for j, t in enumerate(sim._submit))
    heapq.heapify(sim._heap)
    sim._arrival_ticks = [simulator._NEVER]
    sim._VOID_SLACK = float("inf")
    return sim


def compacting_often(sim: Simulator) -> Simulator:
    sim._VOID_SLACK = 0  # drop void checkpoints whenever they are half of the heap
    return sim


def void_in_heap(sim: Simulator) -> int:
    """Void checkpoints, and timers replaced or withdrawn since they were set."""
    return sum(1 for t, seq, kind, j, ep in sim._heap
               if (kind == simulator._CHECKPOINT and ep != sim._epoch[j])
               or (j == simulator._TIMER and seq != sim._timer_seq))


def decision_log(sim: Simulator, decision_seed: int, policy=None) -> list:
    """Every decision point (kind, tick, job, waiting and running ids) under seeded random decisions,
    or under ``policy``; then the outcome's per-job arrays."""
    rnd, c, log = random.Random(decision_seed), sim.cluster, []
    if policy is not None:
        policy.reset()
    while True:
        kind = sim.advance()
        assert sim._void == void_in_heap(sim)
        log.append((kind, c.now_ticks, sim.decision_job and sim.decision_job.job_id, list(c.waiting),
                    list(c.running), sim.eval_due_now()))
        if kind == DONE:
            break
        if policy is not None:
            if kind == EVAL:
                if policy.should_stop(sim.decision_job, c):
                    sim.stop(sim.decision_job.job_id)
            else:
                apply_plan(sim, policy.schedule(c))
            continue
        random_decisions(sim, kind, rnd, stop=0.2)
        if kind != EVAL and rnd.random() < 0.3:
            sim.request_wakeup(c.now_h + rnd.choice([0.001, 0.5, 2.0]))
    out = sim.outcome()
    return log + [a.tolist() for a in (out.finish_ticks, out.service_ticks, out.first_start_ticks)]


# whole-hour submits and lengths: many arrivals share an instant with each other and with checkpoints
tied_jobs = st.lists(st.tuples(st.sampled_from([0, 0, 0, 1, 2]), st.sampled_from([1, 2, 3, 4, 6]),
                               st.sampled_from([1, 1, 2, 4])), min_size=1, max_size=30)


@settings(max_examples=80, deadline=None)
@given(rows=tied_jobs, evals=st.sampled_from([1, 2, 3, 4]), decision_seed=st.integers(0, 1000),
       policy=st.sampled_from([None, "fifo", "srtf-est", "tiresias"]))
def test_event_queue_gives_the_order_of_one_plain_heap(rows, evals, decision_seed, policy):
    t, jobs = 0.0, []
    for i, (gap, length, gpus) in enumerate(rows):
        t += gap
        scores = [(i * 7 + k * 3) % 5 / 4 for k in range(evals)]  # some decline: EvalStop(k=1) stops jobs
        jobs.append(dict(submit_h=t, gpus=gpus, length_h=float(length), est_length_h=float(length) + gap,
                         gold=scores, observed=scores))
    w = workload_from_jobs(jobs, total_gpus=4, evals_per_job=evals)
    make = (lambda: None) if policy is None else (lambda: make_policy(policy, "evalstop", k=1))
    plain = decision_log(all_events_in_one_heap(Simulator(w)), decision_seed, make())
    assert decision_log(Simulator(w), decision_seed, make()) == plain
    assert decision_log(compacting_often(Simulator(w)), decision_seed, make()) == plain
