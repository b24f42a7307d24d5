"""The detectors ship the defaults docs/select_detectors.py chose, as recorded in docs/detector_defaults.json.

The selection is not re-run here (it takes minutes); the test reads its recorded result, so the shipped
defaults and the rule's output cannot drift apart unnoticed. After a re-run of the script, a failure names
the parameters to change.
"""

import importlib.util
import inspect
import json
from pathlib import Path

import pytest

from evalstop_gym.baselines import STOPPERS
from evalstop_gym.seeds import SELECTION_CALIBRATION, check_seeds

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _script():
    spec = importlib.util.spec_from_file_location("select_detectors", DOCS / "select_detectors.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


SEL = _script()
RECORD = json.loads(SEL.RESULT.read_text())


def test_the_record_is_the_defaults_rule_on_validation_seeds_of_the_selection_world():
    assert RECORD["rule"] == "defaults" and RECORD["calibration"] == SELECTION_CALIBRATION, \
        f"docs/detector_defaults.json holds the {RECORD['calibration']} world; the selection world is " \
        f"{SELECTION_CALIBRATION}: re-run `PYTHONPATH=. python3 docs/select_detectors.py` and ship its choice"
    seeds = RECORD["seeds"]
    assert seeds["count"] == seeds["last"] - seeds["first"] + 1 >= 10
    check_seeds("validation", range(seeds["first"], seeds["last"] + 1))
    assert (RECORD["workload"], RECORD["base_scheduler"], RECORD["budget"]) == (SEL.WORKLOAD, SEL.BASE, SEL.BUDGET)
    assert (RECORD["anchor"]["stopper"], RECORD["anchor"]["params"]) == SEL.ANCHOR
    assert RECORD["code"]["commit"] and RECORD["code"]["dirty"] is False   # made by committed code
    assert set(RECORD["detectors"]) == set(SEL.SPACES)


@pytest.mark.parametrize("stopper", sorted(SEL.SPACES))
def test_the_recorded_choice_is_the_rule_applied_to_the_recorded_scores(stopper):
    d = RECORD["detectors"][stopper]
    settings = [s["params"] for s in d["settings"]]
    assert settings == SEL.candidates(SEL.SPACES[stopper])     # the same budget, the same draw
    chosen, scores = SEL.select([(s["params"], s["scores"]) for s in d["settings"]],
                                RECORD["anchor"]["scores"]["waste_cut"])
    assert (chosen, scores) == (d["chosen"], d["scores"])


@pytest.mark.parametrize("stopper", sorted(SEL.SPACES))
def test_the_shipped_defaults_are_the_recorded_choice(stopper):
    sig = inspect.signature(STOPPERS[stopper].__init__)
    shipped = {p: sig.parameters[p].default for p in SEL.SPACES[stopper]}
    chosen = RECORD["detectors"][stopper]["chosen"]
    assert shipped == chosen, f"{stopper}: evalstop_gym/baselines/ ships {shipped}, docs/select_detectors.py " \
                              f"chose {chosen} (docs/detector_defaults.json)"
    # every other parameter is the noise a user may pass (by default estimated) or the shared warm-up, off by
    # default
    assert set(sig.parameters) - set(SEL.SPACES[stopper]) - {"self", "base"} <= {"sigma", "warmup",
                                                                                  "warmup_progress"}
    assert (sig.parameters["warmup"].default, sig.parameters["warmup_progress"].default) == (0, 0.0)
    if "sigma" in sig.parameters:
        assert sig.parameters["sigma"].default is None
