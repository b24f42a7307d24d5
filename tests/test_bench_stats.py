"""The scorecard's suite-level statistics beside the t-interval: a stratified bootstrap and the IQM."""

import itertools

import numpy as np
import pytest

from evalstop_gym.bench.score import compare, scorecard, stratified_bootstrap


def test_rows_stay_rows_seeds_vary_within_them():
    # every row's seeds agree, so a resample within rows never moves the mean: the interval is the point
    # (an unstratified bootstrap, mixing rows, would give a wide one)
    assert stratified_bootstrap([1.0, 1.0, 1.0, 5.0, 5.0, 5.0], ["a", "a", "a", "b", "b", "b"]) == [3.0, 3.0]


def test_the_interval_matches_the_exact_resampling_distribution():
    # two rows of two seeds: 4 x 4 equally likely resamples; their means' 2.5th and 97.5th percentiles by hand
    values, strata = [0.0, 2.0, 10.0, 14.0], ["a", "a", "b", "b"]
    means = sorted((sum(a) + sum(b)) / 4 for a in itertools.product([0.0, 2.0], repeat=2)
                   for b in itertools.product([10.0, 14.0], repeat=2))
    # means: (0|1|1|2 from row a sums 0,2,2,4) + (row b sums 20,24,24,28) over 4: from 5.0 to 8.0
    assert means[0] == 5.0 and means[-1] == 8.0
    lo, hi = stratified_bootstrap(values, strata, reps=20000)
    assert lo == pytest.approx(5.0) and hi == pytest.approx(8.0)
    assert stratified_bootstrap(values, strata) == stratified_bootstrap(values, strata)   # seeded


def test_iqm_is_the_mean_of_the_middle_half_of_the_per_workload_changes():
    ref = [10.0] * 8
    arm = [5.0, 8.0, 9.0, 9.5, 10.5, 11.0, 12.0, 30.0]   # % changes -50, -20, -10, -5, 5, 10, 20, 200
    c = compare(arm, ref, "avg_jct_h", strata=["r"] * 8)
    assert c["change"] == pytest.approx((-50 - 20 - 10 - 5 + 5 + 10 + 20 + 200) / 8)
    assert c["iqm"] == pytest.approx((-10 - 5 + 5 + 10) / 4)
    assert "ci_boot" not in compare(arm, ref, "avg_jct_h")   # per row: the t-interval alone


@pytest.mark.filterwarnings("ignore:Precision loss:RuntimeWarning")   # the t-test of equal changes
def test_the_scorecard_gives_both_intervals_over_the_suite_only():
    rng = np.random.default_rng(1)
    metrics = ("avg_jct_h", "p50_jct_h", "p99_jct_h", "makespan_h", "compute_waste_gpu_h", "gpu_hours", "precision",
               "recall", "f1", "fpr", "delivered_quality_regret", "preemptions")
    ref = {r: {m: list(rng.uniform(5, 10, 4)) for m in metrics} for r in ("a", "b")}
    arm = {r: {m: [x * 0.9 for x in ref[r][m]] for m in metrics} for r in ("a", "b")}
    card = scorecard(arm, {"ref": ref})
    agg = card["vs"]["ref"]["aggregate"]["avg_jct_h"]
    assert agg["change"] == pytest.approx(-10.0) and agg["ci_boot"] == pytest.approx([-10.0, -10.0])
    assert agg["iqm"] == pytest.approx(-10.0)
    assert "ci_boot" not in card["vs"]["ref"]["per_row"]["a"]["avg_jct_h"]


def _card(label, tests):
    """A card whose verdicts are ``(metric, change, p)`` tests against one reference (what board_verdicts reads)."""
    return {"label": label, "verdicts": [{"reference": "ref", "metric": m, "change": c, "unit": "%", "ci": [None, None],
                                          "p": p, "p_holm": None, "verdict": "tie"} for m, c, p in tests]}


def test_the_board_adjusts_over_every_test_of_every_policy():
    from evalstop_gym.bench.score import board_verdicts

    # by hand, four tests: sorted p 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1 = 0.02, 0.03, 0.06, 0.04,
    # made non-decreasing: 0.02, 0.03, 0.06, 0.06. Alone, policy a's two tests would be 0.02 and 0.04 (both
    # significant); on the board its JCT test (p 0.04) is 0.06: a tie
    a = _card("a", [("avg_jct_h", -5.0, 0.04), ("f1", 0.1, 0.01)])
    b = _card("b", [("avg_jct_h", 3.0, 0.005), ("f1", -0.2, 0.03)])
    va, vb = board_verdicts([a, b])
    assert [v["p_holm"] for v in va + vb] == pytest.approx([0.06, 0.03, 0.02, 0.06])
    assert [v["verdict"] for v in va + vb] == ["tie", "better", "worse", "tie"]
    assert [v["p"] for v in va + vb] == [0.04, 0.01, 0.005, 0.03]   # the raw p stays
    (alone,) = board_verdicts([a])
    assert [v["p_holm"] for v in alone] == pytest.approx([0.04, 0.02])
    assert [v["verdict"] for v in alone] == ["better", "better"]
