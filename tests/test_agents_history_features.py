"""Opt-in history features of a stop-policy (:mod:`evalstop_gym.agents.history_features`): values by hand,
the wrapper's observation, and a saved stop-policy reading them as a stopper exactly as in its env."""

import math
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest

import evalstop_gym  # noqa: F401  (registers the env ids)
from evalstop_gym.agents.history_features import HISTORY_FEATURES, history_row
from evalstop_gym.agents.wrappers import JobFeatures
from evalstop_gym.config import ConfigError
from evalstop_gym.envs.adapter import STOP_CONTROL_ID
from evalstop_gym.envs.features import JOB_FEATURES

NAMES = ["proxy_rise_2", "drop_z_1", "drop_z_2"]


def job(scores, items, proxy=()):
    return SimpleNamespace(eval_scores=list(scores), eval_items=items, proxy_rewards=list(proxy))


def test_values_by_hand():
    # scores 0.5, 0.6, 0.55 on 100 items; proxy 0.1, 0.2, 0.35
    row = history_row(job([0.5, 0.6, 0.55], 100, [0.1, 0.2, 0.35]), NAMES)
    assert row[0] == pytest.approx(0.25)
    # window 1: level 0.55, sampling error^2 = 0.55 * 0.45 / 100 = 0.002475; drop 0.6 - 0.55
    assert row[1] == pytest.approx(0.05 / (math.sqrt(0.002475) * math.sqrt(2.0)) / 10.0)
    # window 2: level 0.575, sampling error^2 = 0.575 * 0.425 / 100 = 0.00244375; drop 0.5 - 0.575 < 0
    assert row[2] == pytest.approx(-0.075 / (math.sqrt(0.00244375) * math.sqrt(1.5)) / 10.0)
    assert row[2] < 0 < row[1]
    # a score of 0 on 4 items has the sampling error of 1 / 4: sqrt(0.25 * 0.75 / 4); drop 0.5
    assert history_row(job([0.5, 0.0], 4), ["drop_z_1"])[0] == pytest.approx(
        0.5 / (math.sqrt(0.25 * 0.75 / 4) * math.sqrt(2.0)) / 10.0)


def test_undefined_is_zero_and_large_values_are_clipped():
    assert history_row(None, NAMES) == [0.0, 0.0, 0.0]
    assert history_row(job([0.5], 100, [0.1, 0.2]), NAMES) == [0.0, 0.0, 0.0]       # too short for all three
    assert history_row(job([0.5, 0.6, 0.55], 0, []), NAMES) == [0.0, 0.0, 0.0]     # eval-set size unknown
    assert history_row(job([0.9, 0.9, 0.1], 10**6, [0.0, 0.0, 5.0]), NAMES) == [1.0, 1.0, 1.0]
    assert history_row(job([0.1, 0.1, 0.9], 10**6, [5.0, 0.0, 0.0]), NAMES)[::2] == [-1.0, -1.0]


def test_the_wrapper_appends_them_for_the_job_at_the_checkpoint():
    raw = gym.make(STOP_CONTROL_ID, jobs=20, calibration="realistic")
    names = ["last_score", "drop_z_1", "type_rlhf", "proxy_rise_2", "drop_z_2"]
    env = JobFeatures(gym.make(STOP_CONTROL_ID, jobs=20, calibration="realistic"), features=names)
    assert env.observation_space.shape == (5,)
    assert list(env.observation_space.low) == [JOB_FEATURES["last_score"][0], -1.0, 0.0, -1.0, -1.0]
    o_raw, _ = raw.reset(seed=7)
    o, _ = env.reset(seed=7)
    nonzero = 0
    for _ in range(60):
        v = raw.unwrapped.decision_job
        want = [o_raw[list(JOB_FEATURES).index("last_score")], *history_row(v, ["drop_z_1"]),
                o_raw[list(JOB_FEATURES).index("type_rlhf")], *history_row(v, ["proxy_rise_2", "drop_z_2"])]
        assert np.array_equal(o, np.array(want, np.float32)) and env.observation_space.contains(o)
        nonzero += bool(o[[1, 3, 4]].any())
        o_raw, _, done, _, _ = raw.step(0)
        o, *_ = env.step(0)
        if done:
            break
    assert nonzero > 10


def test_an_unknown_name_lists_both_kinds():
    with pytest.raises(ConfigError, match="drop_z_3.*history features: " + ", ".join(HISTORY_FEATURES)):
        JobFeatures(gym.make(STOP_CONTROL_ID, jobs=5), features=["last_score", "drop_z_3"])


pytest.importorskip("stable_baselines3")

from evalstop_gym.agents.policy import LearnedStop  # noqa: E402
from evalstop_gym.agents.policy import LearnedPolicy  # noqa: E402
from evalstop_gym.agents.train import train  # noqa: E402
from evalstop_gym.api import run_policy  # noqa: E402
from evalstop_gym.baselines import make_policy  # noqa: E402
from evalstop_gym.workload import generate  # noqa: E402

from test_agents_targets import REALISTIC, TINY_STOP, stops_about_half  # noqa: E402


def test_a_stop_policy_reading_history_features_answers_as_in_its_env(tmp_path):
    features = ["type_rlhf", "last_score", "drawdown", "eval_se", *NAMES]
    wrapper = {"evalstop_gym.agents.wrappers.JobFeatures": {"features": features}}
    train(STOP_CONTROL_ID, "ppo", out=tmp_path / "m", timesteps=256, n_envs=1, calibration="realistic",
          overrides={**TINY_STOP, "env_wrapper": [wrapper]}, echo=lambda _: None)
    pol = stops_about_half(LearnedPolicy.load(tmp_path / "m"))
    w = generate(REALISTIC.replace(jobs=40, seed=5))
    via_env = pol.run(scheduler="srtf-est", workload=w)
    direct = run_policy(w, LearnedStop(make_policy("srtf-est"), pol))
    assert 0 < direct["jobs_stopped"] < direct["jobs"]
    assert direct == via_env


def test_history_features_alone():
    env = JobFeatures(gym.make(STOP_CONTROL_ID, jobs=10, calibration="realistic"), features=["drop_z_2", "drop_z_1"])
    o, _ = env.reset(seed=2)
    assert o.shape == (2,) and env.observation_space.contains(o)
