"""Running jobs kept in running-key order give exactly the plans of re-ranking every job.

The reference is the plain sorting allocator (every active job keyed and
sorted at every scheduling point); the kept-queue allocator that re-keys only
running jobs is checked too. Plans are compared at every scheduling point, not
only the final metrics.
"""

import math
import os
import random

import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from evalstop_gym.baselines import SCHEDULERS
from evalstop_gym import WorkloadConfig, generate
from evalstop_gym.cluster import PLACEMENTS, uniform
from evalstop_gym.policy import Scheduler, apply_plan
from evalstop_gym.simulator import DONE, EVAL, Simulator


class NewestHourFirst(Scheduler):
    """Test scheduler: newest submit hour first, preemptive.

    Whole hours make groups of equal keys whose running keys differ, the case
    where the sorting path ranks by start order instead of running key. (In
    SRTF-Est such a group, the jobs past their estimates, ranks first and
    always fits, so only a scheduler like this one exercises that walk.)
    """

    name = "newest-hour"
    preemptive = True
    static_key = True
    run_invariant_key = True

    def key(self, job, cluster):
        return math.floor(-job.submit_h)

    def running_key(self, job, cluster):
        return -job.submit_h

    def key_at(self, running_key, cluster):
        return math.floor(running_key)


KEPT = [cls for cls in [*SCHEDULERS.values(), NewestHourFirst] if cls.run_invariant_key]


def twins(cls):
    """The same scheduler re-sorting every job, and re-keying running jobs over the kept queue."""
    return (type(cls.__name__ + "Sorting", (cls,), {"static_key": False})(),
            type(cls.__name__ + "Rekeying", (cls,), {"run_invariant_key": False})())


def plan_tuple(plan):
    return tuple(plan.preempt), tuple(plan.start), plan.wakeup_h, sorted((plan.placed or {}).items())


def check_nodes(c):
    """No node over-allocated; each running job's GPUs sum to its demand; the counts add up."""
    if c.node_free is None:
        return
    used = [0] * len(c.node_free)
    for v in c.running.values():
        assert sum(g for _, g in v.nodes) == v.gpus
        for n, g in v.nodes:
            used[n] += g
    per = c.spec.gpus_per_node
    assert all(0 <= f == per - u for f, u in zip(c.node_free, used)) and sum(c.node_free) == c.free_gpus


def lockstep(workload, cls, k=None, meddle=0.0, seed=0):
    """Drive ``cls`` on ``workload``; at every scheduling point its plan must equal its twins'.

    ``k``: stop a job at k consecutive declines. ``meddle``: probability that,
    instead of the plan, random legal preemptions and starts are applied (so the
    kept orders see changes they did not plan). Returns the number of points.
    """
    rnd = random.Random(seed)
    fast, refs = cls(), twins(cls)
    for p in (fast, *refs):
        p.reset()
    sim = Simulator(workload)
    c, points = sim.cluster, 0
    while True:
        kind = sim.advance()
        if kind == DONE:
            return points
        if kind == EVAL:
            if k is not None and sim.decision_job.consecutive_declines >= k:
                sim.stop(sim.decision_job.job_id)
            continue
        plan = fast.schedule(c)
        for ref in refs:
            assert plan_tuple(ref.schedule(c)) == plan_tuple(plan), f"{type(ref).__name__} at t={c.now_h}"
        points += 1
        if rnd.random() >= meddle:
            apply_plan(sim, plan)
            check_nodes(c)
            continue
        for j in list(c.running):
            if rnd.random() < 0.3:
                sim.preempt(j)
        for j in list(c.waiting):
            if c.waiting[j].gpus <= c.largest_fit() and rnd.random() < 0.7:
                sim.start(j)
        if not c.running and c.waiting:  # keep the episode moving
            apply_plan(sim, cls().schedule(c))
        check_nodes(c)


def test_srtf_est_keeps_its_running_jobs_in_order():
    assert SCHEDULERS["srtf-est"].run_invariant_key


@settings(max_examples=25, deadline=None)
@given(cls=st.sampled_from(KEPT), jobs=st.integers(1, 150), load=st.floats(0.5, 3.0),
       gpus=st.sampled_from([16, 24, 32]), seed=st.integers(0, 10_000),
       workload=st.sampled_from(["rlhf-heavy", "balanced", "lora-heavy"]), stop=st.booleans(),
       estimate_error=st.sampled_from([0.0, 0.3, 0.8]))
def test_plans_equal_re_ranking_every_job(cls, jobs, load, gpus, seed, workload, stop, estimate_error):
    w = generate(WorkloadConfig(jobs=jobs, load=load, gpus=gpus, seed=seed, workload=workload,
                                estimate_error=estimate_error))
    lockstep(w, cls, k=2 if stop else None)


@settings(max_examples=15, deadline=None)
@given(cls=st.sampled_from(KEPT), jobs=st.integers(1, 80), seed=st.integers(0, 10_000),
       meddle=st.floats(0.1, 0.9))
def test_plans_equal_after_decisions_the_scheduler_did_not_make(cls, jobs, seed, meddle):
    # a driver may preempt, restart and start jobs between calls (the environments do)
    w = generate(WorkloadConfig(jobs=jobs, load=2.0, gpus=16, seed=seed, workload="balanced"))
    lockstep(w, cls, meddle=meddle, seed=seed)


@settings(max_examples=20, deadline=None)
@given(cls=st.sampled_from(KEPT), jobs=st.integers(1, 120), load=st.floats(0.5, 3.0), seed=st.integers(0, 10_000),
       placement=st.sampled_from(PLACEMENTS), per=st.sampled_from([4, 8]), stop=st.booleans(),
       meddle=st.sampled_from([0.0, 0.3]))
def test_plans_and_placements_equal_on_nodes(cls, jobs, load, seed, placement, per, stop, meddle):
    # the keep set is decided on the GPU count by either path, then placed by the same code
    s = uniform(32 // per, per, placement)
    w = generate(WorkloadConfig(jobs=jobs, load=load, gpus=32, seed=seed, workload="balanced", cluster=s))
    lockstep(w, cls, k=2 if stop else None, meddle=meddle, seed=seed)


def test_the_lockstep_check_sees_many_preemptions():
    # guard against a vacuous comparison: the test workloads must exercise preemption
    w = generate(WorkloadConfig(jobs=120, load=2.5, gpus=16, seed=3, workload="balanced"))
    fast = NewestHourFirst()
    fast.reset()
    sim = Simulator(w)
    preempted = 0
    while (kind := sim.advance()) != DONE:
        if kind != EVAL:
            plan = fast.schedule(sim.cluster)
            preempted += len(plan.preempt)
            apply_plan(sim, plan)
    assert preempted >= 20


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PHILLY = os.path.join(REPO, "..", "shared", "traces", "philly_jobs_pollux.csv")


@pytest.mark.skipif(not os.path.exists(PHILLY), reason="../shared/traces/philly_jobs_pollux.csv is not here")
def test_plans_equal_on_a_replayed_philly_slice():
    # real arrivals, demands (1 to 128 GPUs) and estimates that jobs overrun
    from evalstop_gym.traces import read_trace, replay_trace, trace_config

    w, _ = replay_trace(read_trace(PHILLY, "philly"), trace_config(load=1.5, seed=2), jobs=3000, sample=True,
                        rescale="cluster")
    assert lockstep(w, SCHEDULERS["srtf-est"], k=2) > 3000
