"""The seed ranges: declared once, disjoint, and guarded (evalstop_gym.seeds)."""

import itertools

import pytest

from evalstop_gym.config import ConfigError
from evalstop_gym.seeds import AUDIT, RANGES, TEST, TRAIN, TUNED_ON_TEST, VALIDATION, check_seeds, train_first


def test_ranges_are_disjoint_and_cover_every_seed_from_zero():
    ordered = sorted(RANGES.values(), key=lambda r: r.first)
    assert ordered[0].first == 0
    for a, b in itertools.pairwise(ordered):
        assert a.end == b.first, (a, b)   # no gap, no overlap
    for seed in (0, TEST.end - 1, VALIDATION.first, VALIDATION.end - 1, AUDIT.first, TRAIN.first):
        assert sum(seed in r for r in RANGES.values()) == 1


def test_every_training_episode_seed_is_a_train_seed():
    for run_seed, rank in itertools.product(range(5), range(8)):
        assert train_first(run_seed, rank) in TRAIN


def test_tuning_on_test_seeds_is_refused_naming_the_seeds():
    with pytest.raises(ConfigError) as e:
        check_seeds("validation", [VALIDATION.first, 3, 7])
    assert e.value.field == "seeds" and e.value.value == "3, 7"
    assert "validation seeds" in str(e.value) and "held-out test" in str(e.value)
    assert check_seeds("validation", [VALIDATION.first, VALIDATION.end - 1]) == [VALIDATION.first,
                                                                                VALIDATION.end - 1]


def test_long_lists_are_cut_and_counted():
    with pytest.raises(ConfigError) as e:
        check_seeds("audit", range(10))
    assert e.value.value == "0, 1, 2, 3, 4 (and 5 more)"


def test_seeds_a_default_was_tuned_on_are_not_held_out():
    # the detectors' earlier defaults were tuned on 100-110, inside the declared test range
    used = TUNED_ON_TEST["earlier detector defaults"]
    assert all(s in TEST for s in used)
    with pytest.raises(ConfigError, match="not held out"):
        check_seeds("test", [0, 105])
    assert check_seeds("test", [0, 99, 111]) == [0, 99, 111]


def test_bools_and_unknown_roles_are_refused():
    assert True not in TEST
    with pytest.raises(ConfigError, match="role='tune'"):
        check_seeds("tune", [1])


def test_the_learned_layer_reads_the_same_declaration():
    from evalstop_gym.agents import seeds as old

    assert (old.TEST_SEEDS_END, old.VALIDATION_FIRST, old.VALIDATION_END) == (TEST.end, VALIDATION.first,
                                                                               VALIDATION.end)
    with pytest.raises(ConfigError):
        old.check_validation_seeds(AUDIT.first, 2)
