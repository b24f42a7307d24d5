"""E10's misspecified worlds are relative to the world they perturb: x2 is twice that world's own value."""

import dataclasses

import pytest

from evalstop_gym.config import CALIBRATIONS, WorkloadConfig
from evalstop_gym.experiments.spec import build_suite, misspecified


@pytest.mark.parametrize("calibration,drift,dpo_drift,noise", [
    ("realistic", 0.016, None, (2.0, 4.0)),
    ("grounded", 2 * 0.0310444, 2 * 0.0381643, (2 * 0.363817, 2 * 0.641727))])
def test_x2_is_twice_the_calibrated_value(calibration, drift, dpo_drift, noise):
    # by hand: realistic's drift 0.008 and seed noise factor 1-2; grounded's fitted drift 0.0310444 (DPO's own
    # 0.0381643) and factor 0.363817-0.641727 (evalstop_gym/data/grounded.yaml)
    worlds = dict(misspecified(WorkloadConfig(calibration=calibration)))
    assert worlds["plateau drift x2"]["curves.drift"] == pytest.approx(drift)
    assert worlds["plateau drift x2"].get("curves.dpo_drift") == (None if dpo_drift is None
                                                                   else pytest.approx(dpo_drift))
    assert worlds["seed noise x2"]["world.seed_noise_factor"] == pytest.approx(noise)
    assert worlds["as calibrated"] == {}
    assert worlds["all four"]["curves.drift"] == pytest.approx(drift)


def test_a_user_s_own_world_is_perturbed_from_its_own_values():
    curves = dataclasses.replace(CALIBRATIONS["realistic"].curves, drift=0.03)
    base = WorkloadConfig(calibration="realistic", curves=curves)
    assert dict(misspecified(base))["plateau drift x2"] == {"curves.drift": 0.06}
    (e10,) = build_suite(["E10"], workload=base)
    drifts = {dict(p.workload).get("curves.drift") for p in e10.points if p.x == "plateau drift x2"}
    assert drifts == {0.06}
