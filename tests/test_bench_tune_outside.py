"""An outside policy declares its search space and `bench --tune` tunes it as it tunes the built-in families:
the same budget, validation seeds and rule, recorded in the results."""

import sys
import textwrap

import pytest

from evalstop_gym.bench import suite as suite_mod
from evalstop_gym.bench.suite import Row, suite_hash
from evalstop_gym.bench.space import declared_space
from evalstop_gym.bench import tune
from evalstop_gym.bench.tune import VALIDATION_SEEDS
from evalstop_gym.config import ConfigError

pytest.importorskip("optuna")

TOY = (Row("toy-paper", jobs=30, gpus=16, seeds=(1000, 1001)),)

MODULE = """
from evalstop_gym.policy import Stopper


class Declines(Stopper):
    rule_name = "declines"
    search_space = {"after": (1, 4, "int"), "slack": (0.001, 0.1, "log")}

    def __init__(self, base, after=2, slack=0.01):
        super().__init__(base)
        self.after, self.slack = after, slack

    def rule(self, job, cluster):
        return job.consecutive_declines >= self.after
"""


@pytest.fixture
def outside(tmp_path, monkeypatch):
    monkeypatch.setitem(suite_mod.SUITES, "toy", TOY)
    suite_hash.cache_clear()
    (tmp_path / "declines43.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("declines43", None)
    suite_hash.cache_clear()


BUDGET = 6   # the families' default budget while this test runs (the shipped one would take minutes here)


@pytest.mark.parametrize("in_process", [False, True])
def test_an_outside_policy_is_tuned_with_the_families_budget_seeds_and_rule(outside, in_process, monkeypatch):
    from evalstop_gym.bench.run import run_bench

    monkeypatch.setattr(tune, "FAMILY_BUDGET", BUDGET)

    result = run_bench(["declines43:Declines"], suite_name="toy", out=outside / f"out{in_process}", tune=True,
                       progress=False, echo=lambda _t: None, in_process=in_process)
    (label, t), = result["outside_tuning"].items()
    assert t["budget"] == BUDGET == result["tuning"]["trials"] and len(t["every_trial"]) == BUDGET
    assert t["rule"] == result["tuning"]["rule"] and t["searched"] == ["after", "slack"]
    assert t["validation_seeds"] == {"toy-paper": TOY[0].validation_seeds(VALIDATION_SEEDS)}
    assert not set(t["validation_seeds"]["toy-paper"]) & set(TOY[0].seeds)   # never a test seed
    for trial in t["every_trial"]:
        assert trial["params"]["after"] in range(1, 5) and 0.001 <= trial["params"]["slack"] <= 0.1
    best = min(t["every_trial"], key=lambda x: (x["score"], x["tie"]))
    assert t["best"] == best
    card, = result["policies"]
    assert card["label"] == best["label"] and card["policy"] == best["policy"]
    assert card["process"] == ("in-process" if in_process else "isolated")


def test_a_declared_space_is_checked():
    from evalstop_gym.policy import Stopper

    class Bad(Stopper):
        search_space = {"window": (5, 1)}

        def __init__(self, base, window=3):
            super().__init__(base)

    with pytest.raises(ConfigError, match="low < high"):
        declared_space(Bad)
    Bad.search_space = {"nope": (1, 2)}
    with pytest.raises(ConfigError, match=r"\['nope'\]='nope' is invalid: is not a parameter of Bad \(it takes: window\)"):
        declared_space(Bad)
    Bad.search_space = lambda: {"window": (1, 5, "int")}
    assert declared_space(Bad) == {"window": '{"name": "IntDistribution", "attributes": {"log": false, "step": 1, '
                                             '"low": 1, "high": 5}}'}


def test_per_scheduler_tuning_gives_every_pair_the_whole_budget(outside, tmp_path):
    from evalstop_gym.bench.run import run_bench

    result = run_bench(["srtf-est+evalstop"], suite_name="toy", out=tmp_path / "per", tune=True, budget=2,
                       per_scheduler=True, progress=False, echo=lambda _t: None)
    t = result["tuning"]
    assert t["per_scheduler"] is True
    from evalstop_gym.baselines import SCHEDULERS, STOPPERS

    assert set(t["families"]) == {f"{s}+{f}" for s in SCHEDULERS for f in STOPPERS}
    for key, fam in t["families"].items():
        sched, stop = key.split("+")
        assert len(fam["every_trial"]) == 2 and fam["stopper"] == stop
        assert {x["scheduler"] for x in fam["every_trial"]} == {sched}   # the scheduler is fixed, not searched
    assert t["best"] == min(t["families"].values(), key=lambda f: (f["score"], f["tie"]))
