"""The cliff and the plateau: regimes chosen by each run's latent causes (KL penalty, proxy quality, learning
rate), the knobs that make them (KL ceiling, gold floor and lag, DPO's own penalty and drift), their checks, and
the fit's pieces that find them in a log."""

import dataclasses
import math

import numpy as np
import pytest

from evalstop_gym import fit
from evalstop_gym.config import CALIBRATIONS, JOB_TYPES, ConfigError, LatentModel, WorkloadConfig
from evalstop_gym.latent import lagged, latent_curves
from evalstop_gym.worldfile import calibration_fields

RLHF, DPO = JOB_TYPES.index("rlhf"), JOB_TYPES.index("dpo")

# every RLHF run's proxy exploitable (d* 0.6-0.7), d reaching 4 x 0.6^0.5 ~ 3 at mid-run without a penalty,
# the ceiling 3-3.5, the floor 0.1-0.15; a penalty of 0.2-0.3 holds d at 0.33-0.5, short of d*
CLIFF = LatentModel(base=(0.5, 0.5), lr=(1.0, 1.0), kl_scale=4.0, kl_exponent=(0.5, 0.5), penalty_share=0.5,
                    kl_coef=(0.2, 0.3), kl_ceiling=(3.0, 3.5), d_star_exploitable=(0.6, 0.7),
                    peak_gain_exploitable=(0.3, 0.3), gold_floor=(0.1, 0.15), proxy_slope=(0.5, 0.5), proxy_noise=0.0)


def test_the_regime_follows_the_kl_penalty_not_a_coin():
    curves, hacking, kl = latent_curves(np.random.default_rng(3), CLIFF, 15, np.full(400, RLHF), 1.0)
    free = curves.setup["kl_coef"] == 0
    assert 100 < free.sum() < 300
    gold = curves.gold
    # cliff: without a penalty gold peaks early, falls to its floor and stays there while the proxy holds at
    # its top (d at the ceiling); every such run is labelled hacking
    assert np.all(np.argmax(gold[free], axis=1) <= 2)
    assert np.all((gold[free, -4:] >= 0.1 - 1e-12) & (gold[free, -4:] <= 0.15 + 1e-12))
    assert np.all(np.ptp(gold[free, -4:], axis=1) == 0) and np.all(np.sqrt(kl[free, -1]) <= 3.5 + 1e-9)
    assert np.all(curves.proxy[free, -1] == curves.proxy[free].max(axis=1)) and hacking[free].all()
    # plateau: under the penalty d stays below d*, gold climbs and levels off, nothing is labelled
    assert np.all(np.diff(gold[~free], axis=1) >= -1e-12) and not hacking[~free].any()
    assert np.all(gold[~free, -1] - gold[~free, -2] < 0.01)


def test_a_robust_proxy_or_a_slow_learning_rate_keeps_the_unpenalised_run_off_the_cliff():
    jt = np.full(200, RLHF)
    robust, hack_r, _ = latent_curves(np.random.default_rng(3), CLIFF, 15, jt, 0.0)   # no proxy exploitable
    assert not hack_r.any() and np.all(robust.gold[:, -1] > 0.5)
    slow = dataclasses.replace(CLIFF, lr=(0.01, 0.01))   # d reaches 0.04 at the end, far short of d*
    curves, hacking, _ = latent_curves(np.random.default_rng(3), slow, 15, jt, 1.0)
    assert not hacking.any() and np.all(np.argmax(curves.gold, axis=1) == 14)


def test_dpo_has_its_own_penalty_share_coefficient_and_drift():
    model = dataclasses.replace(CLIFF, penalty_share=0.0, dpo_penalty_share=1.0, dpo_kl_coef=(0.5, 0.6),
                                drift=0.001, dpo_drift=0.02)
    jt = np.r_[np.full(300, RLHF), np.full(300, DPO)]
    curves, _, kl = latent_curves(np.random.default_rng(4), model, 15, jt, 1.0)
    kappa = curves.setup["kl_coef"]
    assert np.all(kappa[:300] == 0) and np.all((kappa[300:] >= 0.5) & (kappa[300:] <= 0.6))
    assert np.all(np.sqrt(kl[300:, -1]) <= 0.1 / 0.5 + 1e-12)   # d held at kl_saturation / beta
    # the plateau's wander: DPO's step sd 20 times the RL runs' (the floor and ceiling flat parts of the cliffs
    # hold only the walk too)
    step = lambda rows: np.std(np.diff(curves.gold[rows, -5:], axis=1))   # noqa: E731
    assert step(slice(300, 600)) / step(slice(0, 300)) == pytest.approx(20, rel=0.2)


def test_the_proxy_exponent_bends_the_proxy_in_d():
    flat = dataclasses.replace(CLIFF, proxy_exponent=(0.5, 0.5), penalty_share=0.0)
    jt = np.full(50, RLHF)
    a, _, kl = latent_curves(np.random.default_rng(2), flat, 15, jt, 1.0)
    np.testing.assert_allclose(a.proxy, 0.5 * np.sqrt(np.sqrt(kl)))   # slope 0.5 x d ** 0.5, no noise


def test_drift_reversion_by_hand():
    from evalstop_gym.latent import drift_walk

    walk = drift_walk(np.random.default_rng(0), 3, 4, 1.0, 0.0)            # a random walk: the steps summed
    steps = np.diff(np.c_[np.zeros(3), walk], axis=1)
    half = drift_walk(np.random.default_rng(0), 3, 4, 1.0, 0.0, reversion=0.5)
    want = np.zeros((3, 4))
    for i in range(4):   # w_i = 0.5 w_{i-1} + step_i
        want[:, i] = (0.5 * want[:, i - 1] if i else 0.0) + steps[:, i]
    np.testing.assert_allclose(half, want)
    np.testing.assert_allclose(drift_walk(np.random.default_rng(0), 3, 4, 1.0, 0.0, reversion=1.0), steps)


def test_gold_lag_by_hand():
    x = np.array([0.5, 1.0])
    got = lagged(x, np.array([[1.0, 1.0], [1.0, 1.0]]), np.array([0.5, 0.0]))
    e = math.exp(-1.0)   # each step is 0.5 of progress, tau 0.5
    np.testing.assert_allclose(got, [[1 - e, e * (1 - e) + (1 - e)], [1.0, 1.0]])


def test_a_held_run_lags_by_its_own_range_and_no_other_run_moves():
    # the same world with and without the held runs' own lag: every run a penalty holds (DPO aside) follows its
    # gold with the held range's lag (here none), every other run is unchanged draw for draw
    model = dataclasses.replace(CLIFF, gold_lag=(0.3, 0.3), dpo_drift=0.0, drift=0.0)
    jt = np.concatenate([np.full(300, RLHF), np.full(100, DPO)])
    base, _, _ = latent_curves(np.random.default_rng(5), model, 12, jt, 1.0)
    held, _, _ = latent_curves(np.random.default_rng(5), dataclasses.replace(model, held_gold_lag=(0.0, 0.0)), 12,
                               jt, 1.0)
    nolag, _, _ = latent_curves(np.random.default_rng(5), dataclasses.replace(model, gold_lag=(0.0, 0.0)), 12, jt, 1.0)
    pen = (base.setup["kl_coef"] > 0) & (jt == RLHF)
    assert 50 < pen.sum() < 250 and ((base.setup["kl_coef"] > 0) & (jt == DPO)).any()
    np.testing.assert_array_equal(held.gold[~pen], base.gold[~pen])
    np.testing.assert_array_equal(held.gold[pen], nolag.gold[pen])
    assert np.abs(held.gold[pen] - base.gold[pen]).max() > 0.01   # the lag mattered to the held runs
    with pytest.raises(ConfigError, match="curves.held_gold_lag.*needs curves.gold_lag"):
        WorkloadConfig(curves=dataclasses.replace(CLIFF, held_gold_lag=(0.0, 0.1)))


def test_every_knob_off_by_default_keeps_the_named_worlds():
    for name in ("paper", "realistic"):
        c = CALIBRATIONS[name].curves
        assert (c.kl_ceiling, c.gold_floor, c.gold_lag, c.held_gold_lag, c.dpo_drift, c.dpo_penalty_share,
                c.dpo_kl_coef, c.proxy_exponent) == (None,) * 8


@pytest.mark.parametrize("field,value", [("kl_ceiling", (4.0, 3.0)), ("kl_ceiling", (0.0, 3.0)),
                                         ("gold_floor", (0.1, 1.5)), ("gold_lag", (-0.1, 0.2)),
                                         ("held_gold_lag", (0.2, 0.1)),
                                         ("dpo_penalty_share", 1.5), ("dpo_drift", -0.1), ("dpo_kl_coef", (0.0, 1.0)),
                                         ("proxy_exponent", (0.0, 1.0)), ("drift_reversion", 1.5)])
def test_bad_regime_values_name_the_field(field, value):
    with pytest.raises(ConfigError, match=f"curves.{field}"):
        WorkloadConfig(curves=LatentModel(**{field: value}))


def test_a_world_file_refuses_a_bad_regime_value_by_name():
    data = {"description": "x", "noise": 0.0, "curves": {"gold_lag": [0.1]}, "world": {}}
    with pytest.raises(ConfigError, match="curves.gold_lag"):
        calibration_fields(data, LatentModel, type(CALIBRATIONS["paper"].world))
    data["curves"] = {"kl_ceiling": None, "dpo_drift": 0.05}
    assert calibration_fields(data, LatentModel, type(CALIBRATIONS["paper"].world))["curves"].dpo_drift == 0.05


def _fit(d_sat=math.inf, d_max=1.0, floor=math.nan):
    return dataclasses.replace(FAKE, d_sat=d_sat, d_max=d_max, floor=floor)


FAKE = fit.RunFit("x", "rlhf", 10, 0.5, 1.0, 1.0, math.inf, 1.0, 0.2, 0.0, math.nan, 0.01, True, 1.0, (1.0, 1.0),
                  np.zeros(3), math.nan, math.nan, np.empty(0), None, np.empty(0), np.empty(0), np.empty(0), 0)


def test_kl_regimes_by_hand():
    # KL levelled off at 1.0, 1.1, 1.2 with gold above any floor: penalised; gold at a floor, its KL levelled
    # off at 4.4 or still growing at 4.0: collapsed (ceilings 4.4 and 4.0); gold above any floor and still
    # growing: to 4.5 (past the lowest ceiling, 4.0: unpenalised) or to 1.5 (a penalty that has not bitten yet)
    fits = [_fit(d_sat=v) for v in (1.0, 1.1, 1.2)] + [_fit(d_sat=4.4, floor=0.1), _fit(d_max=4.0, floor=0.1)] + [
        _fit(d_max=4.5), _fit(d_max=1.5)]
    pen, col = fit.kl_regimes(fits)
    assert pen.tolist() == [True, True, True, False, False, False, True]
    assert col.tolist() == [False, False, False, True, True, False, False]
    # fewer than 2 collapsed runs: every levelled-off run penalised, the growing ones not
    pen, col = fit.kl_regimes([_fit(d_sat=v) for v in (1.0, 1.1, 4.0)] + [_fit(d_sat=4.4, floor=0.1), _fit(d_max=3.0)])
    assert pen.tolist() == [True] * 4 + [False] and not col.any()


def test_floor_points_by_hand():
    gold = np.array([0.6, 0.8, 0.5, 0.2, 0.12, 0.1, 0.13])
    floor, floored = fit.floor_points(gold)
    # lowest after the peak 0.1; within 0.05 of it: the last 3 (0.12, 0.1, 0.13); the first of them may be on
    # its way down, the other two are held at the floor
    assert floor == pytest.approx(0.12) and floored.tolist() == [False] * 5 + [True, True]
    assert math.isnan(fit.floor_points(np.array([0.6, 0.8, 0.7, 0.72, 0.71]))[0])   # fell 0.1 < 0.2: no floor
    assert math.isnan(fit.floor_points(np.array([0.3, 0.8, 0.5, 0.45, 0.46, 0.47]))[0])   # held above its start
    assert math.isnan(fit.floor_points(np.array([0.6, 0.8, 0.3, 0.0, 0.0, 0.0]))[0])      # clipped at 0
