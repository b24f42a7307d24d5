"""The workload generator and hand-written workloads against their documented rules.

Job-type models with one GPU choice and no length spread pin demands and
lengths, so arrival rates and sizes are worked out by hand.
"""

import math

import numpy as np
import pytest

from evalstop_gym import WorkloadConfig, generate
from evalstop_gym.config import DEFAULT_JOB_TYPES, JOB_TYPES, ConfigError, JobTypeModel
from evalstop_gym.workload import offered_rate, workload_from_jobs

# LoRA: 1 GPU for exactly 2 h; DPO: 4 GPUs for exactly 1 h; RLHF: 2 GPUs for exactly 3 h
FIXED = {"lora": JobTypeModel((1,), (1.0,), median_h=2.0, sigma=0.0),
         "dpo": JobTypeModel((4,), (1.0,), median_h=1.0, sigma=0.0),
         "rlhf": JobTypeModel((2,), (1.0,), median_h=3.0, sigma=0.0)}


def fixed(**kw):
    return WorkloadConfig(**{"job_types": FIXED, "gpus": 12, "estimate_error": 0.0, **kw})


def test_offered_rate_by_hand():
    # E[gpus x hours] = 0.5 * (1 * 2) + 0.5 * (4 * 1) = 3 GPU-hours a job; 1.5 x 12 GPUs / 3 = 6 jobs an hour
    cfg = fixed(mix={"lora": 0.5, "dpo": 0.5}, load=1.5)
    assert offered_rate(cfg) == pytest.approx(1.5 * 12 / (0.5 * 1 * 2 + 0.5 * 4 * 1))
    # a log-normal length of median m and sigma s has mean m exp(s^2 / 2)
    spread = {**FIXED, "rlhf": JobTypeModel((2,), (1.0,), median_h=3.0, sigma=0.5)}
    cfg = fixed(mix={"rlhf": 1.0}, job_types=spread)
    assert offered_rate(cfg) == pytest.approx(12 / (2 * 3.0 * math.exp(0.5 ** 2 / 2)))
    # a preset's default job types: mean demand from the GPU choices and their probabilities
    cfg = WorkloadConfig(workload="balanced", gpus=64, load=0.8)
    expected = 0.0
    for t in JOB_TYPES:
        m = DEFAULT_JOB_TYPES[t]
        mean_gpus = sum(g * p for g, p in zip(m.gpu_choices, m.gpu_probs))
        expected += cfg.type_mix[t] * mean_gpus * m.median_h * math.exp(m.sigma ** 2 / 2)
    assert offered_rate(cfg) == pytest.approx(0.8 * 64 / expected)


def test_generated_jobs_follow_the_config():
    cfg = fixed(mix={"lora": 0.5, "dpo": 0.25, "rlhf": 0.25}, jobs=4000, seed=7, hacking_fraction=0.5, tenants=3)
    w = generate(cfg)
    t = np.array(JOB_TYPES)[w.job_type]
    # types in proportion to the mix
    for name, p in cfg.type_mix.items():
        assert np.mean(t == name) == pytest.approx(p, abs=0.03)
    # each type's pinned demand and length; the estimate is exact with estimate_error 0
    for name, (g, h) in {"lora": (1, 2.0), "dpo": (4, 1.0), "rlhf": (2, 3.0)}.items():
        assert (w.gpus[t == name] == g).all() and (w.length_h[t == name] == h).all()
    np.testing.assert_array_equal(w.est_length_h, w.length_h)
    # Poisson arrivals at the offered rate, the first at t = 0
    assert w.submit_h[0] == 0.0 and (np.diff(w.submit_h) >= 0).all()
    assert np.mean(np.diff(w.submit_h)) == pytest.approx(1 / offered_rate(cfg), rel=0.05)
    # only RLHF runs hack, about hacking_fraction of them
    assert not w.hacking[t != "rlhf"].any()
    assert np.mean(w.hacking[t == "rlhf"]) == pytest.approx(0.5, abs=0.05)
    assert set(w.tenant.tolist()) == {0, 1, 2}
    assert w.total_gpus == 12 and w.noise == cfg.noise and w.evals_per_job == cfg.evals_per_job
    assert w.n == 4000 and w.curves.gold.shape == (4000, cfg.evals_per_job)
    # observed scores: gold plus noise times the standard-normal draws
    np.testing.assert_allclose(w.observed, w.curves.gold + cfg.noise * w.curves.eval_z)


def test_gpu_demands_are_whole_numbers_drawn_with_their_probabilities():
    w = generate(WorkloadConfig(jobs=6000, seed=2, workload="balanced"))
    assert w.gpus.dtype.kind == "i"
    for i, name in enumerate(JOB_TYPES):
        m = DEFAULT_JOB_TYPES[name]
        g = w.gpus[w.job_type == i]
        for choice, p in zip(m.gpu_choices, m.gpu_probs):
            assert np.mean(g == choice) == pytest.approx(p, abs=0.04), (name, choice)


def test_hacking_fraction_extremes_and_estimate_error():
    cfg = fixed(mix={"lora": 0.5, "rlhf": 0.5}, jobs=400, seed=1)
    w = generate(cfg.replace(hacking_fraction=1.0))
    rlhf = w.job_type == JOB_TYPES.index("rlhf")
    # every RLHF proxy is exploitable, but the label is what the curves show (gold falls beyond its noise while
    # the proxy rises): only RLHF runs carry it, and a run whose fall comes too late to show goes unlabelled
    assert not w.hacking[~rlhf].any() and w.hacking[rlhf].mean() > 0.95
    assert not generate(cfg.replace(hacking_fraction=0.0)).hacking.any()
    # the user's estimate: log-normal around the true length, sigma estimate_error
    w = generate(cfg.replace(jobs=4000, estimate_error=0.4))
    ratio = np.log(w.est_length_h / w.length_h)
    assert abs(ratio.mean()) < 0.03 and ratio.std() == pytest.approx(0.4, rel=0.05)


def test_lengths_are_log_normal_and_clipped():
    spread = {**FIXED, "lora": JobTypeModel((1,), (1.0,), median_h=2.0, sigma=0.5, min_h=1.0, max_h=4.0)}
    w = generate(fixed(mix={"lora": 1.0}, job_types=spread, jobs=4000, seed=3))
    assert w.length_h.min() == 1.0 and w.length_h.max() == 4.0        # clipped at both ends
    inside = (w.length_h > 1.0) & (w.length_h < 4.0)
    # the median of a log-normal is its median_h; clipping does not move it
    assert np.median(w.length_h) == pytest.approx(2.0, rel=0.05) and inside.mean() > 0.8
    # P(length < min_h) = Phi(ln(1/2) / 0.5)
    below = 0.5 * (1 + math.erf(math.log(0.5) / 0.5 / math.sqrt(2)))
    assert np.mean(w.length_h == 1.0) == pytest.approx(below, abs=0.02)


def test_same_seed_same_workload_other_seed_other():
    a, b, c = generate(fixed(seed=4)), generate(fixed(seed=4)), generate(fixed(seed=5))
    np.testing.assert_array_equal(a.submit_h, b.submit_h)
    np.testing.assert_array_equal(a.curves.eval_z, b.curves.eval_z)
    assert not np.array_equal(a.submit_h, c.submit_h)


def test_hand_written_workload_defaults():
    w = workload_from_jobs([dict(submit_h=0.0, gpus=2, length_h=3.0), dict(submit_h=1.5, est_length_h=9.0,
                                                                            job_type="lora", tenant=2)],
                           total_gpus=4)
    assert w.n == 2 and w.evals_per_job == 4 and w.total_gpus == 4
    assert w.gpus.tolist() == [2, 1] and w.length_h.tolist() == [3.0, 1.0]
    assert w.est_length_h.tolist() == [3.0, 9.0]               # the true length unless given
    assert [JOB_TYPES[i] for i in w.job_type] == ["rlhf", "lora"] and w.tenant.tolist() == [0, 2]
    assert w.tenant.dtype.kind == w.gpus.dtype.kind == "i"
    assert w.hacking.tolist() == [False, False]
    x = [0.25, 0.5, 0.75, 1.0]
    np.testing.assert_allclose(w.curves.gold, [x, x])           # a straight rise
    np.testing.assert_allclose(w.observed, [x, x])              # observed = gold without noise
    np.testing.assert_allclose(w.curves.loss, [[2 - v for v in x]] * 2)
    np.testing.assert_allclose(w.curves.proxy, [x, x])
    np.testing.assert_array_equal(w.curves.start, [0.0, 0.0])
    np.testing.assert_array_equal(w.curves.peak_progress, [np.inf, np.inf])
    # every curve a job gives is its own
    w = workload_from_jobs([dict(observed=[0.3, 0.1], gold=[0.2, 0.4], loss=[1.0, 0.5], proxy=[0.0, 0.9])],
                           total_gpus=1)
    np.testing.assert_allclose(w.observed, [[0.3, 0.1]])
    np.testing.assert_allclose(w.curves.gold, [[0.2, 0.4]])
    np.testing.assert_allclose(w.curves.loss, [[1.0, 0.5]])
    np.testing.assert_allclose(w.curves.proxy, [[0.0, 0.9]])
    # an empty job: at t=0, 1 GPU, 1 h (and an estimate of 1 h)
    w = workload_from_jobs([{}], total_gpus=1, evals_per_job=6)
    assert w.evals_per_job == 6 and w.submit_h.tolist() == [0.0] and w.gpus.tolist() == [1]
    assert w.length_h.tolist() == [1.0] and w.est_length_h.tolist() == [1.0]


@pytest.mark.parametrize("jobs, message", [
    ([], "jobs=[] is invalid: a workload needs at least one job"),
    ([dict(gpus=5)], "job 0.gpus=5 is invalid: must be <= the cluster's gpus=4"),
    ([dict(), dict(gpus=0)], "job 1.gpus=0 is invalid: must be >= 1"),
    ([dict(length_h=0.0)], "job 0.length_h=0.0 is invalid: must be a finite number of hours in [0.001 s, 1e6 h] (one tick to MAX_HOURS)"),
    ([dict(length_h=2.0), dict(length_h=float("nan"))], "job 1.length_h=nan is invalid: must be a finite number of hours in [0.001 s, 1e6 h] (one tick to MAX_HOURS)"),
    ([dict(length_h=float("inf"))], "job 0.length_h=inf is invalid: must be a finite number of hours in [0.001 s, 1e6 h] (one tick to MAX_HOURS)"),
    ([dict(length_h=0.5)], None),                                   # short is fine: only <= 0 is refused
    ([dict(length_h=0.5), dict(length_h=0.0)], "job 1.length_h=0.0 is invalid: must be a finite number of hours in [0.001 s, 1e6 h] (one tick to MAX_HOURS)"),
    ([dict(submit_h=2.0), dict(submit_h=1.0)],
     "submit_h='unsorted' is invalid: submit times must be non-decreasing in job id"),
    ([dict(gold=[0.1, 0.2]), dict(gold=[0.1, 0.2, 0.3])],            # ragged rows
     "job 1.gold=[0.1, 0.2, 0.3] is invalid: every job needs exactly 2 values"),
    ([dict(gold=[0.1, 0.2], observed=[0.1])], "job 0.observed=[0.1] is invalid: every job needs exactly 2 values"),
])
def test_bad_hand_written_workloads_say_which_field_value_and_rule(jobs, message):
    if message is None:
        assert workload_from_jobs(jobs, total_gpus=4).n == len(jobs)
        return
    with pytest.raises(ConfigError) as e:
        workload_from_jobs(jobs, total_gpus=4)
    assert str(e.value) == message


def test_a_workload_of_no_jobs_is_refused_by_its_own_check():
    from evalstop_gym.curves import Curves
    from evalstop_gym.workload import Workload

    empty, rows = np.zeros(0), np.zeros((0, 3))
    w = Workload(submit_h=empty, gpus=empty.astype(int), length_h=empty, est_length_h=empty, job_type=empty,
                 tenant=empty, hacking=empty.astype(bool), curves=Curves(rows, empty, rows, rows, rows, empty),
                 noise=0.0, total_gpus=1)
    with pytest.raises(ConfigError) as e:
        w.validate()
    assert str(e.value) == "jobs=0 is invalid: a workload needs at least one job"


def test_a_job_that_fits_exactly_is_valid():
    w = workload_from_jobs([dict(gpus=4), dict(gpus=1, submit_h=0.0)], total_gpus=4)
    assert w.gpus.tolist() == [4, 1]
