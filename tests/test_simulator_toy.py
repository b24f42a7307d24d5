"""Hand-computed schedules on tiny workloads: read these first."""

import pytest

from evalstop_gym.baselines import FIFO, EvalStop
from evalstop_gym import run_policy
from evalstop_gym.policy import drive
from evalstop_gym.simulator import DONE, EVAL, SCHEDULE, SimulationError, Simulator
from evalstop_gym.workload import workload_from_jobs


def toy():
    # 4 GPUs. J0 (2 GPUs, 4 h) and J1 (4 GPUs, 2 h) arrive at t=0, J2 (2 GPUs, 1 h) at t=1.
    return workload_from_jobs([
        dict(submit_h=0.0, gpus=2, length_h=4.0),
        dict(submit_h=0.0, gpus=4, length_h=2.0),
        dict(submit_h=1.0, gpus=2, length_h=1.0),
    ], total_gpus=4)


def test_fifo_first_fit_by_hand():
    # t=0: J0 starts (2 free left); J1 needs 4, waits. t=1: J2 fits, runs 1..2.
    # t=4: J0 ends, J1 runs 4..6. JCTs: J0 4 h, J1 6 h, J2 1 h.
    out = drive(Simulator(toy()), FIFO())
    assert out.finish_h.tolist() == [4.0, 6.0, 2.0]
    m = run_policy(toy(), FIFO())
    assert m["avg_jct_h"] == pytest.approx((4 + 6 + 1) / 3)
    assert m["makespan_h"] == 6.0
    assert m["gpu_hours"] == 2 * 4 + 4 * 2 + 2 * 1
    assert m["utilization"] == pytest.approx(18 / (4 * 6))
    assert m["avg_queue_h"] == pytest.approx((0 + 4 + 0) / 3)
    assert m["jobs_stopped"] == 0


def test_preempted_job_resumes_where_it_left_off():
    # One 1-GPU cluster; J0 (4 h, 4 evals) starts at 0, is preempted at t=1.5 and resumed at t=3.
    w = workload_from_jobs([dict(submit_h=0.0, gpus=1, length_h=4.0)], total_gpus=1)
    sim = Simulator(w)
    assert sim.advance() == SCHEDULE
    sim.start(0)
    sim.request_wakeup(1.5)
    assert sim.advance() == EVAL and sim.cluster.now_h == 1.0          # first eval at 1 h of service
    assert sim.advance() == SCHEDULE and sim.cluster.now_h == 1.5
    sim.preempt(0)
    sim.request_wakeup(3.0)
    assert sim.views[0].attained_h == 1.5
    assert sim.advance() == SCHEDULE and sim.cluster.now_h == 3.0
    sim.start(0)
    assert sim.advance() == EVAL and sim.cluster.now_h == 3.5           # second eval: 2 h of service
    assert sim.advance() == EVAL and sim.cluster.now_h == 4.5
    assert sim.advance() == SCHEDULE and sim.cluster.now_h == 5.5       # completion: 4 h of service
    out = sim.outcome() if sim.done else None
    assert out is not None and out.finish_h[0] == 5.5 and out.service_h[0] == 4.0 and out.preemptions == 1


def test_a_timer_replaced_or_withdrawn_never_fires():
    # J0 (1 GPU, 4 h) runs from 0. A timer at 1.5 h is replaced by one at 2.5 h: no decision at 1.5.
    # A plain wake-up at 3.0 stays; a timer at 3.5 is withdrawn (None): no decision at 3.5.
    w = workload_from_jobs([dict(submit_h=0.0, gpus=1, length_h=4.0)], total_gpus=1, evals_per_job=1)
    sim = Simulator(w)
    assert sim.advance() == SCHEDULE
    sim.start(0)
    sim.set_timer(1.5)
    sim.set_timer(2.5)
    sim.request_wakeup(3.0)
    assert sim.advance() == SCHEDULE and sim.cluster.now_h == 2.5
    sim.set_timer(3.5)
    assert sim.advance() == SCHEDULE and sim.cluster.now_h == 3.0
    sim.set_timer(None)
    assert sim.advance() == SCHEDULE and sim.cluster.now_h == 4.0       # the completion, nothing before
    assert sim.advance() == DONE
    assert not sim._heap                                                # the stale timers are gone too
    with pytest.raises(SimulationError, match="not after now"):
        Simulator(w).set_timer(0.0)


def test_a_plan_replaces_the_last_plans_timer():
    from evalstop_gym.policy import Plan, apply_plan
    w = workload_from_jobs([dict(submit_h=0.0, gpus=1, length_h=4.0)], total_gpus=1, evals_per_job=1)
    sim = Simulator(w)
    sim.advance()
    apply_plan(sim, Plan(start=[0], wakeup_h=1.0))
    apply_plan(sim, Plan(wakeup_h=2.0))      # a second plan at the same instant moves the timer
    assert sim.advance() == SCHEDULE and sim.cluster.now_h == 2.0
    apply_plan(sim, Plan(wakeup_h=3.0))
    apply_plan(sim, Plan())                  # no wake-up: the pending one is withdrawn
    assert sim.advance() == SCHEDULE and sim.cluster.now_h == 4.0


def test_illegal_decisions_are_refused():
    sim = Simulator(toy())
    sim.advance()
    sim.start(0)
    with pytest.raises(SimulationError, match="needs 4 GPUs, 2 are free"):
        sim.start(1)
    with pytest.raises(SimulationError, match="already running"):
        sim.start(0)
    with pytest.raises(SimulationError, match="not running"):
        sim.preempt(1)
    with pytest.raises(SimulationError, match="not an active job"):
        sim.stop(2)  # has not arrived yet


def test_idle_cluster_with_waiting_jobs_is_a_stall():
    sim = Simulator(toy())
    assert sim.advance() == SCHEDULE
    sim.advance()  # next arrival (t=1)
    with pytest.raises(SimulationError, match="stalled"):
        sim.advance()


def one_job(scores, evals=None):
    e = evals or len(scores)
    return workload_from_jobs([dict(submit_h=0.0, gpus=1, length_h=float(e), gold=scores, observed=scores)],
                              total_gpus=1)


def test_evalstop_plateau_is_not_two_declines():
    # 0.60, 0.70, 0.69, 0.695: one decline, then a rise. k=2 must not stop.
    out = drive(Simulator(one_job([0.60, 0.70, 0.69, 0.695, 0.71])), EvalStop(FIFO(), k=2))
    assert not out.stopped[0]
    assert out.finish_h[0] == 5.0 and out.delivered_ckpt[0] == 4


def test_evalstop_stops_at_second_decline_and_delivers_best():
    # 0.60, 0.70, 0.69, 0.68: two declines at the 4th eval (t = 4 h of a 5 h job).
    w = one_job([0.60, 0.70, 0.69, 0.68, 0.60])
    out = drive(Simulator(w), EvalStop(FIFO(), k=2))
    assert out.stopped[0]
    assert out.evals_seen[0] == 4 and out.finish_h[0] == 4.0
    assert out.delivered_ckpt[0] == 1
    m = run_policy(w, EvalStop(FIFO(), k=2))
    assert m["delivered_quality"] == pytest.approx(0.70)
    assert m["delivered_quality_regret"] == pytest.approx(0.0)
    assert m["gpu_hours"] == 4.0


def test_evalstop_k3_waits_for_a_third_decline():
    out = drive(Simulator(one_job([0.60, 0.70, 0.69, 0.68, 0.60])), EvalStop(FIFO(), k=3))
    assert not out.stopped[0]  # the third decline is the final checkpoint: the job completes


def test_compute_waste_and_detection_on_a_hacking_run():
    # A hacking run peaks at eval 2 (0.8); stopped at eval 4: waste = 2 h past the peak on 2 GPUs.
    scores = [0.5, 0.8, 0.7, 0.6, 0.5, 0.4]
    w = workload_from_jobs([dict(submit_h=0.0, gpus=2, length_h=6.0, gold=scores, observed=scores,
                                 hacking=True),
                            dict(submit_h=0.0, gpus=2, length_h=6.0, hacking=False,
                                 gold=[.1, .2, .3, .4, .5, .6])], total_gpus=4)
    none = run_policy(w, FIFO())
    assert none["compute_waste_gpu_h"] == pytest.approx(4 * 2)     # 4 h past the peak, 2 GPUs
    stop = run_policy(w, EvalStop(FIFO(), k=2))
    assert stop["compute_waste_gpu_h"] == pytest.approx(2 * 2)
    assert (stop["precision"], stop["recall"], stop["fpr"]) == (1.0, 1.0, 0.0)
    assert stop["detection_delay_evals"] == 2
    assert none["recall"] == 0.0 and none["precision"] is None
