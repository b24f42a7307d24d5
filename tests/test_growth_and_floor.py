"""The knobs that shape grounded's runs like its varied library's KL climb and quiet floors: a KL-growth exponent
drawn with the learning rate (kl_growth_loading), the drift a collapsed run keeps at its floor (collapse_drift), a
DPO run that never collapses; their checks; and the fit's pieces that find them in a log."""

import dataclasses
import math

import numpy as np
import pytest

from evalstop_gym import fit
from evalstop_gym.config import CALIBRATIONS, JOB_TYPES, ConfigError, LatentModel, WorkloadConfig
from evalstop_gym.curvelog import LoggedRun
from evalstop_gym.latent import latent_curves
from evalstop_gym.worldfile import calibration_fields

RLHF, DPO = JOB_TYPES.index("rlhf"), JOB_TYPES.index("dpo")

# no penalty, no ceiling: d = kl_scale lr x**p exactly, so p = ln(d_j / d_i) / ln(x_j / x_i) from any two checkpoints
FREE = LatentModel(lr=(0.5, 2.0), kl_scale=2.0, kl_exponent=(0.3, 1.5), proxy_noise=0.0)
# every run unpenalised with an exploitable proxy, d = 4 sqrt(x) meeting the ceiling 3-3.5 at x = 0.56-0.77,
# d* 0.6-0.7, floor 0.1-0.15, collapsing there; the drift the steps themselves (reversion 1, autocorrelation 0)
CLIFF = LatentModel(base=(0.5, 0.5), lr=(1.0, 1.0), kl_scale=4.0, kl_exponent=(0.5, 0.5), kl_ceiling=(3.0, 3.5),
                    d_star_exploitable=(0.6, 0.7), peak_gain_exploitable=(0.3, 0.3), gold_floor=(0.1, 0.15),
                    collapse_share=1.0, drift=0.01, drift_reversion=1.0, proxy_slope=(0.5, 0.5), proxy_noise=0.0)


def curves_of(model, n=2000, evals=10, seed=5, job_type=RLHF):
    return latent_curves(np.random.default_rng(seed), model, evals, np.full(n, job_type), 1.0)


def exponents(kl, evals):
    # progress of checkpoints 1 and E is 1 / E and 1 (evalstop_gym.curves.progress_grid)
    d = np.sqrt(kl)
    return np.log(d[:, -1] / d[:, 0]) / math.log(evals)


def ranks_corr(a, b):
    # Spearman's rho from its textbook formula, 1 - 6 sum(d^2) / (n (n^2 - 1)), for values without ties
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    n = len(a)
    return 1.0 - 6.0 * float(np.sum((ra - rb) ** 2)) / (n * (n * n - 1))


def test_the_kl_growth_exponent_follows_the_learning_rate_by_its_loading():
    off, _, kl_off = curves_of(FREE)
    p_off = exponents(kl_off, 10)
    assert np.allclose(p_off.min(), 0.3, atol=0.01) and np.allclose(p_off.max(), 1.5, atol=0.01)
    for loading in (1.0, 0.6, -0.6):
        on, _, kl = curves_of(dataclasses.replace(FREE, kl_growth_loading=loading))
        lr, p = on.setup["learning_rate"], exponents(kl, 10)
        assert np.array_equal(lr, off.setup["learning_rate"])            # the same learning rates, draw for draw
        assert p.min() >= 0.3 - 1e-9 and p.max() <= 1.5 + 1e-9           # p still uniform over its range
        # Spearman's rho of lr and p is the loading: 2000 runs put its sd near 1 / sqrt(2000) = 0.022
        assert ranks_corr(lr, p) == pytest.approx(loading, abs=0.07)
    assert abs(ranks_corr(off.setup["learning_rate"], p_off)) < 0.07     # off: independent


def test_a_collapsed_run_keeps_its_share_of_the_drift_at_its_floor():
    def at_floor(model):
        curves, _, kl = curves_of(model, n=1000, evals=20)
        d = np.sqrt(kl)
        held = np.isclose(d, d[:, -1:])                        # the checkpoints at the ceiling: x >= 0.77 at the latest
        return np.where(held, curves.gold, np.nan)

    still = at_floor(dataclasses.replace(CLIFF, collapse_drift=0.0))
    assert np.all(np.nanmax(still, axis=1) == np.nanmin(still, axis=1))   # no drift: the floor itself
    assert np.nanmin(still) >= 0.1 and np.nanmax(still) <= 0.15
    # every checkpoint at the floor is the floor plus drift x N(0, 1) x the kept share (reversion 1: the walk is
    # its steps); about 1000 x 5 deviations from each run's own mean, so the pooled sd is within a few percent
    for share in (0.25, None):
        gold = at_floor(dataclasses.replace(CLIFF, collapse_drift=share))
        dev = gold - np.nanmean(gold, axis=1, keepdims=True)
        m = np.sum(np.isfinite(gold), axis=1, keepdims=True)
        sd = math.sqrt(float(np.nansum(dev ** 2 * m / np.maximum(m - 1, 1))) / float(np.sum(np.isfinite(gold))))
        assert sd == pytest.approx(0.01 * (1.0 if share is None else share), rel=0.06)


def test_collapse_drift_without_a_collapse_leaves_every_run_as_it_was():
    # a model built in code skips validate(): collapse_drift with no collapse_share has no collapsed run to act on
    plain = dataclasses.replace(CLIFF, collapse_share=None, collapse_drift=None)
    curves, hacking, _ = curves_of(plain, n=200, evals=12)
    again, hacking2, _ = curves_of(dataclasses.replace(plain, collapse_drift=0.25), n=200, evals=12)
    assert np.array_equal(curves.gold, again.gold) and np.array_equal(hacking, hacking2)


def test_a_dpo_run_never_collapses():
    # a gain of 0.02: at the ceiling Gao's form keeps gold at 0.4109-0.4610 (tests/test_task_latent.py), far above
    # the floor a collapsed RL run falls to
    small = dataclasses.replace(CLIFF, peak_gain_exploitable=(0.02, 0.02), drift=0.0, dpo_exploitable=1.0)
    rl, _, _ = curves_of(small, n=200)
    dpo, _, _ = curves_of(small, n=200, job_type=DPO)
    assert np.all(rl.gold[:, -1] <= 0.15)
    assert np.all((dpo.gold[:, -1] >= 0.4109) & (dpo.gold[:, -1] <= 0.4610))


@pytest.mark.parametrize("kw,field", [({"kl_growth_loading": 1.5}, "kl_growth_loading"),
                                      ({"kl_growth_loading": -1.2}, "kl_growth_loading"),
                                      ({"collapse_drift": 1.2}, "collapse_drift"),
                                      ({"collapse_drift": -0.1}, "collapse_drift"),
                                      ({"collapse_drift": 0.5, "collapse_share": None}, "collapse_drift")])
def test_bad_knob_values_name_the_field(kw, field):
    with pytest.raises(ConfigError, match=f"curves.{field}"):
        WorkloadConfig(curves=dataclasses.replace(CLIFF, **kw))


def test_a_world_file_reads_the_knobs_and_the_hand_set_worlds_leave_them_off():
    data = {"description": "x", "noise": 0.0, "world": {},
            "curves": {"kl_ceiling": [3.0, 3.5], "gold_floor": [0.1, 0.15], "collapse_share": 0.9,
                       "kl_growth_loading": -0.4, "collapse_drift": 0.2}}
    c = calibration_fields(data, LatentModel, type(CALIBRATIONS["paper"].world))["curves"]
    assert (c.kl_growth_loading, c.collapse_drift) == (-0.4, 0.2)
    for name in ("paper", "realistic"):
        assert (CALIBRATIONS[name].curves.kl_growth_loading, CALIBRATIONS[name].curves.collapse_drift) == (None, None)


def logged(d, gold):
    """A logged run at checkpoints 0..E (step 10 each) with sqrt-KL ``d`` and ``gold`` (index 0 the start)."""
    n = len(d)
    nan = np.full(n, np.nan)
    return LoggedRun("trl-grpo-x", np.arange(n) * 10.0, np.asarray(gold, float), nan, nan,
                     {"gold": np.asarray(gold, float), "kl": np.asarray(d, float) ** 2})


def test_a_run_s_rise_is_its_growth_before_its_ceiling():
    # d = 8 x up to the ceiling 3 (x = 0.375), then held: the free form over every point bends to fit the ceiling,
    # the rise (the points below 90% of where d levels off) is the line itself, g = 8, p = 1
    x = np.arange(21) / 20
    d = np.minimum(8.0 * x, 3.0)
    gold = 0.5 + 0.02 * np.sin(np.arange(21))
    f = fit.fit_run(logged(d, gold))
    assert f.rise == pytest.approx((8.0, 1.0), rel=1e-6)
    assert f.growth[1] < 0.9                                  # the whole run's free form: a flatter bend
    # too few points below the ceiling: none
    assert fit.fit_run(logged(np.minimum(80.0 * x, 3.0), gold)).rise is None


FAKE = fit.RunFit("x", "rlhf", 10, 0.5, 1.0, 1.0, math.inf, 1.0, 0.2, 0.0, math.nan, 0.01, True, 1.0, (1.0, 1.0),
                  np.zeros(3), math.nan, math.nan, np.empty(0), None, np.empty(0), np.empty(0), np.empty(0), 0)


def test_the_fit_s_pieces_by_hand():
    # log g ranks 0 1 2 3 4, p ranks 0 2 1 3 4: 1 - 6 x 2 / (5 x 24) = 0.9; under 5 pairs, none
    pairs = [(1.0, 0.3), (2.0, 0.5), (4.0, 0.4), (8.0, 0.9), (16.0, 1.0)]
    assert fit.growth_loading(pairs) == pytest.approx(0.9)
    assert fit.growth_loading(pairs[:4]) is None
    # floor drift: median |step| at the floors 0.002 over the RL runs' median |drift step| 0.01 (the floored runs'
    # own 0.01 steps and a floorless run's); a DPO run's floor does not count; under 5 runs at a floor, none
    floored = [dataclasses.replace(FAKE, floor=0.1, floor_steps=np.array([0.002, -0.002, 0.002]),
                                   drift_steps=np.array([0.01, -0.01, 0.01]))] * 5
    dpo = dataclasses.replace(FAKE, job_type="dpo", floor=0.4, floor_steps=np.array([0.5, 0.5, 0.5]),
                              drift_steps=np.array([0.5, 0.5, 0.5]))
    plain = dataclasses.replace(FAKE, drift_steps=np.array([-0.01, 0.01, 0.01]))
    assert fit.floor_drift(floored + [dpo, plain]) == pytest.approx(0.2)
    assert fit.floor_drift(floored[:4] + [dpo, plain]) is None
    # the noise level and spread read from the runs without a floor when asked: the floored run's noise left out
    quiet = dataclasses.replace(FAKE, floor=0.1, gold_noise=1e-3)
    runs = [dataclasses.replace(FAKE, gold_noise=v) for v in (0.01, 0.02, 0.03)] + [quiet] * 3
    assert fit.median_noise(runs, dpo=False, floorless=True) == pytest.approx(0.02)
    assert fit.median_noise(runs, dpo=False) == pytest.approx((0.001 + 0.01) / 2)
