"""The latent curve model: Gao's law in sqrt(KL), KL paths, labels that emerge from gold, binomial evals."""

import dataclasses

import numpy as np
import pytest

from evalstop_gym.config import CALIBRATIONS, ConfigError, LatentModel, WorkloadConfig
from evalstop_gym.latent import drift_walk, gold_of_d, kl_path, latent_curves
from evalstop_gym.workload import generate
from label_reference import reference_label


def test_gold_is_gaos_rl_form_with_its_peak_at_d_star():
    # hand reference: R(d) = d (alpha - beta ln d), beta = A / d*, alpha = beta (1 + ln d*)
    d = np.linspace(0.01, 5.0, 2000)[None, :]
    a, d_star, base = 0.4, 1.3, 0.1
    beta = a / d_star
    alpha = beta * (1 + np.log(d_star))
    ref = base + d * (alpha - beta * np.log(d))
    got = gold_of_d(d, np.array([base]), np.array([a]), np.array([d_star]))
    np.testing.assert_allclose(got, ref, atol=1e-12)
    assert d[0, np.argmax(got)] == pytest.approx(d_star, abs=5e-3)          # peak at d*
    assert got.max() == pytest.approx(base + a, abs=1e-6)                  # its height is the gain
    assert np.exp(alpha / beta - 1) == pytest.approx(d_star)               # Gao's d* = exp(alpha/beta - 1)


def test_kl_is_quadratic_in_steps_without_a_penalty_and_saturates_under_one():
    x = np.array([0.25, 0.5, 1.0])
    free = kl_path(x, np.array([2.0]), np.array([1.0]), np.array([np.inf]))[0]
    np.testing.assert_allclose(free ** 2, [0.25, 1.0, 4.0])                # KL = (2 x)^2
    sat = kl_path(np.linspace(0.01, 1, 50), np.array([2.0]), np.array([1.0]), np.array([0.5]))[0]
    assert np.all(np.diff(sat) > 0) and sat[-1] < 0.5                      # rises towards d_sat, never past it
    assert sat[-1] == pytest.approx(0.5 * (1 - np.exp(-4.0)))              # d_sat (1 - exp(-g x / d_sat))


def test_proxy_rises_with_d_for_every_rlhf_run_hacking_or_not():
    model = dataclasses.replace(CALIBRATIONS["realistic"].curves, proxy_noise=0.0)
    job_type = np.full(400, 2)
    curves, hacking, kl = latent_curves(np.random.default_rng(5), model, 10, job_type, 0.6)
    assert 0 < hacking.sum() < 400
    assert np.all(np.diff(curves.proxy, axis=1) > 0) and np.all(np.diff(kl, axis=1) > 0)
    slope = curves.proxy / np.sqrt(kl)      # linear in d: one slope per run
    np.testing.assert_allclose(slope, slope[:, :1] * np.ones((1, 10)), rtol=1e-9)
    assert np.all(curves.loss[:, -1] < curves.loss[:, 0])                  # the loss falls, hacking or not


@pytest.mark.parametrize("calibration", ["paper", "realistic", "grounded"])
def test_labels_emerge_from_gold_and_proxy_alone(calibration):
    w = generate(WorkloadConfig(calibration=calibration, seed=11, jobs=300))
    # a world's proxy before training is unknown, as in a trainer's log (evalstop_gym.label)
    ref = np.array([reference_label(np.r_[w.curves.start[j], w.curves.gold[j]], np.r_[np.nan, w.curves.proxy[j]])
                    for j in range(w.n)])
    assert 0 < ref.sum() < w.n
    np.testing.assert_array_equal(w.hacking, ref)
    assert not w.hacking[w.job_type == 0].any()                            # LoRA: no proxy, never hacking
    assert np.all(np.isinf(w.curves.peak_progress[~w.hacking]))
    assert np.all(w.curves.peak_progress[w.hacking] < 1.0)


def test_paper_world_hacking_share_follows_the_knob():
    # by construction every exploitable proxy's d reaches 1.8-3.5 d*, past the label rule's threshold
    # (Gao's u (1 - ln u) <= 0.75 from u = 1.8), and no robust one reaches d*: the share is the knob's
    for h in (0.2, 0.8):
        hs = [generate(WorkloadConfig(seed=s, hacking_fraction=h)) for s in range(900, 905)]
        rlhf = np.concatenate([w.hacking[w.job_type == 2] for w in hs])
        assert abs(rlhf.mean() - h) < 0.05
        assert not any(w.hacking[w.job_type != 2].any() for w in hs)       # only RLHF runs hack here


def test_same_seed_same_bytes_other_seed_other_curves():
    for cal in CALIBRATIONS:
        a, b = (generate(WorkloadConfig(calibration=cal, seed=4)) for _ in range(2))
        assert a.observed.tobytes() == b.observed.tobytes() and a.hacking.tobytes() == b.hacking.tobytes()
        c = generate(WorkloadConfig(calibration=cal, seed=5))
        assert not np.array_equal(a.curves.gold[:5], c.curves.gold[:5])


def test_binomial_evals_are_counts_of_items():
    cfg = WorkloadConfig(calibration="realistic", seed=2, jobs=100,
                         world=dataclasses.replace(CALIBRATIONS["realistic"].world, seed_noise_factor=(1.0, 1.0)))
    w = generate(cfg)
    inside = (w.curves.gold > 0) & (w.curves.gold < 1)
    counts = np.clip(w.observed, 0, 1) * w.eval_items[:, None]
    np.testing.assert_allclose(counts[inside], np.round(counts[inside]), atol=1e-6)   # k / n, not Gaussian
    err = (w.observed - w.curves.gold)[inside]
    sd = np.sqrt(w.curves.gold * (1 - w.curves.gold) / w.eval_items[:, None])[inside]
    assert 0.85 < np.std(err / sd) < 1.15


def test_drift_steps_have_the_stated_autocorrelation():
    walk = drift_walk(np.random.default_rng(0), 4000, 20, 0.01, 0.5)
    steps = np.diff(np.concatenate([np.zeros((4000, 1)), walk], axis=1), axis=1)
    r = np.corrcoef(steps[:, 1:].ravel(), steps[:, :-1].ravel())[0, 1]
    assert r == pytest.approx(0.5, abs=0.05)
    assert np.std(steps) == pytest.approx(0.01, rel=0.05)


def test_bad_latent_values_name_the_field():
    with pytest.raises(ConfigError, match="curves.lr"):
        WorkloadConfig(curves=LatentModel(lr=(0.0, 1.0)))
    with pytest.raises(ConfigError, match="curves.penalty_share"):
        WorkloadConfig(curves=LatentModel(penalty_share=1.5))
    with pytest.raises(ConfigError, match="curves.drift_autocorr"):
        WorkloadConfig(curves=LatentModel(drift_autocorr=1.0))


def test_vectorised_label_rule_agrees_with_the_curve_log_reader():
    # the world calls overoptimised on every row at once; a logged run goes through label_gold's resampling
    from evalstop_gym.curvelog import LoggedRun, label_gold
    from evalstop_gym.label import overoptimised

    rng = np.random.default_rng(3)
    gold = rng.uniform(0, 0.3, (300, 1)) + np.cumsum(rng.normal(0.02, 0.05, (300, 11)), axis=1)
    # half the runs walk (the rule labels few of them: their falls are wander), half fall by 0.1 a checkpoint
    # after checkpoint 5, a trend ten times their walk's drift, which the rule labels where the proxy rises
    gold[150:] -= 0.1 * np.maximum(np.arange(11) - 5, 0)
    gold = np.clip(gold, 0, 1)
    proxy = np.cumsum(rng.normal(0.03, 0.03, (300, 11)), axis=1)
    proxy[:40] = np.nan                                                      # runs that log no proxy
    steps = np.arange(11.0)
    ref = [label_gold(LoggedRun(str(j), steps, gold[j], np.full(11, np.nan), proxy[j], {"gold": gold[j]}),
                      10).hacking for j in range(300)]
    assert 20 < sum(ref) < 280 and not any(ref[:40])
    np.testing.assert_array_equal(overoptimised(gold, proxy)[0], ref)


@pytest.mark.parametrize("calibration", ["realistic", "grounded"])
def test_a_world_s_runs_logged_as_a_trainer_would_keep_their_labels(calibration):
    # one rule, one answer: a world's runs written out as logs (no proxy at step 0, as a trainer writes
    # them) and labelled by the curve-log reader get the world's own labels, every one of them
    from evalstop_gym.config import JOB_TYPES
    from evalstop_gym.curvelog import label_gold
    from evalstop_gym.fit import sample_runs

    cal = CALIBRATIONS[calibration]
    runs = list(sample_runs(cal, {"rlhf": 300, "dpo": 300}, 10, seed=0).values())
    job_type = np.repeat([JOB_TYPES.index("rlhf"), JOB_TYPES.index("dpo")], 300)
    curves, hacking, _ = latent_curves(np.random.default_rng([0, 3]), cal.curves, 10, job_type, 0.6)
    np.testing.assert_array_equal([r.extra["gold"][1:] for r in runs], curves.gold)     # the same draw
    assert all(np.isnan(r.proxy_reward[0]) for r in runs)
    logged = np.array([label_gold(r, 10).hacking for r in runs])
    assert 0 < hacking.sum() < hacking.size
    np.testing.assert_array_equal(logged, hacking)


def test_hack_peak_places_an_unpenalised_exploitable_run_s_peak():
    model = LatentModel(hack_peak=(0.3, 0.3), kl_exponent=(1.0, 1.0))
    curves, hacking, _ = latent_curves(np.random.default_rng(1), model, 10, np.full(200, 2), 1.0)
    assert hacking.all()
    np.testing.assert_allclose(curves.peak_progress, 0.3)     # gold peaks where d reaches d*
    with pytest.raises(ConfigError, match="curves.hack_peak"):
        WorkloadConfig(curves=LatentModel(hack_peak=(0.5, 1.5)))
