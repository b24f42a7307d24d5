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
