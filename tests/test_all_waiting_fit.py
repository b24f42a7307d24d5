"""When every waiting job fits in the free GPUs, a preemptive scheduler starts them all without ranking.

``Scheduler.allocate`` then skips its keyed paths (:func:`evalstop_gym.policy.all_waiting_fit`): the plan
keeps every active job, whatever the key. Checked here: the shortcut by hand, and in lockstep over whole
episodes against the same scheduler with the shortcut switched off (its kept queue and running order see
every scheduling point) and against the plain sorting path (every active job keyed and sorted); the
shortcut's kept orders, which skip the points it answers, must still give the same plans afterwards.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalstop_gym import WorkloadConfig, generate, policy
from evalstop_gym.baselines import SCHEDULERS
from evalstop_gym.baselines.ties import ArrivalTies
from evalstop_gym.policy import NO_CHANGE, Plan, apply_plan
from evalstop_gym.simulator import DONE, EVAL, Simulator


class _View:
    def __init__(self, gpus):
        self.gpus = gpus


class _Cluster:
    def __init__(self, free, *gpus):
        self.free_gpus = free
        self.waiting = {10 + i: _View(g) for i, g in enumerate(gpus)}


def test_all_waiting_fit_by_hand():
    assert policy.all_waiting_fit(_Cluster(4, 1, 2)) == [10, 11]      # 3 of 4 free GPUs
    assert policy.all_waiting_fit(_Cluster(4, 1, 3)) == [10, 11]      # exactly 4
    assert policy.all_waiting_fit(_Cluster(4, 1, 2, 2)) is None       # 5 > 4
    assert policy.all_waiting_fit(_Cluster(0, 1)) is None
    assert policy.all_waiting_fit(_Cluster(0)) == []                  # nothing waits


# every preemptive scheduler that allocates through Scheduler.allocate, and one under arrival ties
PREEMPTIVE = {name: (lambda cls=cls: cls()) for name, cls in SCHEDULERS.items()
              if cls.preemptive and "allocate" not in vars(cls)}
PREEMPTIVE["srtf-est, arrival ties"] = lambda: ArrivalTies(SCHEDULERS["srtf-est"]())


def test_the_shortcut_covers_the_kept_paths():
    assert {"srtf-est", "srtf-progress", "lossaware"} <= set(PREEMPTIVE)


def without_shortcut(p, c) -> Plan:
    with pytest.MonkeyPatch.context() as m:
        m.setattr(policy, "all_waiting_fit", lambda cluster: None)
        return p.schedule(c)


def plan_tuple(plan):
    return tuple(plan.preempt), tuple(plan.start), plan.wakeup_h


def lockstep(name, w, stop) -> tuple[int, int]:
    """Drive ``name`` on ``w``; at each scheduling point its plan must equal its twins'. Returns the
    scheduling points and how many of them the shortcut answered."""
    fast, kept, sorting = PREEMPTIVE[name](), PREEMPTIVE[name](), PREEMPTIVE[name]()
    sorting.static_key = False  # every active job keyed and sorted at every point (no kept orders)
    for p in (fast, kept, sorting):
        p.reset()
    sim = Simulator(w)
    c, points, short = sim.cluster, 0, 0
    while (kind := sim.advance()) != DONE:
        if kind == EVAL:
            if stop and sim.decision_job.consecutive_declines >= 2:
                sim.stop(sim.decision_job.job_id)
            continue
        fits = policy.all_waiting_fit(c)
        plan = fast.schedule(c)
        assert plan_tuple(plan) == plan_tuple(without_shortcut(kept, c)) == plan_tuple(without_shortcut(sorting, c))
        if fits is not None:
            assert (plan is NO_CHANGE) if not c.waiting else (plan.preempt == [] and plan.start == list(c.waiting))
        points, short = points + 1, short + (fits is not None)
        apply_plan(sim, plan)
    return points, short


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(sorted(PREEMPTIVE)), jobs=st.integers(1, 150), load=st.floats(0.2, 3.0),
       gpus=st.sampled_from([16, 24, 32]), seed=st.integers(0, 10_000), stop=st.booleans(),
       workload=st.sampled_from(["rlhf-heavy", "balanced", "lora-heavy"]))
def test_plans_equal_the_scheduler_without_the_shortcut(name, jobs, load, gpus, seed, stop, workload):
    lockstep(name, generate(WorkloadConfig(jobs=jobs, load=load, gpus=gpus, seed=seed, workload=workload)), stop)


@pytest.mark.parametrize("name", sorted(PREEMPTIVE))
def test_an_episode_plays_both_the_shortcut_and_the_keyed_paths(name):
    points, short = lockstep(name, generate(WorkloadConfig(jobs=120, load=1.5, gpus=16, seed=3)), True)
    assert 0 < short < points
