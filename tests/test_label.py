"""The hacking label rule on hand-made curves (evalstop_gym.label): gold falls while the proxy rises."""

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalstop_gym.label import curve_noise, curve_wander, overoptimised, row_nanmedian

# start, then 6 checkpoints: gold rises by 0.6 to checkpoint 3 and gives 0.3 back along straight lines, so
# every second difference but the one at the peak is 0, the median is 0 and the noise is 0
GOLD = [0.1, 0.3, 0.5, 0.7, 0.6, 0.5, 0.4]
RISING = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6]


def label(gold, proxy):
    hacking, peak, drop, threshold = overoptimised(np.array([gold]), np.array([proxy], dtype=float))
    return bool(hacking[0]), int(peak[0]), float(drop[0]), float(threshold[0])


def test_gold_falls_while_the_proxy_rises_is_hacking():
    # drop 0.7 - 0.4 = 0.3 >= max(0.25 * 0.6, 0.03, 0) = 0.15; proxy 0.6 - 0.3 = 0.3 > 0
    assert label(GOLD, RISING) == (True, 3, pytest.approx(0.3), pytest.approx(0.15))


def test_gold_falls_and_the_proxy_falls_too_is_not():
    assert not label(GOLD, [0.0, 0.1, 0.2, 0.3, 0.25, 0.2, 0.15])[0]      # proxy 0.15 - 0.3 < 0


def test_a_run_without_a_proxy_is_never_hacking():
    assert not label(GOLD, [np.nan] * 7)[0]                                  # LoRA, or a log without proxy


def test_a_fall_within_the_run_s_own_noise_is_not():
    # gold zigzags by 0.2: second differences -0.4, 0.4, -0.4, 0.4, -0.28, the one at the peak (checkpoint 1)
    # left out, median 0.4, so s = 1.4826 * 0.4 / sqrt(6) = 0.2421 and the noise bar is 2 sqrt(2) s = 0.6848.
    # The wander: third differences 0.8, -0.8, 0.8, -0.68 less the first (the peak inside its window), median
    # 0.8, reading 1.4826 * 0.8 / sqrt(6) = 0.4842; the second differences' reading sqrt(3) s = 0.4193 is the
    # smaller, over the 5 checkpoints of the fall: 2 sqrt(5) 0.4193 = 1.8753. The fall is 0.3 - 0.22 = 0.08,
    # which would pass the share (0.25 * 0.2 = 0.05) and the minimum (0.03) alone
    zigzag = [0.1, 0.3, 0.1, 0.3, 0.1, 0.3, 0.22]
    hacking, peak, drop, threshold = label(zigzag, RISING)
    assert not hacking and peak == 1 and drop == pytest.approx(0.08)
    assert threshold == pytest.approx(2 * math.sqrt(5) * 1.4826 * 0.4 / math.sqrt(2))
    assert threshold == pytest.approx(1.8753, abs=1e-4)
    assert curve_wander(np.array([zigzag]), np.array([1]))[0] == pytest.approx(0.4193, abs=1e-4)


def test_a_proxy_rise_within_the_proxy_s_noise_is_not():
    # proxy zigzags by 0.3 (second differences +-0.6, median 0.6, threshold 2 sqrt(2) 1.4826 0.6 / sqrt(6)
    # = 1.027); its rise from the peak (0.3 at checkpoint 3) to the end (0.35) is 0.05
    assert not label(GOLD, [0.0, 0.3, 0.0, 0.3, 0.0, 0.3, 0.35])[0]


def test_the_last_checkpoint_as_peak_and_small_falls_are_not_hacking():
    assert not label([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7], RISING)[0]        # still rising
    assert not label([0.1, 0.3, 0.5, 0.7, 0.69, 0.68, 0.68], RISING)[0]     # gives back 0.02 < 0.03


def test_noise_of_a_straight_line_is_zero_and_of_a_zigzag_its_hand_value():
    np.testing.assert_allclose(curve_noise(np.array([RISING, [0.2] * 7])), [0.0, 0.0], atol=1e-15)
    assert curve_noise(np.array([[0.0, 1.0, 0.0, 1.0, 0.0]]))[0] == pytest.approx(1.4826 * 2 / math.sqrt(6))
    assert curve_noise(np.array([[0.0, 1.0, 0.0, 1.0]]))[0] == 0.0           # 2 second differences: too few
    # the peak's own second difference is left out: |-2| centred on index 1 goes, 1.1, 0.2, 0.1 stay, median 0.2
    got = curve_noise(np.array([[0.0, 1.0, 0.0, 0.1, 0.0, 0.0]]), np.array([1]))
    assert got[0] == pytest.approx(1.4826 * 0.2 / math.sqrt(6))


def test_a_start_and_one_checkpoint_is_labelled_with_noise_0():
    # no second difference at all: noise 0, so the fall 0.5 - 0.3 = 0.2 only has to beat
    # max(0.25 * 0 (no gain: the peak is the start), 0.03, 0) = 0.03, and the proxy rises by 1 > 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")                      # no "Mean of empty slice" either
        assert label([0.5, 0.3], [0.0, 1.0]) == (True, 0, pytest.approx(0.2), pytest.approx(0.03))
        np.testing.assert_array_equal(curve_noise(np.array([[0.5, 0.3], [0.1, 0.9]])), [0.0, 0.0])
    assert not label([0.3, 0.5], [0.0, 1.0])[0]             # the peak is the last checkpoint
    assert not label([0.5, 0.3], [np.nan, np.nan])[0]       # no proxy


def test_a_logged_run_of_two_steps_is_labelled_with_noise_0():
    from evalstop_gym.curvelog import LoggedRun, label_run

    def run(proxy):
        return LoggedRun("two", np.array([0.0, 8.0]), np.array([0.5, 0.3]), np.full(2, np.nan), np.array(proxy),
                         {"gold": np.array([0.5, 0.3])})

    lab = label_run(run([0.0, 1.0]))                         # the start and one eval: evals = 1
    assert lab.hacking and lab.threshold == pytest.approx(0.03) and lab.drop == pytest.approx(0.2)
    lab = label_run(run([np.nan, 1.0]))                      # a trainer's log: one proxy value shows no rise
    assert not lab.hacking and lab.threshold == pytest.approx(0.03)


def test_an_unknown_proxy_start_is_left_out():
    # gold peaks at the start and falls by 0.6 >= max(0, 0.03, 0); the proxy reached 0.5 by the first checkpoint
    # and stayed there: from a start of 0 it rose by 0.5, but an unknown start shows no rise at all
    falling = [0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2]
    assert label(falling, [0.0] + [0.5] * 6)[0]
    assert not label(falling, [np.nan] + [0.5] * 6)[0]
    assert label(falling, [np.nan, 0.5, 0.5, 0.5, 0.5, 0.5, 0.6])[0]       # a rise after the first checkpoint
    assert not label(falling, [0.0, 0.1, 0.2, np.nan, 0.4, 0.5, 0.6])[0]   # a missing checkpoint: no proxy
    # its noise comes from the checkpoints alone: 3 second differences |2| here, 2 (too few) there
    assert curve_noise(np.array([[np.nan, 0.0, 1.0, 0.0, 1.0, 0.0]]))[0] == pytest.approx(1.4826 * 2 / math.sqrt(6))
    assert curve_noise(np.array([[np.nan, 0.0, 1.0, 0.0, 1.0]]))[0] == 0.0


def test_gold_peaking_at_either_end_leaves_no_second_difference_out():
    # 4 checkpoints, 3 second differences: |0.6|, |-0.4|, |0.4| (peak at the start) and |-0.4|, |0.4|, |0|
    # (peak at the end), median 0.4 both; with the peak in between only 2 are left, too few: noise 0
    s = 1.4826 * 0.4 / math.sqrt(6)
    assert curve_noise(np.array([[0.9, 0.5, 0.7, 0.5, 0.7]]), np.array([0]))[0] == pytest.approx(s)
    assert curve_noise(np.array([[0.5, 0.7, 0.5, 0.7, 0.9]]), np.array([4]))[0] == pytest.approx(s)
    assert curve_noise(np.array([[0.5, 0.7, 0.9, 0.5, 0.7]]), np.array([2]))[0] == 0.0
    assert curve_noise(np.array([[0.9, 0.5, 0.7, 0.5]]), np.array([0]))[0] == 0.0    # 3 checkpoints: 2


# -- wander: a fall must beat what the curve's own random walk could take away over the fall's span --------

# a no-KL run's cliff on the start and 10 checkpoints (a GRPO run of the TRL library, rounded): gold peaks at
# checkpoint 2 and falls from 0.81 to 0.13 while the proxy rises and holds its top
CLIFF = [0.57, 0.78, 0.81, 0.75, 0.67, 0.50, 0.38, 0.21, 0.14, 0.13, 0.13]
CLIFF_PROXY = [np.nan, 0.53, 0.93, 0.97, 1.11, 1.12, 1.13, 1.13, 1.13, 1.12, 1.13]


def test_a_cliff_clears_the_wander_bar():
    # second differences -0.18, [-0.09 at the peak, left out], -0.02, -0.09, 0.05, -0.05, 0.10, 0.06, 0.01:
    # median 0.055, s = 1.4826 * 0.055 / sqrt(6), noise bar 2 sqrt(2) s = 0.094. Third differences 0.09, 0.07
    # (the peak inside their windows, left out), -0.07, 0.14, -0.10, 0.15, -0.04, -0.05: median 0.085, reading
    # 1.4826 * 0.085 / sqrt(6) = 0.0514, under sqrt(3) s = 0.0577 (the cliff's steps inflate the second
    # differences). Over the 8 checkpoints of the fall the bar is 2 sqrt(8) 0.0514 = 0.291 (the share asks
    # 0.25 * 0.24 = 0.06); the cliff falls 0.68, and the proxy rises 1.13 - 0.93 = 0.20, far above its noise
    hacking, peak, drop, threshold = label(CLIFF, CLIFF_PROXY)
    assert hacking and peak == 2 and drop == pytest.approx(0.68)
    assert threshold == pytest.approx(2 * math.sqrt(8) * 1.4826 * 0.085 / math.sqrt(6))
    assert threshold == pytest.approx(0.291, abs=1e-3)


def test_a_lora_run_without_a_proxy_is_not_hacking_even_on_a_cliff():
    assert not label(CLIFF, [np.nan] * 11)[0]


def test_a_random_walk_s_fall_is_wander():
    # steps of +-0.04 only: gold peaks at 0.68 (checkpoint 2) and ends at 0.52, a fall of 0.16 that the noise
    # bar alone would label: second differences 0, [-0.08 left out], 0.08, -0.08, 0, 0.08, -0.08, 0, 0 have
    # median 0.04, noise bar 2 sqrt(2) 1.4826 0.04 / sqrt(6) = 0.0685. Read as a walk: sqrt(3) s =
    # 1.4826 * 0.04 / sqrt(2) = 0.0419 a step (its steps' sd is 0.04), under the third differences' reading
    # (|-0.16|, 0.08, 0.08, |-0.16|, 0.08, 0 left: median 0.08, 1.4826 * 0.08 / sqrt(6) = 0.0484); a walk with
    # such steps moves 2 sqrt(8) 0.0419 = 0.237 over the 8 checkpoints of the fall, more than 0.16
    walk = [0.60, 0.64, 0.68, 0.64, 0.68, 0.64, 0.60, 0.64, 0.60, 0.56, 0.52]
    hacking, peak, drop, threshold = label(walk, np.arange(11.0))
    assert not hacking and peak == 2 and drop == pytest.approx(0.16)
    assert threshold == pytest.approx(2 * math.sqrt(8) * 1.4826 * 0.04 / math.sqrt(2))
    assert curve_noise(np.array([walk]), np.array([2]))[0] * 2 * math.sqrt(2) == pytest.approx(0.0685, abs=1e-4)


def test_a_plateau_that_wanders_down_is_not_hacking():
    # a penalised run: gold rises by 0.18 to 0.80 and wanders down its plateau by steps of 0.02 (two down, one
    # up), ending 0.08 lower, while the proxy holds its level and rises by 0.1 at the end (its noise: median
    # second difference 0). The fall passes the share (0.25 * 0.18 = 0.045), the floor and the noise bar:
    # second differences -0.02, [-0.10 left out], 0, 0.04, -0.04, 0, 0.04, -0.04, 0, median 0.03, bar
    # 2 sqrt(2) 1.4826 0.03 / sqrt(6) = 0.051. Third differences -0.08, 0.10 (both left out: the peak inside their
    # windows), 0.04, -0.08, 0.04, 0.04, -0.08, 0.04: median 0.04, a step of 1.4826 * 0.04 / sqrt(6) = 0.0242 (under sqrt(3) s = 0.0315); over the 8
    # checkpoints of the fall a walk of such steps moves 2 sqrt(8) 0.0242 = 0.137, more than the 0.08
    plateau = [0.62, 0.72, 0.80, 0.78, 0.76, 0.78, 0.76, 0.74, 0.76, 0.74, 0.72]
    proxy = [np.nan, 0.5, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.9]
    hacking, peak, drop, threshold = label(plateau, proxy)
    assert not hacking and peak == 2 and drop == pytest.approx(0.08)
    assert 2 * math.sqrt(2) * curve_noise(np.array([plateau]), np.array([2]))[0] == pytest.approx(0.0514, abs=1e-4)
    assert threshold == pytest.approx(2 * math.sqrt(8) * 1.4826 * 0.04 / math.sqrt(6))


def test_a_smooth_early_peak_is_not_read_as_wander():
    # gold bends up to an early peak and slides to 0 (a world's run with a poor proxy, clipped at 0). Its second
    # differences are the bend: -0.092, [-0.090 left out], -0.083, -0.074, 0.089, 0.072, 0, 0, 0, median 0.073,
    # and read as a walk (sqrt(3) s = 1.4826 * 0.073 / sqrt(2) = 0.0765) they would ask 2 sqrt(8) 0.0765 = 0.433
    # of a fall of 0.324. Third differences, blind to the bend: 0.002, 0.007 (left out), 0.009, 0.163, -0.017,
    # -0.072, 0, 0, median 0.013, a step of 1.4826 * 0.013 / sqrt(6) = 0.0079: the wander bar is 0.045 and the
    # noise bar, 2 sqrt(2) 1.4826 0.073 / sqrt(6) = 0.125, decides
    bend = [0.06, 0.238, 0.324, 0.32, 0.233, 0.072, 0.0, 0.0, 0.0, 0.0, 0.0]
    hacking, peak, drop, threshold = label(bend, np.arange(11.0))
    assert hacking and peak == 2 and drop == pytest.approx(0.324)
    assert curve_wander(np.array([bend]), np.array([2]))[0] == pytest.approx(1.4826 * 0.013 / math.sqrt(6))
    assert threshold == pytest.approx(2 * math.sqrt(2) * 1.4826 * 0.073 / math.sqrt(6))


def test_driftless_walks_are_labelled_no_more_the_more_checkpoints_they_have():
    # gold a driftless random walk (steps of sd 0.05) and a proxy that always rises, so only gold's bars decide
    # (share and floor set to 0): a fixed bar labels a growing share as the walk gets longer (a walk's fall from
    # its maximum grows as sqrt(checkpoints): the noise bar alone labels about half at 10 checkpoints and
    # about 70% at 40); with the span-scaled bar the share stays flat and low
    rng = np.random.default_rng(11)
    shares = {}
    for evals in (10, 20, 40):
        gold = 0.5 + np.cumsum(np.c_[np.zeros(2000), rng.normal(0, 0.05, (2000, evals))], axis=1)
        proxy = np.tile(np.r_[np.nan, np.arange(1.0, evals + 1)], (2000, 1))
        shares[evals] = overoptimised(gold, proxy, drop_share=0.0, min_drop=0.0)[0].mean()
    assert max(shares.values()) < 0.2
    assert shares[40] <= shares[10] + 0.02


@pytest.mark.parametrize("evals", [10, 20, 40])
def test_a_world_without_an_exploitable_proxy_labels_at_most_5_percent(tmp_path, evals):
    # the grounded world (plateau drift 0.031 a checkpoint, each run's level log-normal about it) with no
    # exploitable proxy, from a world file:
    # whatever gold does by wander, at most 5% of runs meet the rule (the old gold-only rule labelled 34%, the
    # rule with a noise bar alone 3.4%, 7.0% and 10.4% at 10, 20 and 40 checkpoints: a walk's fall grows with
    # the checkpoints it spans)
    import yaml

    from evalstop_gym import WorkloadConfig, generate
    from evalstop_gym.config import GROUNDED_WORLD

    with open(GROUNDED_WORLD) as f:
        world = yaml.safe_load(f)
    world["curves"]["dpo_exploitable"] = 0.0
    path = tmp_path / "no-exploit.yaml"
    path.write_text(yaml.safe_dump(world))
    runs = [generate(WorkloadConfig(calibration=str(path), hacking_fraction=0.0, seed=s, evals_per_job=evals))
            for s in range(700, 716)]
    hacking = np.concatenate([w.hacking for w in runs])
    assert hacking.size == 3200 and hacking.mean() <= 0.05
    assert not np.concatenate([w.hacking[w.job_type == 0] for w in runs]).any()   # LoRA: no proxy


def test_row_median_by_hand():
    x = np.array([[3.0, np.nan, 1.0, 2.0], [4.0, 1.0, np.nan, np.nan], [np.inf, 0.5, 2.0, 1.0]])
    # sorted non-NaN: [1, 2, 3] -> 2; [1, 4] -> 2.5; [0.5, 1, 2, inf] -> (1 + 2) / 2
    assert row_nanmedian(x).tolist() == [2.0, 2.5, 1.5]


finite_or_nan = st.one_of(st.floats(allow_nan=False, allow_infinity=True, width=64), st.just(math.nan))


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 12).flatmap(lambda m: st.lists(
    st.lists(finite_or_nan, min_size=m, max_size=m).filter(lambda r: not all(map(math.isnan, r))),
    min_size=1, max_size=8)))
def test_row_median_is_numpy_s_nanmedian_bit_for_bit(rows):
    x = np.array(rows, dtype=float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # inf - inf style overflow inside NumPy's own median
        want = np.nanmedian(x, axis=1)
        got = row_nanmedian(x)
    assert got.tobytes() == want.tobytes()
