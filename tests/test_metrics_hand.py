"""Every metric of ``compute_metrics`` against values worked out by hand on tiny episodes.

The expected values are written as the arithmetic that produces them, from a
schedule traced by hand in the comments, never pasted from the code's output.
"""

import math

import pytest

from evalstop_gym.baselines import FIFO, EvalStop
from evalstop_gym.metrics import METRIC_KEYS, compute_metrics
from evalstop_gym.policy import drive
from evalstop_gym.simulator import SCHEDULE, Simulator
from evalstop_gym.workload import workload_from_jobs


def percentile_linear(sorted_values, q):
    """numpy's default ("linear") percentile, written out: the value at rank (n - 1) * q / 100,
    interpolated between the two neighbouring order statistics."""
    rank = (len(sorted_values) - 1) * q / 100
    lo = math.floor(rank)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (rank - lo) * (sorted_values[hi] - sorted_values[lo])


def test_percentile_reference_on_a_textbook_case():
    # the reference above, checked on numbers simple enough to do in one's head
    assert percentile_linear([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile_linear([10.0, 20.0], 99) == pytest.approx(19.9)
    assert percentile_linear([7.0], 99) == 7.0


# Five jobs, 6 evals each, on 3 GPUs; FIFO with EvalStop(k=2). Every outcome kind:
#   J0 hacking, never two declines in a row (a tie is not a decline): runs to the end   -> false negative
#   J1 hacking, stopped; its best observed score is a tie, the earlier checkpoint wins   -> true positive
#   J2 healthy, noisy scores fall twice: stopped                                         -> false positive
#   J3 healthy, completes (waits for 2 GPUs behind J0)                                   -> true negative
#   J4 hacking, its noisy scores keep rising: completes, jumping the queue (first fit)   -> false negative
EPISODE = [
    dict(submit_h=0.0, gpus=2, length_h=6.0, hacking=True,        # one eval per hour
         observed=[0.5, 0.8, 0.8, 0.7, 0.75, 0.7], gold=[0.5, 0.9, 0.85, 0.7, 0.65, 0.6]),
    dict(submit_h=0.0, gpus=1, length_h=3.0, hacking=True,        # one eval per 0.5 h
         observed=[0.6, 0.9, 0.9, 0.8, 0.7, 0.6], gold=[0.6, 0.95, 0.7, 0.65, 0.6, 0.55]),
    dict(submit_h=0.25, gpus=1, length_h=1.5, hacking=False,      # one eval per 0.25 h
         observed=[0.3, 0.5, 0.45, 0.4, 0.6, 0.7], gold=[0.3, 0.4, 0.5, 0.6, 0.7, 0.8]),
    dict(submit_h=1.25, gpus=2, length_h=1.5, hacking=False,
         observed=[0.2, 0.3, 0.4, 0.5, 0.6, 0.7], gold=[0.2, 0.3, 0.4, 0.5, 0.6, 0.7]),
    dict(submit_h=4.0, gpus=1, length_h=0.75, hacking=True,       # one eval per 0.125 h
         observed=[0.1, 0.2, 0.3, 0.4, 0.5, 0.6], gold=[0.1, 0.3, 0.5, 0.4, 0.3, 0.2]),
]


def episode():
    return drive(Simulator(workload_from_jobs(EPISODE, total_gpus=3)), EvalStop(FIFO(), k=2))


def test_the_schedule_traced_by_hand():
    # t=0     J0 (2 GPUs) and J1 (1 GPU) start; the cluster is full.
    # t=0.25  J2 arrives and waits; t=1.25 J3 arrives and waits.
    # J1 evals at 0.5, 1, 1.5, 2, 2.5: 0.6 0.9 0.9(tie) 0.8(decline 1) 0.7(decline 2) -> stopped at 2.5.
    # t=2.5   J2 starts on the freed GPU (J3 needs 2, does not fit).
    # J2 evals at 2.75, 3, 3.25, 3.5: 0.3 0.5 0.45(1) 0.4(2) -> stopped at 3.5, after 1 h of service.
    # t=4     J4 arrives; 1 GPU free: J3 does not fit, J4 does (first fit) and runs 4 -> 4.75.
    # J0 evals at 1..6: 0.5 0.8 0.8(tie) 0.7(1) 0.75(rise) 0.7(1): completes at 6.
    # t=6     J3 starts on 3 free GPUs, completes at 7.5.
    out = episode()
    assert out.finish_h.tolist() == [6.0, 2.5, 3.5, 7.5, 4.75]
    assert out.first_start_h.tolist() == [0.0, 0.0, 2.5, 6.0, 4.0]
    assert out.service_h.tolist() == [6.0, 2.5, 1.0, 1.5, 0.75]
    assert out.stopped.tolist() == [False, True, True, False, False]
    assert out.evals_seen.tolist() == [6, 5, 4, 6, 6]
    # delivered: final checkpoint when not stopped; best observed when stopped (J1: tie 0.9 at
    # checkpoints 1 and 2 -> the earlier, 1; J2: 0.5 at checkpoint 1)
    assert out.delivered_ckpt.tolist() == [5, 1, 1, 5, 5]
    assert out.preemptions == 0


def test_every_metric_of_the_hand_traced_episode():
    m = compute_metrics(episode())
    assert set(m) == set(METRIC_KEYS)

    submit = [0.0, 0.0, 0.25, 1.25, 4.0]
    finish = [6.0, 2.5, 3.5, 7.5, 4.75]
    gpus = [2, 1, 1, 2, 1]
    service = [6.0, 2.5, 1.0, 1.5, 0.75]
    jct = [f - s for f, s in zip(finish, submit)]                    # 6, 2.5, 3.25, 6.25, 0.75
    assert m["avg_jct_h"] == pytest.approx((6 + 2.5 + 3.25 + 6.25 + 0.75) / 5)
    by_hand_sorted = [0.75, 2.5, 3.25, 6.0, 6.25]
    assert sorted(jct) == by_hand_sorted
    assert m["p50_jct_h"] == pytest.approx(3.25)                     # rank 4 * 0.5 = 2: the middle one
    assert m["p50_jct_h"] == pytest.approx(percentile_linear(by_hand_sorted, 50))
    # p99: rank 4 * 0.99 = 3.96, so 6.0 + 0.96 * (6.25 - 6.0); a p95 would be 6.0 + 0.8 * 0.25
    assert m["p99_jct_h"] == pytest.approx(6.0 + 0.96 * 0.25)
    assert m["p99_jct_h"] == pytest.approx(percentile_linear(by_hand_sorted, 99))

    assert m["makespan_h"] == pytest.approx(7.5 - 0.0)
    gpu_hours = 6.0 * 2 + 2.5 * 1 + 1.0 * 1 + 1.5 * 2 + 0.75 * 1  # 19.25
    assert m["gpu_hours"] == pytest.approx(gpu_hours)
    assert m["utilization"] == pytest.approx(gpu_hours / (3 * 7.5))
    # queueing: JCT minus hours run; only J2 (3.25 - 1) and J3 (6.25 - 1.5) ever wait
    assert m["avg_queue_h"] == pytest.approx(sum(j - s for j, s in zip(jct, service)) / 5)
    assert m["avg_queue_h"] == pytest.approx((0 + 0 + 2.25 + 4.75 + 0) / 5)

    # waste: GPU-hours run past the true peak checkpoint p, reached after length * (p + 1) / 6 hours
    #   J0: peak 0.9 at checkpoint 1 -> 2 h; ran 6 h on 2 GPUs      -> (6 - 2) * 2   = 8
    #   J1: peak 0.95 at checkpoint 1 -> 1 h; ran 2.5 h on 1 GPU    -> 1.5
    #   J2, J3: peak at the last checkpoint; neither ran past it    -> 0
    #   J4: peak 0.5 at checkpoint 2 -> 0.375 h; ran 0.75 h         -> 0.375
    assert m["compute_waste_gpu_h"] == pytest.approx((6 - 2) * 2 + (2.5 - 1.0) * 1 + 0 + 0 + (0.75 - 0.375) * 1)

    # detection: positives J0, J1, J4; negatives J2, J3; stopped J1, J2
    tp, fp, fn, negatives = 1, 1, 2, 2
    assert (m["true_positives"], m["false_positives"], m["false_negatives"]) == (tp, fp, fn)
    assert m["jobs"] == 5 and m["jobs_stopped"] == 2
    p, r = tp / (tp + fp), tp / (tp + fn)                            # 1/2, 1/3
    assert m["precision"] == pytest.approx(p)
    assert m["recall"] == pytest.approx(r)
    assert m["f1"] == pytest.approx(2 * p * r / (p + r))              # 0.4
    assert m["fpr"] == pytest.approx(fp / negatives)                 # not fp / all jobs (0.2)
    # delay: checkpoints from the true peak to the stop; J1 stopped at its 5th eval (index 4), peak index 1
    assert m["detection_delay_evals"] == pytest.approx(4 - 1)

    # delivered quality: the TRUE score of the delivered checkpoint; regret = true peak minus it
    delivered = [0.6, 0.95, 0.4, 0.7, 0.2]   # J0 last, J1 ckpt 1 (not 0.7 of ckpt 2), J2 ckpt 1, J3, J4 last
    peaks = [0.9, 0.95, 0.8, 0.7, 0.5]
    assert m["delivered_quality"] == pytest.approx(sum(delivered) / 5)
    assert m["delivered_quality_regret"] == pytest.approx(sum(pk - d for pk, d in zip(peaks, delivered)) / 5)
    assert m["preemptions"] == 0


def test_detection_delay_is_a_mean_over_true_positives_and_can_be_negative():
    # Two hacking 1-GPU jobs on 2 GPUs, 6 evals of 1 h, EvalStop(k=2).
    #   A: true peak at checkpoint 1; observed falls at evals 4 and 5 -> stopped at index 4: delay 3
    #   B: true peak at checkpoint 4; noise makes it fall at evals 2 and 3 -> stopped at index 2: delay -2
    a = [0.5, 0.9, 0.95, 0.8, 0.7, 0.6]
    b_obs, b_gold = [0.5, 0.4, 0.3, 0.6, 0.7, 0.6], [0.1, 0.2, 0.3, 0.4, 0.9, 0.8]
    w = workload_from_jobs([dict(submit_h=0.0, gpus=1, length_h=6.0, hacking=True, observed=a,
                                 gold=[0.5, 0.9, 0.85, 0.8, 0.7, 0.6]),
                            dict(submit_h=0.0, gpus=1, length_h=6.0, hacking=True, observed=b_obs, gold=b_gold)],
                           total_gpus=2)
    m = compute_metrics(drive(Simulator(w), EvalStop(FIFO(), k=2)))
    assert (m["true_positives"], m["false_positives"], m["false_negatives"]) == (2, 0, 0)
    assert m["detection_delay_evals"] == pytest.approx(((4 - 1) + (2 - 4)) / 2)
    # no negatives: FPR is undefined (None), precision and recall are 1
    assert m["fpr"] is None and m["precision"] == 1.0 and m["recall"] == 1.0 and m["f1"] == 1.0
    # B stopped before its true peak: it ran 3 h, its peak is at 5 h -> no waste; A ran 5 h past 2 h
    assert m["compute_waste_gpu_h"] == pytest.approx(5 - 2)
    # delivered: A's best observed is 0.95 at checkpoint 2 (true 0.85); B's is 0.5 at checkpoint 0 (true 0.1)
    assert m["delivered_quality"] == pytest.approx((0.85 + 0.1) / 2)
    assert m["delivered_quality_regret"] == pytest.approx(((0.9 - 0.85) + (0.9 - 0.1)) / 2)


def test_undefined_ratios_are_none_and_no_stop_means_no_delay():
    # one healthy job, nothing stopped: no positives, no stops
    w = workload_from_jobs([dict(submit_h=0.0, gpus=1, length_h=2.0)], total_gpus=1)
    m = compute_metrics(drive(Simulator(w), FIFO()))
    assert m["precision"] is None and m["recall"] is None and m["f1"] is None
    assert m["detection_delay_evals"] is None
    assert m["fpr"] == 0.0 and m["jobs_stopped"] == 0


def test_f1_is_none_when_precision_and_recall_are_both_zero():
    # a hacking job missed and a healthy job stopped: precision 0 / 1 = 0, recall 0 / 1 = 0
    # (observed scores are given for both jobs: a workload takes them only when every job has them)
    w = workload_from_jobs([dict(submit_h=0.0, gpus=1, length_h=4.0, hacking=True, observed=[0.1, 0.2, 0.3, 0.4]),
                            dict(submit_h=0.0, gpus=1, length_h=4.0, observed=[0.4, 0.3, 0.2, 0.5])],
                           total_gpus=2)
    m = compute_metrics(drive(Simulator(w), EvalStop(FIFO(), k=2)))
    assert (m["true_positives"], m["false_positives"], m["false_negatives"]) == (0, 1, 1)
    assert m["precision"] == 0.0 and m["recall"] == 0.0 and m["f1"] is None
    assert m["fpr"] == 1.0


def test_a_job_stopped_before_any_eval_delivers_its_starting_checkpoint():
    # Two 1-GPU jobs on 1 GPU; the driver stops the waiting one at t=0. It ran 0 h and delivers the
    # starting checkpoint, whose true score is ``curves.start`` (0 for a hand-written job).
    w = workload_from_jobs([dict(submit_h=0.0, gpus=1, length_h=2.0, gold=[0.3, 0.6]),
                            dict(submit_h=0.0, gpus=1, length_h=2.0, gold=[0.4, 0.8], hacking=True)],
                           total_gpus=1)
    sim = Simulator(w)
    assert sim.advance() == SCHEDULE
    sim.start(0)
    sim.stop(1)
    out = drive_to_end(sim)
    assert out.delivered_ckpt.tolist() == [1, -1]
    assert out.finish_h.tolist() == [2.0, 0.0] and out.service_h.tolist() == [2.0, 0.0]
    m = compute_metrics(out)
    assert m["delivered_quality"] == pytest.approx((0.6 + 0.0) / 2)
    assert m["delivered_quality_regret"] == pytest.approx(((0.6 - 0.6) + (0.8 - 0.0)) / 2)
    assert m["detection_delay_evals"] == pytest.approx(0 - 1 - 1)   # 0 evals seen, peak at index 1
    # JCTs 2 and 0; the makespan is 2 h and the one GPU ran 2 GPU-hours
    assert m["avg_jct_h"] == pytest.approx(1.0) and m["utilization"] == pytest.approx(2.0 / (1 * 2.0))


def drive_to_end(sim):
    """Advance a simulator on which no further decision is needed; return its outcome."""
    while not sim.done:
        sim.advance()
    return sim.outcome()


def test_preemptions_and_waste_count_gpu_hours_of_every_run_segment():
    # One 2-GPU hacking job (4 h, 4 evals, true peak at checkpoint 0) on 2 GPUs, preempted at 1.5 h and
    # resumed at 2.5 h: it runs 4 h in all, 3 h of them past its 1 h peak, on 2 GPUs -> 6 GPU-hours waste.
    w = workload_from_jobs([dict(submit_h=0.0, gpus=2, length_h=4.0, hacking=True, gold=[0.9, 0.8, 0.7, 0.6])],
                           total_gpus=2)
    sim = Simulator(w)
    sim.advance()
    sim.start(0)
    sim.request_wakeup(1.5)
    while sim.cluster.now_h < 1.5:
        sim.advance()
    sim.preempt(0)
    sim.request_wakeup(2.5)
    sim.advance()
    assert sim.cluster.now_h == 2.5
    sim.start(0)
    m = compute_metrics(drive_to_end(sim))
    assert m["preemptions"] == 1
    assert m["compute_waste_gpu_h"] == pytest.approx((4.0 - 1.0) * 2)
    assert m["gpu_hours"] == pytest.approx(4.0 * 2)
    assert m["avg_jct_h"] == pytest.approx(5.0) and m["avg_queue_h"] == pytest.approx(5.0 - 4.0)
    assert m["utilization"] == pytest.approx(8.0 / (2 * 5.0))


def test_makespan_runs_from_the_first_submit_and_short_episodes_keep_their_utilization():
    # 2 GPUs; J0 (1 GPU, 0.5 h) arrives at t=1, J1 (2 GPUs, 0.25 h) at t=1.25 and waits for J0 until 1.5
    w = workload_from_jobs([dict(submit_h=1.0, gpus=1, length_h=0.5), dict(submit_h=1.25, gpus=2, length_h=0.25)],
                           total_gpus=2)
    m = compute_metrics(drive(Simulator(w), FIFO()))
    assert m["makespan_h"] == pytest.approx(1.75 - 1.0)                 # last finish 1.75, first submit 1.0
    assert m["utilization"] == pytest.approx((0.5 * 1 + 0.25 * 2) / (2 * 0.75))
    assert m["avg_jct_h"] == pytest.approx((0.5 + 0.5) / 2)


def test_an_episode_of_zero_length_has_zero_utilization():
    # the only job is stopped the instant it arrives: makespan 0, nothing ran; no division by zero
    sim = Simulator(workload_from_jobs([dict(submit_h=2.0, gpus=1, length_h=1.0)], total_gpus=1))
    sim.advance()
    sim.stop(0)
    m = compute_metrics(drive_to_end(sim))
    assert m["makespan_h"] == 0.0 and m["utilization"] == 0.0 and m["gpu_hours"] == 0.0
