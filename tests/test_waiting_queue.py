"""The kept waiting queue gives exactly the plans of sorting the whole queue."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalstop_gym.baselines import SCHEDULERS, EvalStop
from evalstop_gym import WorkloadConfig, generate, run_policy

STATIC = [name for name, cls in SCHEDULERS.items() if cls.static_key]


def sorting_twin(cls):
    """The same scheduler with the kept queue switched off (re-sorts at every point)."""
    return type(cls.__name__ + "Sorting", (cls,), {"static_key": False})


def test_the_fast_path_is_used():
    assert {"fifo", "sjf-est", "srtf-est", "lossaware"} <= set(STATIC)


@pytest.mark.parametrize("name", STATIC)
@settings(max_examples=15, deadline=None)
@given(jobs=st.integers(1, 120), load=st.floats(0.5, 3.0), seed=st.integers(0, 10_000),
       workload=st.sampled_from(["rlhf-heavy", "balanced", "lora-heavy"]), stop=st.booleans())
def test_kept_queue_equals_sorting(name, jobs, load, seed, workload, stop):
    w = generate(WorkloadConfig(jobs=jobs, load=load, seed=seed, workload=workload, gpus=32))
    cls = SCHEDULERS[name]
    fast, slow = cls(), sorting_twin(cls)()
    if stop:
        fast, slow = EvalStop(fast), EvalStop(slow)
    assert run_policy(w, fast) == run_policy(w, slow)


def test_a_policy_object_is_reusable_across_episodes():
    # the queue belongs to one episode; a second episode with the same object starts afresh
    policy = SCHEDULERS["srtf-est"]()
    a = run_policy(generate(WorkloadConfig(jobs=60, seed=1)), policy)
    run_policy(generate(WorkloadConfig(jobs=80, seed=2)), policy)
    assert run_policy(generate(WorkloadConfig(jobs=60, seed=1)), policy) == a


class _View:
    """The fields of a job view the queue reads."""

    def __init__(self, job_id, gpus, key, queued_seq):
        self.job_id, self.gpus, self.key, self.queued_seq = job_id, gpus, key, queued_seq


class _Cluster:
    def __init__(self, *views):
        self.waiting = {v.job_id: v for v in views}  # in queued_seq order, as the simulator keeps it


def test_the_queue_follows_starts_it_planned_and_starts_it_did_not():
    from evalstop_gym.waiting_queue import WaitingQueue

    a, b, c = _View(0, 1, 5, 1), _View(1, 2, 3, 2), _View(2, 1, 4, 3)
    cluster = _Cluster(a, b, c)
    q = WaitingQueue(lambda v, cluster: v.key)
    q.sync(cluster)
    assert q.best(1)[2] == 2 and q.best(2)[2] == 1 and q.best(0) is None  # keys: b 3 < c 4 < a 5
    assert q.largest_demand() == 2
    # a plan takes b but is not applied: b still waits, so it is back at the next point
    q.take(q.best(2))
    assert q.best(2)[2] == 2
    q.put_back([(3, 2, 1, b)])
    q.sync(cluster)
    assert q.best(2)[2] == 1
    # the plan is applied this time: b leaves the queue, c is the best job, 1 GPU the largest demand
    q.take(q.best(2))
    q.put_back([(3, 2, 1, b)])
    del cluster.waiting[1]
    q.sync(cluster)
    assert q.best(2)[2] == 2 and q.largest_demand() == 1
    # a driver starts c without a plan: its entry is stale and never returned
    del cluster.waiting[2]
    q.sync(cluster)
    assert q.best(2)[2] == 0
    # c is preempted and waits again under a new stamp, now ranked first (key 1)
    c.queued_seq, c.key = 4, 1
    cluster.waiting[2] = c
    q.sync(cluster)
    assert q.best(1)[2] == 2
    q.take(q.best(1))
    assert q.best(1)[2] == 0 and q.best(2)[2] == 0


def test_a_plan_whose_taken_entries_are_lost_is_an_error():
    from evalstop_gym.simulator import SimulationError
    from evalstop_gym.waiting_queue import WaitingQueue

    a, b = _View(0, 1, 5, 1), _View(1, 2, 3, 2)
    cluster = _Cluster(a, b)
    q = WaitingQueue(lambda v, cluster: v.key)
    q.sync(cluster)
    q.take(q.best(2))  # b's entry, by a plan that is neither applied nor put back: b still waits, unheld
    with pytest.raises(SimulationError, match="holds 1 entries for 2 waiting jobs"):
        q.sync(cluster)
