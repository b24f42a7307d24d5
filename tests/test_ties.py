"""Ties and same-instant order: equal scores, ties for best, simultaneous events, equal trace
timestamps, and the rounding of scaled GPU demands. Expected values are worked out by hand."""

import csv
import os

import pytest

from evalstop_gym.baselines import FIFO, EvalStop
from evalstop_gym import WorkloadConfig
from evalstop_gym.metrics import compute_metrics
from evalstop_gym.policy import Policy, drive
from evalstop_gym.simulator import Simulator
from evalstop_gym.traces import read_trace, replay_trace
from evalstop_gym.workload import workload_from_jobs

PHILLY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "traces",
                      "philly_jobs_pollux.csv")


class Recorder(Policy):
    """Wraps a policy and writes down what it was shown at each decision."""

    def __init__(self, base, wakeup_at=None):
        self.base, self.wakeup_at = base, wakeup_at
        self.evals, self.schedules = [], []

    def reset(self):
        self.base.reset()

    def should_stop(self, job, cluster):
        self.evals.append(dict(job=job.job_id, t=cluster.now_h, declines=job.consecutive_declines,
                               scores=list(job.eval_scores), waiting=sorted(cluster.waiting)))
        return self.base.should_stop(job, cluster)

    def schedule(self, cluster):
        self.schedules.append(dict(t=cluster.now_h, waiting=sorted(cluster.waiting), running=sorted(cluster.running),
                                   free=cluster.free_gpus,
                                   evals={j: v.evals_done for j, v in cluster.running.items()}))
        plan = self.base.schedule(cluster)
        if self.wakeup_at is not None and cluster.now_h < self.wakeup_at:
            plan = plan._replace(wakeup_h=self.wakeup_at)
        return plan


def one_job(observed, gold=None, hacking=False):
    e = len(observed)
    return workload_from_jobs([dict(submit_h=0.0, gpus=1, length_h=float(e), observed=observed,
                                    gold=gold or observed, hacking=hacking)], total_gpus=1)


# -- equal scores --------------------------------------------------------------------------

def test_equal_consecutive_scores_are_not_declines():
    rec = Recorder(EvalStop(FIFO(), k=1))
    out = drive(Simulator(one_job([0.5] * 6)), rec)
    assert [e["declines"] for e in rec.evals] == [0, 0, 0, 0, 0]   # evals 1-5 (the 6th completes the job)
    assert not out.stopped[0]


def test_a_tie_ends_a_run_of_declines():
    # 0.6, 0.5 (1 decline), 0.5 (tie: the run of strict declines ends, 0), 0.4 (1), 0.3 (2 -> stop)
    rec = Recorder(EvalStop(FIFO(), k=2))
    out = drive(Simulator(one_job([0.6, 0.5, 0.5, 0.4, 0.3, 0.9])), rec)
    assert [e["declines"] for e in rec.evals] == [0, 1, 0, 1, 2]
    assert out.stopped[0] and out.evals_seen[0] == 5 and out.finish_h[0] == 5.0


def test_a_tie_for_best_delivers_the_earlier_checkpoint():
    # observed best 0.7 at checkpoints 1 and 3; the stop at the 6th eval delivers checkpoint 1,
    # whose true score (0.9) differs from checkpoint 3's (0.6)
    obs = [0.5, 0.7, 0.6, 0.7, 0.6, 0.5, 0.4]
    gold = [0.5, 0.9, 0.8, 0.6, 0.5, 0.4, 0.3]
    out = drive(Simulator(one_job(obs, gold, hacking=True)), EvalStop(FIFO(), k=2))
    assert out.stopped[0] and out.evals_seen[0] == 6
    assert out.delivered_ckpt[0] == 1
    m = compute_metrics(out)
    assert m["delivered_quality"] == pytest.approx(0.9) and m["delivered_quality_regret"] == pytest.approx(0.0)


def test_a_later_strictly_better_checkpoint_is_delivered():
    obs = [0.5, 0.7, 0.6, 0.71, 0.6, 0.5, 0.4]
    out = drive(Simulator(one_job(obs)), EvalStop(FIFO(), k=2))
    assert out.stopped[0] and out.delivered_ckpt[0] == 3


# -- same instant --------------------------------------------------------------------------

def test_an_arrival_is_visible_at_a_checkpoint_decision_of_the_same_instant():
    # J0 (1 GPU, 2 h, 2 evals) has its first eval at t=1; J1 arrives at t=1 exactly.
    w = workload_from_jobs([dict(submit_h=0.0, gpus=1, length_h=2.0), dict(submit_h=1.0, gpus=1, length_h=1.0)],
                           total_gpus=1, evals_per_job=2)
    rec = Recorder(FIFO())
    drive(Simulator(w), rec)
    assert rec.evals[0] == dict(job=0, t=1.0, declines=0, scores=[0.5], waiting=[1])


def test_a_stop_frees_gpus_for_an_arrival_of_the_same_instant_in_one_scheduling_point():
    # 1 GPU. J0 (4 h, 4 evals, falling scores) is stopped at its 3rd eval, t=3 (k=2).
    # J1 arrives at t=3 exactly: the one scheduling point at t=3 comes after the stop and starts J1.
    w = workload_from_jobs([dict(submit_h=0.0, gpus=1, length_h=4.0, observed=[0.9, 0.8, 0.7, 0.6]),
                            dict(submit_h=3.0, gpus=1, length_h=1.0, observed=[0.1, 0.2, 0.3, 0.4])],
                           total_gpus=1)
    rec = Recorder(EvalStop(FIFO(), k=2))
    out = drive(Simulator(w), rec)
    assert out.stopped.tolist() == [True, False]
    assert out.finish_h.tolist() == [3.0, 4.0] and out.first_start_h.tolist() == [0.0, 3.0]
    # scheduling points: t=0 (J0 arrives), t=3 (J1 arrives and J0 is stopped: one point), t=4 (J1 completes)
    assert [s["t"] for s in rec.schedules] == [0.0, 3.0, 4.0]
    assert rec.schedules[1] == dict(t=3.0, waiting=[1], running=[], free=1, evals={})
    # the checkpoint decision at t=3 came first, and already saw J1 waiting
    assert [(e["t"], e["waiting"]) for e in rec.evals if e["job"] == 0] == [(1.0, []), (2.0, []), (3.0, [1])]


def test_completion_arrival_and_wakeup_at_one_instant_make_one_scheduling_point():
    # 1 GPU. J0 (2 h) completes at t=2; J1 arrives at t=2; the policy asked for a wake-up at t=2.
    w = workload_from_jobs([dict(submit_h=0.0, gpus=1, length_h=2.0), dict(submit_h=2.0, gpus=1, length_h=1.0)],
                           total_gpus=1)
    rec = Recorder(FIFO(), wakeup_at=2.0)
    out = drive(Simulator(w), rec)
    assert [s["t"] for s in rec.schedules] == [0.0, 2.0, 3.0]
    assert rec.schedules[1] == dict(t=2.0, waiting=[1], running=[], free=1, evals={})
    assert out.finish_h.tolist() == [2.0, 3.0]


def test_a_wakeup_sees_the_checkpoint_of_its_instant():
    # J0 (4 h, 4 evals) has evals at t=1, 2, 3. A wake-up at t=2 sees 2 evals done, not 1.
    w = workload_from_jobs([dict(submit_h=0.0, gpus=1, length_h=4.0)], total_gpus=1)
    rec = Recorder(FIFO(), wakeup_at=2.0)
    drive(Simulator(w), rec)
    assert [(s["t"], s["evals"]) for s in rec.schedules] == [(0.0, {}), (2.0, {0: 2}), (4.0, {})]


def test_simultaneous_arrivals_queue_in_job_order():
    # three 1-GPU jobs of 1 h arrive at t=0 on 1 GPU: FIFO runs them in job-id order
    w = workload_from_jobs([dict(submit_h=0.0, gpus=1, length_h=1.0) for _ in range(3)], total_gpus=1)
    out = drive(Simulator(w), FIFO())
    assert out.finish_h.tolist() == [1.0, 2.0, 3.0]


# -- traces --------------------------------------------------------------------------------

# equal timestamps on purpose: 00:00 twice, 01:00 three times, interleaved in the file
EQUAL_TIMES = """timestamp,duration,num_gpus,gpu_time,cluster
2017-10-01 01:00:00,100,1,100,a
2017-10-01 00:00:00,200,1,200,a
2017-10-01 01:00:00,300,1,300,a
2017-10-01 01:00:00,400,1,400,a
2017-10-01 00:00:00,500,1,500,a
"""


def test_equal_trace_timestamps_keep_file_order(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(EQUAL_TIMES)
    table = read_trace(path, "philly")
    # sorted by time, and within one time in the order of the file (lines 3, 6, then 2, 4, 5)
    assert table.line.tolist() == [3, 6, 2, 4, 5]
    assert table.duration_s.tolist() == [200, 500, 100, 300, 400]
    w, _ = replay_trace(table, WorkloadConfig(gpus=16, seed=0), rescale="none")
    assert (w.length_h * 3600).round(6).tolist() == [200, 500, 100, 300, 400]
    assert w.submit_h.tolist() == [0.0, 0.0, 1.0, 1.0, 1.0]


@pytest.mark.skipif(not os.path.exists(PHILLY), reason=f"real Philly trace not found at {PHILLY}")
def test_real_philly_duplicate_timestamps_keep_file_order():
    with open(PHILLY, newline="") as f:
        stamps = [row["timestamp"] for row in csv.DictReader(f)]
    assert len(stamps) - len(set(stamps)) > 1000        # the file has many equal timestamps
    table = read_trace(PHILLY, "philly")
    same = table.submit_s[1:] == table.submit_s[:-1]
    assert same.sum() > 1000
    assert (table.line[1:][same] > table.line[:-1][same]).all()


@pytest.mark.parametrize("recorded, scale, expected", [
    (5, 0.5, 3),     # 2.5 -> 3: half rounds up (round-half-even would give 2)
    (3, 0.5, 2),     # 1.5 -> 2
    (7, 0.5, 4),     # 3.5 -> 4
    (9, 0.5, 5),     # 4.5 -> 5 (round-half-even: 4)
    (1, 0.5, 1),     # 0.5 -> 1 (and never below 1)
    (1, 0.25, 1),    # 0.25 -> 0 -> at least 1
    (3, 1.5, 5),     # 4.5 -> 5
    (6, 0.3, 2),     # 1.8 -> 2
    (5, 0.3, 2),     # 5 * 0.3 is exactly 1.5 in floating point -> 2
])
def test_scaled_gpu_demands_round_half_up_and_stay_at_least_one(tmp_path, recorded, scale, expected):
    path = tmp_path / "t.csv"
    path.write_text(f"timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-01 00:00:00,3600,{recorded},0,a\n")
    w, _ = replay_trace(read_trace(path, "philly"), WorkloadConfig(gpus=16, seed=0), gpu_scale=scale,
                        rescale="none")
    assert w.gpus.tolist() == [expected]


def test_eval_due_now_sees_live_non_final_checkpoints_of_this_instant_only():
    from evalstop_gym.simulator import EVAL, SCHEDULE

    # 3 GPUs; J0, J1, J2: 1 GPU, 3 h, 3 evals (at 1 h and 2 h of service; the 3rd completes the job)
    w = workload_from_jobs([dict(submit_h=0.0, gpus=1, length_h=3.0)] * 3, total_gpus=3, evals_per_job=3)
    sim = Simulator(w)
    assert sim.advance() == SCHEDULE
    for j in range(3):
        sim.start(j)
    assert not sim.eval_due_now()                      # nothing is due at t=0
    sim.request_wakeup(0.5)
    assert sim.advance() == SCHEDULE and sim.cluster.now_h == 0.5
    sim.preempt(2)                                     # J2's checkpoint at t=1 is now stale
    sim.request_wakeup(0.75)
    assert sim.advance() == SCHEDULE and sim.cluster.now_h == 0.75
    sim.start(2)                                       # J2's next checkpoint: t = 0.75 + 0.5 = 1.25
    assert sim.advance() == EVAL and (sim.cluster.now_h, sim.decision_job.job_id) == (1.0, 0)
    assert sim.eval_due_now()                          # J1's eval, also at t=1, is next
    assert sim.advance() == EVAL and (sim.cluster.now_h, sim.decision_job.job_id) == (1.0, 1)
    assert not sim.eval_due_now()                      # J2's stale t=1 entry does not count
    assert sim.advance() == EVAL and (sim.cluster.now_h, sim.decision_job.job_id) == (1.25, 2)
    assert sim.advance() == EVAL and sim.cluster.now_h == 2.0
    assert sim.eval_due_now()                          # the other job's 2nd eval at t=2
    assert sim.advance() == EVAL and sim.cluster.now_h == 2.0
    assert not sim.eval_due_now()
    assert sim.advance() == EVAL and sim.cluster.now_h == 2.25
    # t=3: J0 and J1 complete (final checkpoints: no decision, not "due")
    assert sim.advance() == SCHEDULE and sim.cluster.now_h == 3.0 and not sim.eval_due_now()
    assert sim.advance() == SCHEDULE and sim.cluster.now_h == 3.25
    assert sim.advance() == 0 and sim.outcome().finish_h.tolist() == [3.0, 3.0, 3.25]


def test_a_final_checkpoint_of_the_same_instant_is_not_a_due_eval():
    from evalstop_gym.simulator import EVAL

    # J1 (4 h, 2 evals) has its eval at t=2, the instant J0 (2 h, 2 evals) completes
    w = workload_from_jobs([dict(submit_h=0.0, gpus=1, length_h=2.0), dict(submit_h=0.0, gpus=1, length_h=4.0)],
                           total_gpus=2, evals_per_job=2)
    sim = Simulator(w)
    sim.advance()
    sim.start(0)
    sim.start(1)
    assert sim.advance() == EVAL and (sim.cluster.now_h, sim.decision_job.job_id) == (1.0, 0)
    assert sim.advance() == EVAL and (sim.cluster.now_h, sim.decision_job.job_id) == (2.0, 1)
    assert not sim.eval_due_now()                      # J0's completion is pending at t=2, not an eval
    assert sim.cluster.running.keys() == {0, 1}


def test_simultaneous_checkpoints_are_decided_in_the_order_their_runs_were_scheduled():
    from evalstop_gym.simulator import DONE, EVAL, SCHEDULE

    # 2 GPUs; J0, J1 (1 GPU, 2 h, 2 evals) both reach their eval at t=1; J2 arrives at t=1.
    # The driver starts J1 before J0 (with a wake-up request in between): J1's eval is decided first.
    w = workload_from_jobs([dict(submit_h=0.0, gpus=1, length_h=2.0), dict(submit_h=0.0, gpus=1, length_h=2.0),
                            dict(submit_h=1.0, gpus=1, length_h=1.0)], total_gpus=2, evals_per_job=2)
    sim = Simulator(w)
    assert sim.decision_job is None
    assert sim.advance() == SCHEDULE and sim.decision_job is None
    sim.start(1)
    sim.request_wakeup(5.0)
    sim.start(0)
    seen = []
    while (kind := sim.advance()) == EVAL:
        seen.append((sim.cluster.now_h, sim.decision_job.job_id, sorted(sim.cluster.waiting)))
    assert seen == [(1.0, 1, [2]), (1.0, 0, [2])]      # push order, and J2's arrival already visible
    assert kind == SCHEDULE and sim.decision_job is None and sim.cluster.now_h == 1.0
    while kind != DONE:
        if kind == SCHEDULE and sim.cluster.free_gpus and sim.cluster.waiting:
            sim.start(2)                               # t=2: J0 and J1 completed
        kind = sim.advance()
    assert sim.decision_job is None and sim.outcome().finish_h.tolist() == [2.0, 2.0, 3.0]


def test_no_scheduling_point_before_the_first_arrival():
    w = workload_from_jobs([dict(submit_h=1.5, gpus=1, length_h=1.0)], total_gpus=1)
    rec = Recorder(FIFO())
    drive(Simulator(w), rec)
    assert [s["t"] for s in rec.schedules] == [1.5, 2.5]


def test_a_stall_names_the_time_and_the_waiting_jobs():
    from evalstop_gym.simulator import SimulationError

    sim = Simulator(workload_from_jobs([dict(submit_h=0.25, gpus=1, length_h=1.0)] * 2, total_gpus=1))
    sim.advance()
    with pytest.raises(SimulationError, match=r"^stalled at t=0.2500 h: 2 jobs wait, none runs and no event is "
                                              r"pending; the scheduler must start a job$"):
        sim.advance()
    with pytest.raises(SimulationError, match=r"^cannot start job 2: it is not an active job \(status not arrived\)"):
        sim.start(2)                                   # one past the last job id
    with pytest.raises(SimulationError, match=r"^cannot start job -1: it is not an active job"):
        sim.start(-1)


def test_a_wakeup_asked_for_now_is_ignored():
    # a policy that asks, at every scheduling point, to be woken "now": nothing to do at this instant
    class Eager(Policy):
        def __init__(self):
            self.base = FIFO()

        def reset(self):
            self.base.reset()

        def schedule(self, cluster):
            return self.base.schedule(cluster)._replace(wakeup_h=cluster.now_h)

    w = workload_from_jobs([dict(submit_h=0.0, gpus=1, length_h=1.0), dict(submit_h=0.5, gpus=1, length_h=1.0)],
                           total_gpus=1)
    assert drive(Simulator(w), Eager()).finish_h.tolist() == [1.0, 2.0]


def test_eval_due_now_predicts_the_next_decision_on_crowded_instants():
    """On many simultaneous checkpoints (live, stale after a preemption, final), ``eval_due_now()`` is
    true exactly when the next ``advance()`` is an eval decision at the same instant."""
    import random

    from evalstop_gym.simulator import DONE, EVAL, SCHEDULE

    rnd = random.Random(0)
    jobs = sorted((dict(submit_h=rnd.choice([0.0, 0.5, 1.0]), gpus=1, length_h=rnd.choice([1.0, 2.0, 4.0]))
                   for _ in range(40)), key=lambda j: j["submit_h"])
    sim = Simulator(workload_from_jobs(jobs, total_gpus=24, evals_per_job=4))
    c = sim.cluster
    said = []
    kind = sim.advance()
    while kind != DONE:
        if kind == SCHEDULE:
            for j in list(c.running):
                if rnd.random() < 0.2:
                    sim.preempt(j)
            for j in list(c.waiting):
                if sim.views[j].gpus <= c.free_gpus and (rnd.random() < 0.7 or not c.running):
                    sim.start(j)
            if rnd.random() < 0.3:
                sim.request_wakeup(c.now_h + rnd.choice([0.25, 0.5]))
        due, now = sim.eval_due_now(), c.now_h
        kind = sim.advance()
        assert due == (kind == EVAL and c.now_h == now)
        said.append(due)
    assert sum(said) > 20 and len(said) - sum(said) > 20


# -- tie rules of preemptive schedulers (evalstop_gym.baselines.ties) ----------------------

def test_tie_rules_running_first_vs_arrival_by_hand():
    """Every key equal, so only the tie rule orders jobs. 2 GPUs. JA (1 GPU, 1 h) and J0 (2 GPUs, 2 h)
    arrive at t=0, J1 (1 GPU, 3 h) at t=0.5. JA runs, J0 cannot fit, J1 starts at 0.5. At t=1 JA ends:
    * "running": J1 keeps its GPU (running first), J0 still cannot fit and waits until J1 ends at 3.5,
      then runs to 5.5. JCTs 1, 5.5, 3.
    * "arrival": J0 arrived before J1, so it is kept first and takes both GPUs: J1 is preempted, J0 runs
      1..3, J1 resumes at 3 with 2.5 h left, ends at 5.5 (JCT 5). JCTs 1, 3, 5."""
    from evalstop_gym.baselines.ties import ArrivalTies
    from evalstop_gym.policy import Scheduler

    class AllTie(Scheduler):
        name = "all-tie"
        preemptive = True
        static_key = True

        def key(self, job, cluster):
            return 0

    def run(policy):
        w = workload_from_jobs([dict(submit_h=0.0, gpus=1, length_h=1.0), dict(submit_h=0.0, gpus=2, length_h=2.0),
                                dict(submit_h=0.5, gpus=1, length_h=3.0)], total_gpus=2)
        out = drive(Simulator(w), policy)
        return out.jct_h.tolist(), out.preemptions

    assert run(AllTie()) == ([1.0, 5.5, 3.0], 0)
    assert run(ArrivalTies(AllTie())) == ([1.0, 3.0, 5.0], 1)


def test_tie_option_is_validated_and_reaches_the_schedulers():
    from evalstop_gym.baselines import FIFO, SRTFEst, Tiresias, make_policy
    from evalstop_gym.baselines.ties import ArrivalTies
    from evalstop_gym.config import ConfigError

    with pytest.raises(ConfigError, match=r"tie='oldest' is invalid: must be one of running, arrival \(default running\)"):
        make_policy("srtf-est", tie="oldest")
    assert type(make_policy("srtf-est")) is SRTFEst                      # the default: running first
    p = make_policy("srtf-est", "evalstop", tie="arrival")
    assert isinstance(p.base, ArrivalTies) and isinstance(p.base.base, SRTFEst) and p.name == "srtf-est+evalstop"
    assert type(make_policy("fifo", tie="arrival")) is FIFO             # non-preemptive: queue order is arrival
    assert make_policy("tiresias", tie="arrival").order == "arrival"
    assert make_policy("tiresias").order == "queue" and isinstance(make_policy("tiresias"), Tiresias)


def test_arrival_ties_change_nothing_where_no_keys_tie():
    """Generated workloads have continuous estimates: no two SRTF-Est keys tie, so the arrival rule (on the
    re-keyed path, without the kept running order) gives the same episode as the default."""
    from evalstop_gym.baselines import make_policy
    from evalstop_gym.workload import generate

    for seed in (0, 1):
        w = generate(WorkloadConfig(seed=seed, jobs=60, load=2.0))
        a = compute_metrics(drive(Simulator(w), make_policy("srtf-est", tie="running")))
        b = compute_metrics(drive(Simulator(w), make_policy("srtf-est", tie="arrival")))
        assert a == b
