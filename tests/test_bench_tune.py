"""The bench's tuner: the same budget for every family, validation seeds only, the rule fixed in code."""

import json

import pytest

pytest.importorskip("optuna")

from evalstop_gym.bench import suite as suite_mod  # noqa: E402
from evalstop_gym.bench.arms import TUNED_BEST  # noqa: E402
from evalstop_gym.bench.run import RESULTS_FILE, TUNE_FILE, run_bench  # noqa: E402
from evalstop_gym.bench.suite import Row, suite_hash  # noqa: E402
from evalstop_gym.bench.tune import objective  # noqa: E402
from evalstop_gym.seeds import VALIDATION  # noqa: E402

TOY = (Row("toy-paper", jobs=30, gpus=16, seeds=(1000, 1001)),)


def test_the_rule_by_hand():
    none = {"r": {"avg_jct_h": [10.0, 20.0], "delivered_quality_regret": [0.3, 0.3]}}
    cap = {"r": {"avg_jct_h": [8.0, 16.0], "delivered_quality_regret": [0.02, 0.04]}}
    ok = {"r": {"avg_jct_h": [5.0, 15.0], "delivered_quality_regret": [0.03, 0.03]}}   # regret 0.03 = the cap
    assert objective(ok, none, cap) == (pytest.approx((0.5 + 0.75) / 2), True)
    bad = {"r": {"avg_jct_h": [5.0, 15.0], "delivered_quality_regret": [0.03, 0.04]}}
    assert objective(bad, none, cap) == (pytest.approx(1.625), False)


def test_tune_gives_every_family_the_budget_on_validation_seeds_and_records_it(tmp_path, monkeypatch):
    from evalstop_gym.bench import tune

    monkeypatch.setitem(suite_mod.SUITES, "toy", TOY)
    suite_hash.cache_clear()
    calls = []
    real = tune.tune_families
    monkeypatch.setattr(tune, "tune_families",
                        lambda *a, **k: calls.append(k) or real(*a, **{**k, "families": ["none", "evalstop"]}))
    out = run_bench(["evalstop"], suite_name="toy", out=tmp_path, tune=True, budget=3, progress=False,
                    echo=lambda _t: None)
    suite_hash.cache_clear()
    t = out["tuning"]
    assert t["trials"] == 3 and set(t["families"]) == {"none", "evalstop"}
    assert t["families"]["evalstop"]["searched"] == ["k"] and "k" in t["families"]["evalstop"]["params"]
    assert t["best"] in t["families"].values() and TUNED_BEST in out["references"]
    seeds = {json.loads(line)["spec"]["workload"]["seed"] for line in (tmp_path / TUNE_FILE).open()}
    assert seeds and all(s in VALIDATION for s in seeds)
    assert json.loads((tmp_path / RESULTS_FILE).read_text())["tuning"] == t
    again = run_bench(["evalstop"], suite_name="toy", out=tmp_path / "b", tuned=tmp_path / RESULTS_FILE,
                      progress=False, echo=lambda _t: None)
    assert again["references"][TUNED_BEST] == out["references"][TUNED_BEST]
