"""The options every stopper shares: ``min_delta`` (a smaller fall is not a decline) and the warm-up
(``warmup`` evals / ``warmup_progress`` of the run without a decision), on hand-written score sequences.

A job of ``e`` evals and ``e`` hours has one eval per hour; the last eval is the completion, where no
stopper is asked. Expected stop evals are counted by hand in the comments.
"""

import pytest

from evalstop_gym.baselines import (CUSUM, FIFO, STOPPERS, DropTest, EvalStop, LossPlateau, Patience,
                                    make_policy, stopper_params)
from evalstop_gym.baselines.evalstop import trailing_declines
from evalstop_gym.config import ConfigError
from evalstop_gym.policy import drive
from evalstop_gym.simulator import Simulator
from evalstop_gym.workload import workload_from_jobs


def stop_evals(rows, policy):
    e = len(rows[0])
    jobs = [dict(submit_h=0.0, gpus=1, length_h=float(e), observed=list(r), gold=list(r)) for r in rows]
    out = drive(Simulator(workload_from_jobs(jobs, total_gpus=len(rows), evals_per_job=e)), policy)
    return [int(n) if s else None for n, s in zip(out.evals_seen, out.stopped)]


# falls of 0.01 are noise, falls of 0.1 are real
SMALL = [0.5, 0.6, 0.59, 0.58, 0.57, 0.56, 0.7, 0.8, 0.9, 1.0]
REAL = [0.5, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.1, 0.1, 0.1]


def test_evalstop_min_delta_ignores_falls_no_larger_than_it():
    # k=2, min_delta 0: SMALL declines at evals 3 and 4 -> stop at 4; REAL at evals 3 and 4 -> 4
    assert stop_evals([SMALL, REAL], EvalStop(FIFO(), k=2)) == [4, 4]
    # min_delta 0.05: SMALL's falls of 0.01 are no declines (never stops); REAL's falls of 0.1 are -> 4
    assert stop_evals([SMALL, REAL], EvalStop(FIFO(), k=2, min_delta=0.05)) == [None, 4]


def test_trailing_declines_by_hand():
    assert trailing_declines([0.5, 0.6, 0.5, 0.4], 0.0) == 2
    assert trailing_declines([0.5, 0.6, 0.5, 0.46], 0.05) == 0     # the last fall, 0.04, is no decline
    assert trailing_declines([0.5, 0.6, 0.54, 0.44], 0.05) == 2    # falls of 0.06 and 0.10
    assert trailing_declines([0.5, 0.6, 0.58, 0.48], 0.05) == 1    # 0.02 is no decline: the count ends there
    assert trailing_declines([0.5], 0.0) == 0
    assert trailing_declines([0.5, 0.4, 0.5], 0.0) == 0              # the last eval rose


@pytest.mark.parametrize("rows", [[SMALL, REAL], [REAL[::-1], SMALL[::-1]], [[0.5, 0.5, 0.4, 0.4, 0.3, 0.3]]])
def test_evalstop_min_delta_zero_is_the_simulators_decline_count(rows):
    """The score-walking count at min_delta 0 equals ``job.consecutive_declines`` (ties are no decline)."""
    class Walked(EvalStop):
        def rule(self, job, cluster):
            assert trailing_declines(job.eval_scores, 0.0) == job.consecutive_declines
            return super().rule(job, cluster)

    assert stop_evals(rows, Walked(FIFO(), k=2)) == stop_evals(rows, EvalStop(FIFO(), k=2))


def test_warmup_holds_the_decision_for_its_first_evals():
    # REAL's second decline is at eval 4; warmup 5: evals 1..5 are not judged, eval 6 has 4 declines -> 6
    assert stop_evals([REAL], EvalStop(FIFO(), k=2, warmup=5)) == [6]
    assert stop_evals([REAL], EvalStop(FIFO(), k=2, warmup=3)) == [4]   # eval 4 is past the warm-up
    # patience 1: 0.5 at eval 3 is the first eval without a new best; warmup 4 moves the stop to eval 5
    assert stop_evals([REAL], Patience(FIFO(), patience=1)) == [3]
    assert stop_evals([REAL], Patience(FIFO(), patience=1, warmup=4)) == [5]


def test_warmup_progress_holds_the_decision_below_that_fraction_of_the_run():
    # 10 evals: progress at eval i is i / 10; 0.55 lets eval 6 be the first judged
    assert stop_evals([REAL], EvalStop(FIFO(), k=2, warmup_progress=0.55)) == [6]
    assert stop_evals([REAL], EvalStop(FIFO(), k=2, warmup_progress=0.4)) == [4]


def test_a_noise_aware_stopper_still_learns_from_a_job_in_warm_up():
    """The pooled noise estimate sees every score, warm-up or not: with a known sigma and with the estimate
    the warm-up changes only when the rule may fire."""
    rows = [[0.5 + 0.01 * ((i * 7 + j) % 3) for i in range(10)] for j in range(8)] + [REAL]
    plain = stop_evals(rows, DropTest(FIFO(), sigma=0.01))
    warm = stop_evals(rows, DropTest(FIFO(), sigma=0.01, warmup=5))
    assert plain[-1] == 3 and warm[-1] == 6          # REAL's drop of 0.1 >= 0.08 from eval 3; held to eval 6
    # a job at its 4th eval, in warm-up: no decision, but its 4 scores are pooled (2 second differences)
    from evalstop_gym.view import ClusterView, JobView

    est = DropTest(FIFO(), warmup=5)
    job = JobView(0, 0, "rlhf", 1, 0, 1000, 10, ClusterView(1))
    job.eval_scores.extend([0.5, 0.9, 0.1, 0.1])
    assert not est.should_stop(job, ClusterView(1))
    assert est.noise._pools[0]._seen == {0: 4} and len(est.noise._pools[0]._abs_d2) == 2


def test_every_score_stopper_takes_the_same_warmup_names():
    for name, cls in STOPPERS.items():
        if cls is None or name == "stopat":   # stopat decides by progress alone: nothing to warm up
            continue
        assert {"warmup", "warmup_progress"} <= set(stopper_params(name)), name
    assert {"min_delta"} <= set(stopper_params("evalstop")) & set(stopper_params("patience"))


@pytest.mark.parametrize("stopper, param, value, message", [
    ("evalstop", "min_delta", -0.1, "min_delta=-0.1 is invalid: must be a number in [0.0, 1.0]"),
    ("evalstop", "warmup", -1, "warmup=-1 is invalid: must be an integer >= 0"),
    ("cusum", "warmup", 1.5, "warmup=1.5 is invalid: must be an integer >= 0"),
    ("lossplateau", "warmup_progress", 1.5, "warmup_progress=1.5 is invalid: must be a number in [0.0, 1.0]"),
])
def test_bad_options_say_field_value_and_range(stopper, param, value, message):
    with pytest.raises(ConfigError) as e:
        make_policy("fifo", stopper, **{param: value})
    assert str(e.value) == message


def test_min_evals_names_when_a_rule_can_first_stop():
    assert EvalStop(FIFO(), k=3).min_evals() == 4
    assert EvalStop(FIFO(), k=1, warmup=5).min_evals() == 6
    assert Patience(FIFO(), patience=4).min_evals() == 5
    assert CUSUM(FIFO()).min_evals() == 2 and LossPlateau(FIFO(), warmup=2).min_evals() == 3
