"""What the detectors estimate from public data: noise per eval-set size, the proxy's noise, and behaviour that
must not depend on the noise's scale (pure noise of any size, a world whose seed-noise factor doubles)."""

import math

import numpy as np
import pytest

from evalstop_gym import WorkloadConfig, generate
from evalstop_gym.api import run_policy
from evalstop_gym.baselines import FIFO, STOPPERS, Divergence, DropTest, make_policy
from evalstop_gym.baselines.noise import MIN_DIFFERENCES, NoiseBySize
from evalstop_gym.config import ConfigError
from evalstop_gym.policy import drive
from evalstop_gym.simulator import Simulator
from evalstop_gym.workload import workload_from_jobs

ESTIMATING = ("patience", "cusum", "smoothed", "droptest", "divergence")


class _Job:
    """A stand-in for a JobView: what the estimators read."""

    def __init__(self, job_id, scores, items=0, proxy=()):
        self.job_id, self.eval_scores, self.eval_items, self.proxy_rewards = job_id, list(scores), items, list(proxy)


def _noisy(rng, sd, evals=10, level=0.5):
    return list(level + sd * rng.standard_normal(evals))


def test_each_eval_set_size_gets_its_own_noise_estimate():
    rng = np.random.default_rng(1)
    noise = NoiseBySize()
    truth = {100: 2 * math.sqrt(0.25 / 100), 10_000: 0.01}    # factor 2 on 100 items; jitter-dominated on 10,000
    for j in range(60):
        n = 100 if j % 2 else 10_000
        noise.observe(_Job(j, _noisy(rng, truth[n]), n))
    for n, sd in truth.items():
        assert noise.sigma(_Job(999, [], n)) == pytest.approx(sd, rel=0.15)
    noise.reset()
    assert noise.sigma(_Job(999, [], 100)) is None


def test_a_size_without_a_pool_of_its_own_borrows_the_pooled_factor():
    rng = np.random.default_rng(2)
    noise = NoiseBySize()
    assert noise.sigma(_Job(0, [], 400)) is None                # nothing pooled yet
    for j in range(40):                                         # factor 2: sd = 2 sqrt(0.25 / 100) = 0.1
        noise.observe(_Job(j, _noisy(rng, 2 * math.sqrt(0.25 / 100)), 100))
    # a 400-item job, none of its size pooled: 2 sqrt(0.25 / 400) = 0.05
    assert noise.sigma(_Job(999, [], 400)) == pytest.approx(0.05, rel=0.15)
    for j in range(100, 100 + MIN_DIFFERENCES // 8 + 1):      # 8 second differences per job: now its own pool
        noise.observe(_Job(j, _noisy(rng, 0.2), 400))
    assert noise.sigma(_Job(999, [], 400)) == pytest.approx(0.2, rel=0.35)
    assert noise.sigma(_Job(999, [], 0)) is None                # unknown size borrows nothing


def test_divergence_measures_the_proxy_rise_against_the_proxys_own_noise_whatever_its_scale():
    rng = np.random.default_rng(3)
    for scale in (1.0, 100.0):                                  # a reward model's units are arbitrary
        d = Divergence(FIFO(), proxy_z=3.0, lag=2)
        for j in range(20):                                     # flat proxies with noise 0.05 x scale
            d.proxy_rising(_Job(j, [], proxy=[scale * v for v in _noisy(rng, 0.05)]))
        assert d.proxy_noise.sigma == pytest.approx(0.05 * scale, rel=0.2)
        # the threshold is 3 x 0.05 x sqrt(2) = 0.21 (x scale) over two evals
        assert d.proxy_rising(_Job(100, [], proxy=[scale * v for v in (0.1, 0.2, 0.3, 0.45)]))      # +0.25
        assert not d.proxy_rising(_Job(101, [], proxy=[scale * v for v in (0.1, 0.2, 0.3, 0.35)]))  # +0.15


def _pure_noise(scale, jobs=40, evals=10, seed=4):
    """DPO jobs (no proxy) whose true score is flat at 0.5, observed with noise ``scale``; same draws per scale."""
    z = np.random.default_rng(seed).standard_normal((jobs, evals))
    rows = [dict(submit_h=0.0, gpus=1, length_h=float(evals), job_type="dpo", gold=[0.5] * evals,
                 observed=list(0.5 + scale * z[i])) for i in range(jobs)]
    return workload_from_jobs(rows, total_gpus=jobs, evals_per_job=evals)


@pytest.mark.parametrize("stopper", ESTIMATING)
def test_on_pure_noise_the_stops_do_not_depend_on_the_noise_scale(stopper):
    stops = {}
    # the floors in score units (patience's min_delta, the drop tests' min_drop) are scale-dependent by
    # design, so they are off here: the rest of each test must not depend on the noise's scale
    floors = {"patience": {"min_delta": 0.0}, "droptest": {"min_drop": 0.0},
              "divergence": {"min_drop": 0.0, "fast_min_drop": 0.0}}.get(stopper, {})
    for scale in (0.01, 0.1):
        out = drive(Simulator(_pure_noise(scale)), make_policy("fifo", stopper, **floors))
        stops[scale] = [int(e) if s else None for e, s in zip(out.evals_seen, out.stopped)]
    # every test is in units of the estimated noise: ten times the noise, the same stops at the same evals
    # (patience carries no scale at all with min_delta 0)
    assert stops[0.01] == stops[0.1]


def _reference_rate(z, sigma, stops_at):
    """Share of flat noisy runs (rows of ``sigma * z``) that ``stops_at(scores so far)`` stops at some eval
    2 .. E-1 (eval E is the completion), knowing the true sigma."""
    return np.mean([any(stops_at(list(row[:m])) for m in range(2, len(row))) for row in sigma * z])


def _droptest_knowing(sigma, window, k_z, min_drop):
    def stops_at(s):
        if len(s) <= window:
            return False
        drop = max(s[:-window]) - np.mean(s[-window:])
        return drop >= min_drop and drop > k_z * sigma * math.sqrt(1 + 1 / window)
    return stops_at


def _cusum_knowing(sigma, threshold):
    def stops_at(s):
        total = 0.0
        for prev, cur in zip(s, s[1:]):
            total = max(0.0, total - (cur - prev))
        return total > threshold * math.sqrt(2) * sigma
    return stops_at


@pytest.mark.parametrize("stopper", ["droptest", "cusum"])
def test_on_pure_noise_a_detector_stops_as_often_as_the_same_test_knowing_the_true_noise(stopper):
    z = np.random.default_rng(4).standard_normal((40, 10))
    policy = make_policy("fifo", stopper)
    if stopper == "droptest":
        want = _reference_rate(z, 0.1, _droptest_knowing(0.1, policy.window, policy.z, policy.min_drop))
    else:
        want = _reference_rate(z, 0.1, _cusum_knowing(0.1, policy.threshold))
    out = drive(Simulator(_pure_noise(0.1)), policy)
    # the stated bound: the rate of the test knowing sigma, plus 0.1 for the estimate (a median of a few
    # hundred second differences, which the first jobs see before it exists)
    assert out.stopped.mean() <= want + 0.1


def test_every_detector_stops_a_clear_decline_among_noisy_runs():
    rng = np.random.default_rng(5)
    x = np.arange(1, 11) / 10
    rows = [dict(submit_h=0.0, gpus=1, length_h=10.0, job_type="dpo", gold=list(0.2 + 0.5 * x),
                 observed=list(0.2 + 0.5 * x + 0.02 * rng.standard_normal(10))) for _ in range(30)]
    peak = [0.2, 0.4, 0.6, 0.7, 0.6, 0.45, 0.3, 0.2, 0.15, 0.1]      # a fall of 0.6 from eval 4
    rows.append(dict(submit_h=5.0, gpus=1, length_h=10.0, job_type="dpo", hacking=True, gold=peak, observed=peak))
    w = workload_from_jobs(rows, total_gpus=31)
    for stopper in ESTIMATING:
        out = drive(Simulator(w), make_policy("fifo", stopper))
        assert out.stopped[-1] and 5 <= out.evals_seen[-1] <= 7, stopper


def _healthy_worlds(factor, seeds=range(3)):
    """Realistic worlds with no exploitable proxy, where each job's eval sd is ``factor`` x its sampling error."""
    cfg = WorkloadConfig(calibration="realistic", jobs=120, hacking_fraction=0.0).replace(
        **{"curves.dpo_exploitable": 0.0, "world.seed_noise_factor": (factor, factor)})
    return [generate(cfg.replace(seed=s)) for s in seeds]


def _knowing_the_noise(stopper, w):
    """``stopper`` (default parameters) told each job's true noise: its mean eval sd and the plateau drift's step."""
    true_sd = np.sqrt(w.eval_sd.mean(axis=1) ** 2 + WorkloadConfig(calibration="realistic").curves.drift ** 2)

    class Knowing(STOPPERS[stopper]):
        def job_sigma(self, job):
            return float(true_sd[job.job_id])

    return Knowing(make_policy("srtf-est"))


def _fpr(worlds, policy_of):
    return np.mean([run_policy(w, policy_of(w))["fpr"] for w in worlds])


@pytest.mark.parametrize("stopper", ESTIMATING[1:])
def test_false_stops_track_the_same_test_knowing_the_noise_when_the_seed_noise_doubles(stopper):
    # the reference knows what the detector estimates; more noise moves both (a healthy run's rise and dips do
    # not grow with it), an estimate that follows the noise stays close to the reference in both worlds
    for factor in (1.5, 3.0):
        worlds = _healthy_worlds(factor)
        estimated = _fpr(worlds, lambda w: make_policy("srtf-est", stopper))
        assert estimated <= _fpr(worlds, lambda w: _knowing_the_noise(stopper, w)) + 0.05, factor


def test_a_droptest_that_kept_the_noise_of_another_world_does_not():
    # what a constant copied from one world amounts to: the noise right at factor 1.5, used at factor 3
    calibrated, noisier = _healthy_worlds(1.5), _healthy_worlds(3.0)       # the same jobs, seed by seed
    copied = np.mean([run_policy(w, _knowing_the_noise("droptest", c))["fpr"] for c, w in zip(calibrated, noisier)])
    assert copied > _fpr(noisier, lambda w: _knowing_the_noise("droptest", w)) + 0.05


def _selection_script():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "docs" / "select_detectors.py"
    spec = importlib.util.spec_from_file_location("select_detectors", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_selection_rules_by_hand():
    sel = _selection_script()
    rows = [({"a": 1}, {"f1": 0.95, "waste_cut": 0.40, "precision": 0.99, "recall": 0.90}),
            ({"a": 2}, {"f1": 0.85, "waste_cut": 0.61, "precision": 0.80, "recall": 0.97}),
            ({"a": 3}, {"f1": 0.85, "waste_cut": 0.65, "precision": 0.96, "recall": 0.93}),
            ({"a": 4}, {"f1": 0.80, "waste_cut": 0.70, "precision": 0.70, "recall": 0.99})]
    # the best F1 above the floor 0.60: a=2 and a=3 tie at 0.85, the higher waste cut wins
    assert sel.select(rows, 0.60)[0] == {"a": 3}
    assert sel.select(rows, 0.75)[0] == {"a": 4}                  # nothing reaches the floor: the largest cut
    assert sel.select_precise(rows)[0] == {"a": 3}                # the best recall with precision >= 0.95
    assert sel.select_precise(rows, precision=0.999)[0] == {"a": 1}   # none has it: the best precision
    # the same budget for every detector: a grid of 4 x 8 fits it, a larger one is sampled, the same each time
    assert len(sel.candidates({"x": range(4), "y": range(8)})) == 32
    big = {"x": range(10), "y": range(10)}
    assert len(sel.candidates(big)) == sel.BUDGET and sel.candidates(big) == sel.candidates(big)
    with pytest.raises(ConfigError, match="validation"):
        sel.main(["--first-seed", "0", "--seeds", "2"])           # test seeds are refused
