"""The hidden curves against the formulas of ``evalstop_gym.curves``, worked out by hand.

Degenerate parameter ranges (low == high) pin every drawn parameter, so each
curve is known exactly and is written here from its documented formula.
"""

import dataclasses
import math

import numpy as np
import pytest

from evalstop_gym.config import CurveModel
from evalstop_gym.curves import gao_normalized, hacking_gold, healthy_gold, progress_grid, sample_curves

X = [0.25, 0.5, 0.75, 1.0]          # progress of the 4 checkpoints of a 4-eval job

PINNED = CurveModel(base=(0.05, 0.05), healthy_gain=(0.6, 0.6), healthy_tau=(1.0, 1.0), hack_gain=(0.8, 0.8),
                    hack_peak=(0.5, 0.5), kl_exponent=1.0, proxy_gain=(0.7, 0.7), proxy_noise=0.0,
                    loss_start=(2.0, 2.0), loss_floor_frac=(0.5, 0.5), loss_tau=(0.25, 0.25), loss_noise=0.0)


def test_progress_grid():
    assert progress_grid(4).tolist() == X
    assert progress_grid(2).tolist() == [0.5, 1.0]


def test_gao_form_peaks_at_one_and_returns_to_zero_at_e():
    # u (1 - ln u): 1 at u = 1 (the peak), 0 at u = e, 0.5 (1 + ln 2) at u = 1/2
    assert gao_normalized(np.array([1.0]))[0] == 1.0
    assert gao_normalized(np.array([math.e]))[0] == pytest.approx(0.0, abs=1e-12)
    assert gao_normalized(np.array([0.5]))[0] == pytest.approx(0.5 * (1 + math.log(2)))
    assert gao_normalized(np.array([2.0]))[0] == pytest.approx(2 * (1 - math.log(2)))


def test_healthy_and_hacking_formulas_at_hand_picked_points():
    x = np.array(X)
    # healthy: base + gain (1 - exp(-x / tau)) / (1 - exp(-1 / tau)); reaches base + gain at x = 1
    h = healthy_gold(x, 0.1, 0.5, 2.0)
    expected = [0.1 + 0.5 * (1 - math.exp(-xi / 2.0)) / (1 - math.exp(-1 / 2.0)) for xi in X]
    np.testing.assert_allclose(h, expected, rtol=1e-12)
    assert h[-1] == pytest.approx(0.6)
    # hacking: base + gain * u (1 - ln u), u = (x / peak) ** k; peak base + gain at x = peak
    g = hacking_gold(x, 0.1, 0.5, 0.5, 2.0)
    u = [(xi / 0.5) ** 2 for xi in X]
    np.testing.assert_allclose(g, [0.1 + 0.5 * ui * (1 - math.log(ui)) for ui in u], rtol=1e-12)
    assert g[1] == pytest.approx(0.6) and g.argmax() == 1


def pinned_curves(hacking, is_rlhf, model=PINNED, seed=0):
    return sample_curves(np.random.default_rng(seed), model, 4, np.array(hacking), np.array(is_rlhf))


def test_sampled_curves_follow_the_formulas_with_pinned_parameters():
    # job 0: hacking RLHF; job 1: healthy RLHF; job 2: a healthy non-RLHF job (LoRA or DPO)
    c = pinned_curves([True, False, False], [True, True, False])
    hack = [0.05 + 0.8 * (xi / 0.5) * (1 - math.log(xi / 0.5)) for xi in X]     # peak 0.85 at x = 0.5
    healthy = [0.05 + 0.6 * (1 - math.exp(-xi)) / (1 - math.exp(-1)) for xi in X]
    np.testing.assert_allclose(c.gold, [hack, healthy, healthy], rtol=1e-12)
    assert c.gold[0, 1] == pytest.approx(0.85) and c.gold[1, -1] == pytest.approx(0.65)
    np.testing.assert_array_equal(c.start, [0.05, 0.05, 0.05])
    assert c.peak_progress.tolist() == [0.5, math.inf, math.inf]
    # proxy reward rises for every RLHF run, hacking or not: P (1 - exp(-3x)) / (1 - exp(-3)); none otherwise
    proxy = [0.7 * (1 - math.exp(-3 * xi)) / (1 - math.exp(-3)) for xi in X]
    np.testing.assert_allclose(c.proxy[:2], [proxy, proxy], rtol=1e-12)
    assert np.isnan(c.proxy[2]).all()
    # loss falls for every job: L0 (f + (1 - f) exp(-x / tau_L))
    loss = [2.0 * (0.5 + 0.5 * math.exp(-xi / 0.25)) for xi in X]
    np.testing.assert_allclose(c.loss, [loss, loss, loss], rtol=1e-12)
    assert c.gold.shape == c.eval_z.shape == c.loss.shape == c.proxy.shape == (3, 4)


def test_kl_exponent_bends_the_progress_axis():
    c = pinned_curves([True], [True], model=dataclasses.replace(PINNED, kl_exponent=2.0))
    u = [(xi / 0.5) ** 2 for xi in X]
    np.testing.assert_allclose(c.gold[0], [0.05 + 0.8 * ui * (1 - math.log(ui)) for ui in u], rtol=1e-12)


def test_parameters_are_drawn_within_their_ranges_and_noise_is_standard_normal():
    model = CurveModel(proxy_noise=0.0, loss_noise=0.0)
    n = 4000
    rng = np.random.default_rng(1)
    hacking = rng.random(n) < 0.5
    c = sample_curves(np.random.default_rng(2), model, 10, hacking, np.ones(n, bool))
    x = progress_grid(10)
    assert ((c.start >= 0.0) & (c.start <= 0.1)).all()
    # healthy runs end exactly at base + gain, gain within its range; they rise at every checkpoint
    gain = c.gold[~hacking, -1] - c.start[~hacking]
    assert gain.min() >= 0.5 and gain.max() <= 0.9 and np.ptp(gain) > 0.3
    assert (np.diff(c.gold[~hacking], axis=1) > 0).all()
    # hacking runs: gold - base divided by the Gao shape at the drawn peak is one constant per run (the gain)
    peak = c.peak_progress[hacking]
    assert peak.min() >= 0.3 and peak.max() <= 0.6 and np.ptp(peak) > 0.2
    shape = gao_normalized(x[None, :] / peak[:, None])
    a = (c.gold[hacking] - c.start[hacking, None]) / shape
    np.testing.assert_allclose(a, a[:, :1] * np.ones_like(a), rtol=1e-9)
    assert a.min() >= 0.5 and a.max() <= 0.9
    # the proxy at x = 1 is its gain; the loss starts below loss_start and ends above its floor
    assert c.proxy[:, -1].min() >= 0.5 and c.proxy[:, -1].max() <= 1.0
    assert (np.diff(c.loss, axis=1) < 0).all() and c.loss.max() < 3.0 and c.loss.min() > 1.5 * 0.3
    # eval noise draws: standard normal, independent of everything else
    z = c.eval_z.ravel()
    assert abs(z.mean()) < 0.03 and abs(z.std() - 1.0) < 0.03


def test_proxy_and_loss_noise_have_their_documented_size():
    base = pinned_curves([False] * 2000, [True] * 2000)
    noisy = pinned_curves([False] * 2000, [True] * 2000,
                          model=dataclasses.replace(PINNED, proxy_noise=0.1, loss_noise=0.2))
    # proxy noise is additive with sd proxy_noise; loss noise multiplicative with sd loss_noise
    assert np.std(noisy.proxy - base.proxy) == pytest.approx(0.1, rel=0.05)
    assert np.std(noisy.loss / base.loss - 1.0) == pytest.approx(0.2, rel=0.05)
    np.testing.assert_array_equal(noisy.gold, base.gold)
