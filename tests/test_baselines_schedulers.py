"""Base schedulers on tiny hand-built workloads, with JCTs worked out by hand.

Every job here has 4 evals (the default of ``workload_from_jobs``) and no
stopper, so only the scheduler decides. Times are hours.
"""

import pytest

from evalstop_gym.baselines import FIFO, SCHEDULERS, LossAware, SJFEst, SRTFEst, Tiresias
from evalstop_gym.config import ConfigError
from evalstop_gym.policy import drive
from evalstop_gym.simulator import Simulator
from evalstop_gym.view import ClusterView, JobView
from evalstop_gym.workload import workload_from_jobs


def run(jobs, gpus, policy):
    return drive(Simulator(workload_from_jobs(jobs, total_gpus=gpus)), policy)


def test_sjf_est_picks_the_shortest_estimate_not_the_shortest_job():
    # 2 GPUs, every job needs both. J0 runs 0..3. While it runs, J1 (estimate 4 h) arrives
    # at 0.5 and J2 (estimate 1 h, truly 2 h) at 1. At t=3 SJF-Est starts J2 (1 < 4): 3..5,
    # then J1: 5..9. JCTs: J0 3, J1 8.5, J2 4. FIFO would run J1 first (J1 6.5, J2 8).
    jobs = [dict(submit_h=0.0, gpus=2, length_h=3.0),
            dict(submit_h=0.5, gpus=2, length_h=4.0, est_length_h=4.0),
            dict(submit_h=1.0, gpus=2, length_h=2.0, est_length_h=1.0)]
    sjf = run(jobs, 2, SJFEst())
    assert (sjf.finish_h - [0.0, 0.5, 1.0]).tolist() == [3.0, 8.5, 4.0]
    assert sjf.preemptions == 0
    fifo = run(jobs, 2, FIFO())
    assert (fifo.finish_h - [0.0, 0.5, 1.0]).tolist() == [3.0, 6.5, 8.0]


def test_srtf_est_preempts_for_a_shorter_remaining_estimate():
    # 2 GPUs. J0 (4 h) starts at 0. J1 (1 h) arrives at 1, when J0 has 3 h left by its
    # estimate: J1 preempts J0 and runs 1..2; J0 resumes at 2 and ends at 5.
    out = run([dict(submit_h=0.0, gpus=2, length_h=4.0),
               dict(submit_h=1.0, gpus=2, length_h=1.0)], 2, SRTFEst())
    assert out.finish_h.tolist() == [5.0, 2.0]           # JCTs 5 and 1
    assert out.preemptions == 1


def test_srtf_est_tie_keeps_the_running_job():
    # J1 arrives at t=1 with a 3 h estimate, exactly J0's remaining estimate: no preemption,
    # J0 ends at 4, J1 runs 4..7. A tie must never swap jobs back and forth.
    out = run([dict(submit_h=0.0, gpus=2, length_h=4.0),
               dict(submit_h=1.0, gpus=2, length_h=3.0)], 2, SRTFEst())
    assert out.finish_h.tolist() == [4.0, 7.0]
    assert out.preemptions == 0


def test_tiresias_demotes_at_the_threshold_then_list_order_within_the_queue():
    # 2 GPUs, one threshold at 2 GPU-hours (queues 0 and 1), no starvation guard.
    # J0 (2 GPUs, 3 h) runs from 0 and reaches 2 GPU-h at t=1: demoted to queue 1 by a
    # wake-up, so J1 (arrived 0.5, queue 0) preempts it and runs 1..2. At t=2 J1 reaches
    # 2 GPU-h too and moves to the end of queue 1, behind J0 (waiting there): J0 resumes 2..4,
    # J1 runs 4..5.
    out = run([dict(submit_h=0.0, gpus=2, length_h=3.0),
               dict(submit_h=0.5, gpus=2, length_h=2.0)], 2, Tiresias(thresholds_gpu_h=(2.0,), promote_knob=1e9))
    assert out.finish_h.tolist() == [4.0, 5.0]           # JCTs 4 and 4.5
    assert out.preemptions == 2


def test_tiresias_starvation_guard_promotes_a_waiting_job():
    # 1 GPU, threshold 1 GPU-hour, promote_knob 1. J0 (2 h) is demoted at t=1 and preempted by J1
    # (arrived at 1, queue 0); a stream of 0.9 h jobs (J1 at 1, J2 at 1.9, J3 at 2.8) would keep
    # queue 0 busy until 3.7. At t=2 J0 has waited 1 h = 1 x its 1 h of run: promoted to the end
    # of queue 0, behind J2 (running since 1.9: no preemption within a queue), so J0 runs when J2
    # ends, 2.8..3.8, ahead of J3 (arrived at 2.8, after it in the list): J3 runs 3.8..4.7.
    jobs = [dict(submit_h=0.0, gpus=1, length_h=2.0)] + [
        dict(submit_h=t, gpus=1, length_h=0.9) for t in (1.0, 1.9, 2.8)]
    guard = run(jobs, 1, Tiresias(thresholds_gpu_h=(1.0,), promote_knob=1.0))
    assert guard.finish_h.tolist() == pytest.approx([3.8, 1.9, 2.8, 4.7])
    assert guard.preemptions == 1                         # J0 at t=1
    # without the guard J0 waits for the whole stream: it ends at 3.7 + 1 = 4.7
    starve = run(jobs, 1, Tiresias(thresholds_gpu_h=(1.0,), promote_knob=1e9))
    assert starve.finish_h.tolist() == pytest.approx([4.7, 1.9, 2.8, 3.7])


def view(job_id, losses, submit_h=0.0):
    v = JobView(job_id, 0, "rlhf", 1, submit_h, 1.0, 10, ClusterView(1))
    v.train_losses.extend(losses)
    return v


def test_lossaware_ranks_no_history_first_then_largest_relative_loss_drop():
    la = LossAware(window=3)
    fresh = view(0, [2.0], submit_h=5.0)             # one loss: no reduction yet
    steep = view(1, [2.0, 1.8, 1.62])                 # about 10% per eval
    flat = view(2, [2.0, 1.99, 1.98, 1.97, 1.96])     # about 0.5% per eval over the last 3
    order = sorted([flat, steep, fresh], key=lambda v: la.key(v, None))
    assert [v.job_id for v in order] == [0, 1, 2]
    # the window: only the last 3 intervals count, an early plunge is forgotten
    plunged = view(3, [4.0, 1.99, 1.98, 1.97, 1.96])   # same last four losses as flat
    assert la.key(plunged, None) == pytest.approx(la.key(flat, None))


def test_lossaware_ranks_signed_surrogate_losses_without_dividing_by_zero():
    # RL trainers log a surrogate loss near 0 that changes sign: its drop is relative to |loss|
    la = LossAware(window=1)
    assert la.key(view(0, [-0.5, -1.0]), None)[1] == pytest.approx(-1.0)   # fell by |-0.5|: reduction 1.0
    assert la.key(view(1, [-0.5, 0.0]), None)[1] == pytest.approx(1.0)     # rose: reduction -1.0
    assert la.key(view(2, [0.0, -0.3]), None)[1] == 0.0                    # no scale: no reduction


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_every_scheduler_keeps_the_cluster_busy_and_ends_every_job(name):
    from evalstop_gym import WorkloadConfig, generate
    from evalstop_gym.metrics import compute_metrics

    w = generate(WorkloadConfig(jobs=60, seed=11))
    out = drive(Simulator(w), SCHEDULERS[name]())
    m = compute_metrics(out)
    assert (out.evals_seen == w.evals_per_job).all() and not out.stopped.any()
    assert out.service_h == pytest.approx(w.length_h)            # every job ran exactly its length
    assert 0.0 < m["utilization"] <= 1.0 + 1e-9
    assert (SCHEDULERS[name].preemptive or m["preemptions"] == 0)


@pytest.mark.parametrize("make", [lambda: LossAware(window=0), lambda: Tiresias(thresholds_gpu_h=(8.0, 4.0)),
                                  lambda: Tiresias(thresholds_gpu_h=(-1.0,)), lambda: Tiresias(promote_knob=0)])
def test_bad_scheduler_parameters_are_refused(make):
    with pytest.raises(ConfigError):
        make()
