"""The hacking label rule on hand-made curves (evalstop_gym.label): gold falls while the proxy rises."""

import math
import warnings

import numpy as np
import pytest

from evalstop_gym.label import curve_noise, overoptimised

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
    # gold zigzags by 0.2: second differences -0.4, 0.4, -0.4, 0.4, -0.28, median 0.4, so
    # s = 1.4826 * 0.4 / sqrt(6) = 0.2421 and the fall must beat 2 sqrt(2) s = 0.6848; it is 0.3 - 0.22 = 0.08,
    # which would pass the share (0.25 * 0.2 = 0.05) and the minimum (0.03) alone
    zigzag = [0.1, 0.3, 0.1, 0.3, 0.1, 0.3, 0.22]
    hacking, peak, drop, threshold = label(zigzag, RISING)
    assert not hacking and peak == 1 and drop == pytest.approx(0.08)
    assert threshold == pytest.approx(2 * math.sqrt(2) * 1.4826 * 0.4 / math.sqrt(6))
    assert threshold == pytest.approx(0.6848, abs=1e-4)


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


def test_a_world_without_an_exploitable_proxy_labels_at_most_5_percent(tmp_path):
    # the grounded world (plateau drift 0.066 a checkpoint) with no exploitable proxy, from a world file:
    # whatever gold does by wander, at most 5% of runs meet the rule (the old gold-only rule labelled 34%)
    import yaml

    from evalstop_gym import WorkloadConfig, generate
    from evalstop_gym.config import GROUNDED_WORLD

    with open(GROUNDED_WORLD) as f:
        world = yaml.safe_load(f)
    world["curves"]["dpo_exploitable"] = 0.0
    path = tmp_path / "no-exploit.yaml"
    path.write_text(yaml.safe_dump(world))
    runs = [generate(WorkloadConfig(calibration=str(path), hacking_fraction=0.0, seed=s)) for s in range(700, 716)]
    hacking = np.concatenate([w.hacking for w in runs])
    assert hacking.size == 3200 and hacking.mean() <= 0.05
    assert not np.concatenate([w.hacking[w.job_type == 0] for w in runs]).any()   # LoRA: no proxy
