"""``config_visible``: each job's public configuration in its view, off by default, changing no result."""

import json
import math

import pytest

from evalstop_gym import WorkloadConfig, generate
from evalstop_gym.baselines import FIFO, make_policy
from evalstop_gym.config import ConfigError, CurveModel
from evalstop_gym.metrics import compute_metrics
from evalstop_gym.policy import drive
from evalstop_gym.simulator import Simulator
from evalstop_gym.view import JobConfig


def test_the_latent_world_s_configuration_is_its_draws():
    cfgs = generate(WorkloadConfig(jobs=200, seed=3, calibration="realistic")).job_configs()
    assert len(cfgs) == 200 and all(isinstance(c, JobConfig) for c in cfgs)
    kl = [c.kl_coef for c in cfgs]
    # realistic: 30% of runs have a KL penalty, coefficient log-uniform in [0.05, 0.2]; learning rate in [0.6, 1.6]
    assert all(k == 0.0 or 0.05 <= k <= 0.2 for k in kl)
    assert 0.2 < sum(k > 0 for k in kl) / 200 < 0.4
    assert all(0.6 <= c.learning_rate <= 1.6 for c in cfgs)
    assert all(math.isnan(c.data_size) and math.isnan(c.model_size) for c in cfgs)   # not modelled here


def test_views_carry_the_configuration_only_when_asked():
    w = generate(WorkloadConfig(jobs=40, seed=4, calibration="grounded"))
    sim = Simulator(w, config_visible=True)
    drive(sim, FIFO())
    want = w.job_configs()
    for j in range(w.n):
        got = sim.views[j].config
        assert got[:2] == want[j][:2] and math.isnan(got.data_size) and math.isnan(got.model_size)
    assert any(sim.views[j].config.kl_coef > 0 for j in range(w.n))
    sim = Simulator(w)
    drive(sim, FIFO())
    assert all(sim.views[j].config is None for j in range(w.n))


@pytest.mark.parametrize("calibration", ["paper", "realistic", "grounded"])
def test_showing_the_configuration_changes_no_result(calibration):
    # a policy that does not read the configuration plays the same episode, to the byte
    w = generate(WorkloadConfig(jobs=80, seed=5, calibration=calibration))
    a, b = (compute_metrics(drive(Simulator(w, config_visible=v), make_policy("fifo", "evalstop", k=2)))
            for v in (False, True))
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_bad_config_visible_values_name_the_field():
    w = generate(WorkloadConfig(jobs=5, seed=0))
    with pytest.raises(ConfigError, match="config_visible.*True or False"):
        Simulator(w, config_visible="yes")
    label_first = generate(WorkloadConfig(jobs=5, seed=0, curves=CurveModel()))
    with pytest.raises(ConfigError, match="config_visible.*LatentModel"):
        Simulator(label_first, config_visible=True)
