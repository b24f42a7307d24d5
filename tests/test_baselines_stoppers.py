"""Stoppers on hand-written score and loss sequences, composition, noise estimation, bad input.

A job of ``e`` evals and ``e`` hours has one eval per hour, so a job stopped at
eval ``i`` finishes at ``t = i`` (it starts at 0 on its own GPU). The last eval
is the completion: no stopper is asked there.
"""

import math

import numpy as np
import pytest

from evalstop_gym.baselines import (CUSUM, FIFO, SCHEDULERS, STOPPERS, Divergence, DropTest, EvalStop, LossPlateau,
                                    Patience, SmoothedDecline, StopAtProgress, make_policy)
from evalstop_gym.baselines.noise import MIN_DIFFERENCES, PooledNoise
from evalstop_gym import WorkloadConfig, generate
from evalstop_gym.cli import main as cli_main
from evalstop_gym.config import ConfigError
from evalstop_gym.metrics import compute_metrics
from evalstop_gym.policy import drive
from evalstop_gym.simulator import Simulator
from evalstop_gym.timebase import to_ticks
from evalstop_gym.workload import workload_from_jobs


def jobs_with(*rows, key="observed", **common):
    """One job per row of ``key`` values (scores or losses), each on its own GPU from t=0."""
    e = len(rows[0])
    jobs = [dict(submit_h=0.0, gpus=1, length_h=float(e), **{key: list(r)}, **common) for r in rows]
    if key == "observed":
        for j in jobs:
            j["gold"] = j["observed"]
    return workload_from_jobs(jobs, total_gpus=len(rows), evals_per_job=e)


def stop_evals(workload, policy):
    """Eval index at which each job was stopped, or None if it completed."""
    out = drive(Simulator(workload), policy)
    return [int(n) if s else None for n, s in zip(out.evals_seen, out.stopped)]


RISING = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85]


def test_stopat_stops_rlhf_jobs_at_the_progress_and_spares_other_types():
    rlhf = dict(submit_h=0.0, gpus=1, length_h=10.0, job_type="rlhf", gold=RISING)
    lora = dict(rlhf, job_type="lora")
    w = workload_from_jobs([rlhf, lora], total_gpus=2)
    # progress 0.7 at eval 7 is the first >= 0.65; a healthy rising run is stopped all the same
    assert stop_evals(w, StopAtProgress(FIFO(), p=0.65)) == [7, None]
    assert stop_evals(w, StopAtProgress(FIFO(), p=0.3)) == [3, None]


def test_lossplateau_stops_when_the_loss_gain_over_the_window_falls_below_tolerance():
    plateau = [2.0, 1.5, 1.2, 1.1, 1.095, 1.09, 1.088, 1.087, 1.086, 1.085]
    falling = [2.0 * 0.95 ** i for i in range(10)]       # 5% per eval: never a plateau
    w = jobs_with(plateau, falling, key="loss")
    # against the loss 3 evals earlier: eval 7 (1.1 - 1.088) / 1.1 = 1.09%, eval 8
    # (1.095 - 1.087) / 1.095 = 0.73% < 1% -> stop at eval 8
    assert stop_evals(w, LossPlateau(FIFO(), window=3, tolerance=0.01)) == [8, None]
    # a 1-eval window sees (1.1 - 1.095) / 1.1 = 0.45% already at eval 5
    assert stop_evals(w, LossPlateau(FIFO(), window=1, tolerance=0.01)) == [5, None]


def test_lossplateau_on_a_loss_that_reaches_zero_or_goes_negative():
    # window 1: eval 3 gains (0.5 - 0) / 0.5 = 100%; eval 4 starts from 0 and stays there: a plateau
    to_zero = [1.0, 0.5, 0.0, 0.0, 0.0, 0.0]
    # a negative loss falling by 1 per eval gains 1 / |before| >= 1/5 per eval: never a plateau
    negative = [-1.0, -2.0, -3.0, -4.0, -5.0, -6.0]
    w = jobs_with(to_zero, negative, key="loss")
    assert stop_evals(w, LossPlateau(FIFO(), window=1, tolerance=0.01)) == [4, None]


def test_lossplateau_cannot_see_a_hacking_run_whose_loss_keeps_falling():
    hacking = dict(submit_h=0.0, gpus=1, length_h=10.0, hacking=True,
                   gold=[.3, .6, .8, .7, .5, .3, .1, .0, .0, .0], loss=[2.0 * 0.95 ** i for i in range(10)])
    w = workload_from_jobs([hacking], total_gpus=1)
    assert stop_evals(w, LossPlateau(FIFO())) == [None]
    assert stop_evals(w, EvalStop(FIFO(), k=2)) == [5]


def test_patience_counts_evals_without_a_new_best():
    # best 0.5 at eval 2; 0.45, 0.48, 0.49 are no new best: wait 3 at eval 5
    a = [0.1, 0.5, 0.45, 0.48, 0.49, 0.6, 0.7, 0.8, 0.9, 1.0]
    # new bests at evals 5 and 6 reset the wait; 0.52, 0.50, 0.49 make it 3 at eval 9
    b = [0.1, 0.5, 0.45, 0.48, 0.51, 0.55, 0.52, 0.50, 0.49, 0.48]
    w = jobs_with(a, b)
    assert stop_evals(w, Patience(FIFO(), patience=3, min_delta=0.0)) == [5, 9]
    # EvalStop(k=2) sees no two consecutive declines in a, and stops b at its second one (eval 8)
    assert stop_evals(w, EvalStop(FIFO(), k=2)) == [None, 8]
    # min_delta 0.02: 0.51 is not 0.02 above 0.5, so b's wait reaches 3 at eval 5 too
    assert stop_evals(w, Patience(FIFO(), patience=3, min_delta=0.02)) == [5, 5]


def test_cusum_stops_when_the_drop_from_a_recent_high_exceeds_the_threshold():
    # sigma 0.05: deltas have sd 0.05 * sqrt(2) = 0.0707; threshold 2.5 sd = 0.177 below a high.
    # a: from 0.5 down 0.05, 0.10, 0.20 at eval 5 -> stop at eval 5.
    a = [0.2, 0.5, 0.45, 0.40, 0.30, 0.25, 0.2, 0.2, 0.2, 0.2]
    # b: dips of 0.1 that recover never accumulate
    b = [0.2, 0.5, 0.4, 0.5, 0.4, 0.5, 0.4, 0.5, 0.4, 0.5]
    w = jobs_with(a, b)
    assert stop_evals(w, CUSUM(FIFO(), threshold=2.5, sigma=0.05)) == [5, None]
    # drift 1 sd forgives 0.0707 of every step down: a's sum peaks at 0.10 - 0.0707 = 0.03
    assert stop_evals(w, CUSUM(FIFO(), threshold=2.5, drift=1.0, sigma=0.05)) == [None, None]


def test_smoothed_stops_when_the_slope_over_the_window_turns_negative():
    peak = [0.1, 0.3, 0.5, 0.6, 0.55, 0.5, 0.45, 0.4, 0.35, 0.3]
    # slope of the last 6 scores, x = -2.5..2.5 (sum x^2 = 17.5):
    #   eval 7, [.3 .5 .6 .55 .5 .45]:  sum x*y = +0.35 / 17.5 > 0
    #   eval 8, [.5 .6 .55 .5 .45 .4]:  sum x*y = -0.50 / 17.5 < 0 -> stop
    noisy_rise = [0.1, 0.3, 0.25, 0.45, 0.4, 0.6, 0.55, 0.7, 0.65, 0.8]
    w = jobs_with(peak, noisy_rise)
    assert stop_evals(w, SmoothedDecline(FIFO(), window=6, threshold=0.0, sigma=0.05)) == [8, None]
    # threshold 1: the slope must be below -1 standard error, -0.05 / sqrt(17.5) = -0.012 per eval;
    # eval 8's slope, -0.029, already is
    assert stop_evals(w, SmoothedDecline(FIFO(), window=6, threshold=1.0, sigma=0.05)) == [8, None]
    # threshold 3 (-0.036 per eval) waits for eval 9, [.6 .55 .5 .45 .4 .35], slope -0.05
    assert stop_evals(w, SmoothedDecline(FIFO(), window=6, threshold=3.0, sigma=0.05)) == [9, None]
    # EvalStop k=2 reacts two evals sooner on the clean peak (declines at evals 5 and 6)
    assert stop_evals(w, EvalStop(FIFO(), k=2)) == [6, None]


class _Scores:
    """A stand-in for a JobView: only what PooledNoise reads."""

    def __init__(self, job_id, scores):
        self.job_id, self.eval_scores = job_id, scores


def test_pooled_noise_estimates_sigma_from_second_differences():
    rng = np.random.default_rng(0)
    pool = PooledNoise()
    x = np.linspace(0.1, 1.0, 10)
    for j in range(60):                                   # 60 rising runs (slopes cancel in d2)
        pool.observe(_Scores(j, list(0.8 * x + 0.07 * rng.standard_normal(10))))
    assert pool.sigma == pytest.approx(0.07, rel=0.15)
    pool.reset()
    assert pool.sigma is None


def test_pooled_noise_counts_each_score_once_and_waits_for_enough_data():
    pool = PooledNoise()
    scores = [0.0, 0.1, 0.0]                              # one second difference, |0.2|
    for _ in range(3):                                    # the same job seen three times
        pool.observe(_Scores(0, scores))
    assert pool._abs_d2 == pytest.approx([0.2])
    for j in range(1, MIN_DIFFERENCES):
        pool.observe(_Scores(j, scores))
    assert pool.sigma == pytest.approx(0.2 / (0.6745 * math.sqrt(6)))


def test_detector_without_a_noise_estimate_does_not_stop():
    # one job, too few scores for a pooled sigma: the estimating detector waits, a given sigma acts
    w = jobs_with([0.1, 0.5, 0.9, 0.8, 0.6, 0.4, 0.2, 0.1, 0.0, 0.0])
    assert stop_evals(w, CUSUM(FIFO())) == [None]
    assert stop_evals(w, CUSUM(FIFO(), sigma=0.05)) == [5]


def test_a_reused_detector_resets_its_pool_each_episode():
    w = generate(WorkloadConfig(jobs=60, noise=0.1, seed=5))
    policy = CUSUM(FIFO())
    first = compute_metrics(drive(Simulator(w), policy))
    second = compute_metrics(drive(Simulator(w), policy))
    assert first == second


@pytest.mark.parametrize("stopper", sorted(s for s in STOPPERS if s != "none"))
@pytest.mark.parametrize("scheduler", sorted(SCHEDULERS))
def test_every_stopper_composes_with_every_scheduler(scheduler, stopper):
    w = generate(WorkloadConfig(jobs=40, noise=0.05, seed=3))
    policy = make_policy(scheduler, stopper)
    assert policy.name == f"{scheduler}+{stopper}"
    out = drive(Simulator(w), policy)
    m = compute_metrics(out)
    e = w.evals_per_job
    assert np.isfinite(out.finish_h).all() and (out.finish_h >= w.submit_h).all()   # every job ended
    assert (out.evals_seen[~out.stopped] == e).all()         # completed jobs ran their whole schedule
    assert (out.evals_seen[out.stopped] < e).all()           # stopped jobs ended at an earlier eval
    assert (out.service_ticks <= to_ticks(w.length_h)).all()
    assert m["jobs"] == 40 and m["jobs_stopped"] == int(out.stopped.sum())
    for k in ("precision", "recall", "fpr"):
        assert m[k] is None or 0.0 <= m[k] <= 1.0
    assert 0.0 < m["utilization"] <= 1.0 + 1e-9


BAD = [("evalstop", "k", 0), ("stopat", "p", 0.0), ("stopat", "p", 1.5), ("lossplateau", "window", 0),
       ("lossplateau", "tolerance", -0.1), ("patience", "patience", 0), ("patience", "patience", 2.5),
       ("patience", "min_delta", -1.0), ("cusum", "threshold", -1.0), ("cusum", "drift", float("nan")),
       ("cusum", "sigma", 0.0), ("smoothed", "window", 2), ("smoothed", "threshold", -0.5),
       ("smoothed", "sigma", "0.1")]


@pytest.mark.parametrize("stopper,param,value", BAD)
def test_bad_stopper_parameters_raise_a_one_line_config_error(stopper, param, value):
    with pytest.raises(ConfigError) as err:
        make_policy("srtf-est", stopper, **{param: value})
    assert err.value.field == param and "\n" not in str(err.value)


@pytest.mark.parametrize("args, stopper, params", [
    (["--stop-progress", "0.5"], "stopat", {"p": 0.5}),
    (["--window", "2", "--tolerance", "0.05"], "lossplateau", {"window": 2, "tolerance": 0.05}),
    (["--patience", "4", "--min-delta", "0.01"], "patience", {"patience": 4, "min_delta": 0.01}),
    (["--threshold", "2", "--drift", "0.25", "--sigma", "0.05"], "cusum", {"threshold": 2.0, "drift": 0.25,
                                                                           "sigma": 0.05}),
    (["--window", "5", "--threshold", "0.5"], "smoothed", {"window": 5, "threshold": 0.5}),
])
def test_cli_takes_each_stoppers_flags(args, stopper, params, capsys):
    """The flags reach the stopper: the CLI's metrics are the API's with these parameters, not the defaults'."""
    import json

    from evalstop_gym import simulate

    assert cli_main(["simulate", "--scheduler", "tiresias", "--jobs", "40", "--json", "--stopper", stopper,
                     *args]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got == simulate("tiresias", stopper, jobs=40, **params)
    assert got != simulate("tiresias", stopper, jobs=40)


def test_cli_refuses_a_flag_the_stopper_does_not_take(capsys):
    assert cli_main(["simulate", "--stopper", "evalstop", "--window", "3", "--jobs", "20"]) == 2
    err = capsys.readouterr().err
    assert "window=3" in err and "evalstop" in err and err.count("\n") == 1


# -- parameters and rules, value by value ----------------------------------------------------------
# (each bad value's whole message is checked: it names the field, the value and the allowed range)

def _lossaware(**kw):
    from evalstop_gym.baselines import LossAware

    return LossAware(**kw)


def _tiresias(**kw):
    from evalstop_gym.baselines import Tiresias

    return Tiresias(**kw)


PARAMETER_MESSAGES = [
    (lambda: EvalStop(FIFO(), k=1.5), "k=1.5 is invalid: must be an integer >= 1"),
    (lambda: _lossaware(window=0), "window=0 is invalid: must be an integer >= 1"),
    (lambda: _lossaware(window=2.0), "window=2.0 is invalid: must be an integer >= 1"),
    (lambda: LossPlateau(FIFO(), window=2.0), "window=2.0 is invalid: must be an integer >= 1"),
    (lambda: LossPlateau(FIFO(), tolerance=1.5), "tolerance=1.5 is invalid: must be a number in [0.0, 1.0]"),
    (lambda: Patience(FIFO(), patience=0), "patience=0 is invalid: must be an integer >= 1"),
    (lambda: Patience(FIFO(), min_delta=1.5), "min_delta=1.5 is invalid: must be a number in [0.0, 1.0]"),
    (lambda: CUSUM(FIFO(), threshold=-1.0), "threshold=-1.0 is invalid: must be a number >= 0.0"),
    (lambda: CUSUM(FIFO(), drift=-0.5), "drift=-0.5 is invalid: must be a number >= 0.0"),
    (lambda: CUSUM(FIFO(), sigma=1.5), "sigma=1.5 is invalid: must be a number in (0.0, 1.0]"),
    (lambda: SmoothedDecline(FIFO(), window=1001), "window=1001 is invalid: must be an integer in [3, 1000]"),
    (lambda: SmoothedDecline(FIFO(), window=4.0), "window=4.0 is invalid: must be an integer in [3, 1000]"),
    (lambda: _tiresias(thresholds_gpu_h=(0.0, 1.0)), "thresholds_gpu_h=0.0 is invalid: must be a number > 0.0"),
    (lambda: _tiresias(thresholds_gpu_h=(2.0, 1.0)),
     "thresholds_gpu_h=(2.0, 1.0) is invalid: must be strictly increasing"),
    (lambda: _tiresias(promote_knob=0.0), "promote_knob=0.0 is invalid: must be a number > 0.0"),
    (lambda: make_policy("nope"), "scheduler='nope' is invalid: must be one of " + ", ".join(SCHEDULERS)),
    (lambda: make_policy("fifo", "nope"), "stopper='nope' is invalid: must be one of " + ", ".join(STOPPERS)),
    (lambda: make_policy("fifo", "none", k=2), "k=2 is invalid: is not a parameter of stopper 'none' "
                                                "(it takes: nothing)"),
    (lambda: make_policy("fifo", "patience", k=2), "k=2 is invalid: is not a parameter of stopper 'patience' "
                                                    "(it takes: patience, min_delta, warmup, "
                                                    "warmup_progress)"),
]


@pytest.mark.parametrize("make, message", PARAMETER_MESSAGES)
def test_bad_parameters_say_field_value_and_range(make, message):
    with pytest.raises(ConfigError) as e:
        make()
    assert str(e.value) == message


def test_the_edges_of_every_range_are_accepted():
    EvalStop(FIFO(), k=1)
    _lossaware(window=1)
    LossPlateau(FIFO(), window=1, tolerance=0.0)
    LossPlateau(FIFO(), tolerance=1.0)
    Patience(FIFO(), patience=1, min_delta=1.0)
    CUSUM(FIFO(), threshold=0.0, drift=0.0, sigma=1.0)
    SmoothedDecline(FIFO(), window=3)
    SmoothedDecline(FIFO(), window=1000, threshold=0.0)
    _tiresias(thresholds_gpu_h=(0.5,), promote_knob=0.1)


WARMUP = ["warmup", "warmup_progress"]


def test_registry_names_each_stoppers_parameters():
    from evalstop_gym.baselines import stopper_params

    assert {s: stopper_params(s) for s in STOPPERS} == {
        "none": [], "evalstop": ["k", "min_delta", *WARMUP], "stopat": ["p"],
        "lossplateau": ["window", "tolerance", *WARMUP],
        "patience": ["patience", "min_delta", *WARMUP], "cusum": ["threshold", "drift", "sigma", *WARMUP],
        "smoothed": ["window", "threshold", "sigma", *WARMUP],
        "droptest": ["window", "z", "min_drop", "sigma", *WARMUP],
        "divergence": ["window", "z", "min_drop", "fast_z", "fast_min_drop", "proxy_z", "lag", "sigma", *WARMUP]}
    assert type(make_policy("srtf-est", "none")) is SCHEDULERS["srtf-est"]      # no stopper: the bare scheduler
    p = make_policy("fifo", "patience", patience=4)
    assert type(p) is Patience and p.patience == 4 and type(p.base) is FIFO


def view_with(scores=(), losses=(), submit_h=0.0):
    from evalstop_gym.view import ClusterView, JobView

    from evalstop_gym.timebase import TICKS_PER_HOUR

    # the view takes times in ticks (1 ms): submit_h hours, a 1-hour estimate
    v = JobView(0, 0, "rlhf", 1, round(submit_h * TICKS_PER_HOUR), TICKS_PER_HOUR, 10, ClusterView(1))
    v.eval_scores.extend(scores)
    v.train_losses.extend(losses)
    return v


def test_loss_plateau_rule_by_hand():
    rule = LossPlateau(FIFO(), window=2, tolerance=0.25).rule
    # improvement over the last 2 evals, relative to the loss 2 evals back: (2 - 1.5) / 2 = 0.25, not < 0.25
    assert not rule(view_with(losses=[2.0, 1.75, 1.5]), None)
    assert rule(view_with(losses=[2.0, 1.75, 1.625]), None)          # (2 - 1.625) / 2 = 0.1875 < 0.25
    assert not rule(view_with(losses=[2.0, 2.0]), None)              # needs window + 1 losses
    assert rule(view_with(losses=[9.0, 2.0, 1.75, 1.625]), None)     # only the last window + 1 count


def test_patience_rule_by_hand():
    rule = Patience(FIFO(), patience=2, min_delta=0.25).rule
    # a new best must beat the best by more than min_delta: 0.75 - 0.25 = 0.5 is not > 0.5
    assert rule(view_with(scores=[0.5, 0.75, 0.75]), None)          # two evals without a new best
    assert not rule(view_with(scores=[0.5, 0.875, 0.75]), None)     # 0.875 was a new best: one eval since
    assert not Patience(FIFO(), patience=1).rule(view_with(scores=[0.5]), None)   # nothing to wait on yet


def test_cusum_statistic_by_hand():
    c = CUSUM(FIFO(), threshold=0.1, drift=0.5)
    sigma = 0.5 / math.sqrt(2)        # the statistic's unit: sqrt(2) sigma = 0.5
    # two declines of 0.3, each less the drift 0.5 x 0.5 = 0.25: s = 0.05, then 0.1 > 0.1 x 0.5
    assert c.declined([1.0, 0.7, 0.4], sigma)
    assert not c.declined([1.0, 0.7], sigma * 1.5)                  # one decline of 0.3 < drift 0.375
    # noise-free scores (sigma 0): any decline counts, no decline never does
    assert CUSUM(FIFO()).declined([0.5, 0.4], 0.0)
    assert not CUSUM(FIFO()).declined([0.5, 0.6], 0.0)


def test_smoothed_decline_by_hand():
    s = SmoothedDecline(FIFO(), window=3, threshold=0.0)
    assert s.declined([0.9, 0.8, 0.7], 0.1)                         # exactly a window: tested
    assert not s.declined([0.8, 0.7], 0.1)                          # shorter: not yet
    assert not s.declined([0.5, 0.5, 0.5], 0.1)                     # a flat run: slope 0 is not a decline
    # only the last 3 count; over 3 points the least-squares slope is (last - first) / 2
    assert not s.declined([0.9, 0.2, 0.7, 0.6, 0.8], 0.1)           # (0.8 - 0.7) / 2 > 0
    assert s.declined([0.2, 0.9, 0.8, 0.9, 0.7], 0.1)               # (0.7 - 0.8) / 2 < 0


def test_loss_aware_key_by_hand():
    la = _lossaware(window=3)
    # no loss reduction known yet: first group, then submit order
    assert la.key(view_with(losses=[2.0], submit_h=1.5), None) == (0, 0.0, 1.5)
    # two losses: reduction over 1 eval, relative: -(2 - 1) / (1 x 2)
    assert la.key(view_with(losses=[2.0, 1.0], submit_h=1.5), None) == (1, -0.5, 1.5)
    # three losses, window 3 capped at 2 evals: -(2 - 1) / (2 x 2)
    assert la.key(view_with(losses=[2.0, 1.5, 1.0], submit_h=1.5), None) == (1, -0.25, 1.5)
    # five losses, window 3: from the loss 3 evals back, -(4 - 1) / (3 x 4)
    assert la.key(view_with(losses=[8.0, 4.0, 3.0, 2.0, 1.0]), None) == (1, -0.25, 0.0)


def test_documented_defaults():
    assert EvalStop(FIFO()).k == 2 and StopAtProgress(FIFO()).p == 0.65
    assert _lossaware().window == 3
    assert (LossPlateau(FIFO()).window, LossPlateau(FIFO()).tolerance) == (3, 0.01)
    # the detectors' defaults are docs/select_detectors.py's choice on validation seeds, recorded in
    # docs/detector_defaults.json (tests/test_baselines_defaults.py holds the two equal)
    assert (Patience(FIFO()).patience, Patience(FIFO()).min_delta) == (3, 0.0)
    c, s = CUSUM(FIFO()), SmoothedDecline(FIFO())
    assert (c.threshold, c.drift, c.sigma) == (1.5, 0.0, None) and (s.window, s.threshold, s.sigma) == (3, 1.0, None)
    d, v = DropTest(FIFO()), Divergence(FIFO())
    assert (d.window, d.z, d.min_drop, d.sigma) == (1, 1.5, 0.08, None)
    assert (v.window, v.z, v.min_drop, v.fast_z, v.fast_min_drop, v.proxy_z, v.lag) == (2, 1.5, 0.04, 1.5, 0.04, 1.0, 2)
    t = _tiresias()
    assert (t.thresholds_gpu_h, t.promote_knob) == ((4.0, 32.0), 2.0)
    assert type(make_policy()) is FIFO


def test_tiresias_demotion_preemption_and_promotion_by_hand():
    from evalstop_gym.policy import Policy

    class Times(Policy):
        def __init__(self, base):
            self.base, self.t = base, []

        def reset(self):
            self.base.reset()

        def schedule(self, cluster):
            self.t.append(cluster.now_h)
            return self.base.schedule(cluster)

    # 1 GPU; one threshold at 1 GPU-hour; a waiting job is promoted after waiting as long as it has run.
    # t=0 J0 starts. t=1 J0 has 1 GPU-hour: demoted below J1 (arrived 0.5), preempted; J1 runs 1-2.
    # t=2 J1 ends, J2 arrives (end of the top queue), and J0 has waited 1 h = its 1 h of run: promoted
    # to the end of the top queue, behind J2 (arrivals enter first); its GPU-hours count from 0 again.
    # J2 runs 2-3, then J0; at t=4 it crosses the threshold again (a wake-up) and, alone, keeps its
    # GPU until it completes its 3 h at t=5.
    w = workload_from_jobs([dict(submit_h=0.0, gpus=1, length_h=3.0), dict(submit_h=0.5, gpus=1, length_h=1.0),
                            dict(submit_h=2.0, gpus=1, length_h=1.0)], total_gpus=1, evals_per_job=2)
    pol = Times(_tiresias(thresholds_gpu_h=(1.0,), promote_knob=1.0))
    out = drive(Simulator(w), pol)
    assert out.finish_h.tolist() == [5.0, 2.0, 3.0] and out.preemptions == 1
    assert pol.t == [0.0, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0]
