"""Tiresias in a world where a resume costs time: the resume is not attained service.

Tiresias ranks a job by the GPU time it has spent training (Gu et al., NSDI 2019; in the reference
simulator a resume is free, so time run and progress are one). The time a resumed job spends saving,
restoring its checkpoint and warming up holds its GPUs without training; counted as service, it pushed
jobs down the queues before they trained, and resumes dearer than the first threshold livelocked.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalstop_gym.baselines import Tiresias
from evalstop_gym.policy import drive
from evalstop_gym.simulator import Simulator
from evalstop_gym.timebase import TICKS_PER_HOUR
from evalstop_gym.workload import workload_from_jobs


def three_jobs(restart_h: float):
    """3 GPUs. A (2 GPUs, 4 h) at 0, C (2 GPUs, 3 h) at 0.1 h, D (1 GPU, 0.2 h) at 2.2 h; a resume costs
    ``restart_h``. Five evals a job, so no checkpoint falls on a queue jump below."""
    jobs = [dict(submit_h=0.0, gpus=2, length_h=4.0), dict(submit_h=0.1, gpus=2, length_h=3.0),
            dict(submit_h=2.2, gpus=1, length_h=0.2)]
    w = workload_from_jobs(jobs, total_gpus=3, evals_per_job=5)
    return dataclasses.replace(w, restart_h=np.full(3, restart_h))


def test_a_resumes_time_does_not_count_toward_a_demotion():
    # Thresholds 2 and 4 GPU-hours: 1 h and 2 h of training for a 2-GPU job; a resume takes 0.5 h.
    # 0.0  A starts (queue 0).          0.1  C arrives, 1 GPU is free: it waits.
    # 1.0  A has trained 1 h: queue 1; C (queue 0) starts, A is preempted.
    # 2.0  C has trained 1 h: queue 1, behind A, which waits there: A resumes (resume until 2.5), C is preempted.
    # 2.2  D arrives (queue 0) and takes the free GPU, a scheduling point in the middle of A's resume;
    # 2.4  D completes.
    # 3.5  A has trained 1 + 1 = 2 h (2.5 to 3.5): queue 2; C (queue 1) resumes (until 4.0), A is preempted.
    #      Counting the resume, A would have gone down at 3.0 after training 0.5 h.
    # 5.0  C has trained 1 + 1 = 2 h: queue 2, behind A: A resumes (until 5.5), C is preempted.
    # 7.5  A completes: 2 h left to train from 5.5.   7.5  C resumes (until 8.0); 9.0  C completes (1 h left).
    # Counting resumes as service gives A 7.0 (down at 3.0, resumes at 4.0 with 2.5 h left), C 9.0.
    sim = Simulator(three_jobs(0.5))
    out = drive(sim, Tiresias(thresholds_gpu_h=(2.0, 4.0), promote_knob=None))
    assert out.finish_h.tolist() == pytest.approx([7.5, 9.0, 2.4], abs=1e-9)
    assert sim.outcome().preemptions == 4
    # each of A and C resumed twice, D never: the views' resume time is what the simulator charged
    assert [sim.views[j].restore_ticks for j in range(3)] == [TICKS_PER_HOUR, TICKS_PER_HOUR, 0]


def test_without_resume_costs_the_same_jobs_follow_the_plain_rule():
    # The same episode with free resumes: A down to queue 2 at 3.0 (trained 1 + 1), C resumes then, trains
    # 1 h more to 4.0 (queue 2, behind A); A resumes at 4.0 with 2 h left: 6.0; C then 1 h: 7.0.
    sim = Simulator(three_jobs(0.0))
    out = drive(sim, Tiresias(thresholds_gpu_h=(2.0, 4.0), promote_knob=None))
    assert out.finish_h.tolist() == pytest.approx([6.0, 7.0, 2.4], abs=1e-9)
    assert [sim.views[j].restore_ticks for j in range(3)] == [0, 0, 0]


def test_a_resume_cut_short_counts_only_the_time_it_ran():
    # one 1-GPU job: started at 0, preempted at 0.25 h, resumed at 0.5 h (a 0.2 h resume), preempted again at
    # 0.625 h in the middle of it: 0.125 h of resume time so far, none of it training (times in binary fractions
    # of an hour, exact in ticks)
    w = dataclasses.replace(workload_from_jobs([dict(submit_h=0.0, gpus=1, length_h=1.0)], total_gpus=1,
                                               evals_per_job=2), restart_h=np.array([0.2]))
    sim = Simulator(w)
    sim.advance()
    sim.start(0)
    for at, act in ((0.25, sim.preempt), (0.5, sim.start), (0.5625, None), (0.625, sim.preempt)):
        sim.request_wakeup(at)
        sim.advance()
        v = sim.views[0]
        if act is None:  # in the middle of the resume: its time so far, as the clock moves
            assert v.restore_ticks == TICKS_PER_HOUR // 16
        else:
            act(0)
    assert v.restore_ticks == TICKS_PER_HOUR // 8
    assert v.attained_ticks - v.restore_ticks == TICKS_PER_HOUR // 4


def test_the_starvation_guard_counts_a_resume_as_time_the_job_held_its_gpus():
    # 1 GPU, one threshold of 1 GPU-hour, promote_knob 1, resumes of 0.5 h. A (4 h) at 0, B (0.9 h) at 1.5 h,
    # C (3 h) at 3.15 h. A job below queue 0 goes back to queue 0 once it has waited, since it last ran after
    # a promotion, as long as it has held its GPUs since that promotion (resumes included).
    # 0.0   A starts; 1.0 A goes to queue 1.      1.5  B preempts A (A held 1.5 h, waited 0).
    # 2.4   B completes; A resumes (until 2.9).    3.15 C preempts A (A trained 1.75 h, held 2.25 h, waited 0.9 h).
    # 4.15  C goes to queue 1 (trained 1 h); A, waiting there first, resumes (until 4.65); C is preempted.
    # 5.15  C has waited as long as it held its GPUs (1 h): queue 0; it preempts A (trained 2.25 h, held
    #       3.25 h, waited 1.9 h) and resumes (until 5.65).
    # 6.5   A has waited 3.25 h: queue 0, behind C, which runs there.
    # 6.65  C has trained 1 h since its promotion: queue 1; A resumes (until 7.15); C is preempted.
    # 8.15  A has trained 1 h since its promotion: queue 1; C has waited 1.5 h, as long as it held its GPUs
    #       since its promotion (5.15 to 6.65): queue 0; C resumes (until 8.65), A is preempted.
    # 9.65  C completes (2 h trained, 1 h left); A resumes (until 10.15): 0.75 h left, 10.9.
    # Counting only training in the guard, C would wait 1 h (not 1.5 h) from 6.65 and end at 10.15.
    jobs = [dict(submit_h=0.0, gpus=1, length_h=4.0), dict(submit_h=1.5, gpus=1, length_h=0.9),
            dict(submit_h=3.15, gpus=1, length_h=3.0)]
    w = dataclasses.replace(workload_from_jobs(jobs, total_gpus=1, evals_per_job=5), restart_h=np.full(3, 0.5))
    sim = Simulator(w)
    out = drive(sim, Tiresias(thresholds_gpu_h=(1.0,), promote_knob=1.0))
    assert out.finish_h.tolist() == pytest.approx([10.9, 2.4, 9.65], abs=1e-9)
    assert sim.outcome().preemptions == 6


class Watched(Tiresias):
    """Tiresias that checks, at each of its scheduling points, where its jobs stand against the thresholds."""

    def schedule(self, cluster):
        plan = super().schedule(cluster)
        limits = [round(t * TICKS_PER_HOUR) for t in self.thresholds_gpu_h]
        for v in [*cluster.running.values(), *cluster.waiting.values()]:
            # GPU-ticks trained since the job's last promotion (the starvation guard's reset)
            q, trained = self.queue(v), (v.attained_ticks - v.restore_ticks - self._offset.get(v.job_id, 0)) * v.gpus
            if q > 0:  # no job goes down before it has trained its way there
                assert trained >= limits[q - 1], (v, q, trained)
            if q < len(limits) and v.status == "running" and self.demotion_timer == "exact":
                # nor stays up past it by more than a resume's time (its own: the checks look again
                # while the job resumes) and the tick a crossing is rounded to
                assert trained - limits[q] < v.gpus * (v.restore_ticks + 1), (v, q, trained)
        return plan


random_jobs = st.lists(st.tuples(st.sampled_from([0.0, 0.05, 0.3, 1.0]),   # gap to the previous submit, h
                                 st.sampled_from([0.1, 0.7, 1.5, 4.0]),    # length, h
                                 st.sampled_from([1, 2, 4]),               # GPUs
                                 st.sampled_from([0.0, 0.01, 0.2, 1.5])),  # a resume's cost, h
                       min_size=2, max_size=8)


@settings(max_examples=80, deadline=None)
@given(rows=random_jobs, knob=st.sampled_from([None, 2.0]), order=st.sampled_from(["queue", "arrival"]),
       timer=st.sampled_from(["exact", "reference"]))
def test_resumes_neither_hold_jobs_up_nor_push_them_down_before_they_train(rows, knob, order, timer):
    # thresholds of 1 and 3 GPU-hours against resumes of up to 1.5 h on 4-GPU jobs (6 GPU-hours): every
    # episode ends, and each scheduling point checks the jobs' queues (Watched; the reference's timer is
    # late by design, so only the first check there)
    t, jobs = 0.0, []
    for gap, length, gpus, _ in rows:
        t += gap
        jobs.append(dict(submit_h=t, gpus=gpus, length_h=length))
    w = dataclasses.replace(workload_from_jobs(jobs, total_gpus=4, evals_per_job=2),
                            restart_h=np.array([r[3] for r in rows]))
    out = drive(Simulator(w), Watched(thresholds_gpu_h=(1.0, 3.0), promote_knob=knob, order=order,
                                      demotion_timer=timer))
    assert np.isfinite(out.finish_h).all()


def test_every_variant_finishes_with_the_longest_resume_a_world_allows():
    import subprocess
    import sys

    # 24-hour resumes (warmup_s at its bound): the reference's timer once fired at every tick of a resume
    # (no answer), and the guard once counted training only (order="arrival": 54,617 preemptions, 12 s)
    code = ("from evalstop_gym.api import simulate; from evalstop_gym.baselines import Tiresias; "
            "from evalstop_gym.config import WorldModel\n"
            "for kw in ({}, {'demotion_timer': 'reference'}, {'order': 'arrival'}, {'promote_knob': None}):\n"
            "    m = simulate(Tiresias(**kw), jobs=60, gpus=64, mix={'rlhf': 1.0}, seed=1,\n"
            "                 world=WorldModel(warmup_s=(86400.0, 86400.0)))\n"
            "    print(m['jobs'], m['preemptions'])")
    try:
        done = subprocess.run([sys.executable, "-c", code], timeout=15, capture_output=True, text=True)
    except subprocess.TimeoutExpired:
        pytest.fail("no answer in 15 s")
    assert done.returncode == 0, done.stderr
    runs = [tuple(map(int, line.split())) for line in done.stdout.splitlines()]
    assert [jobs for jobs, _ in runs] == [60] * 4
    assert all(preemptions < 10_000 for _, preemptions in runs), runs
