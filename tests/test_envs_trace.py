"""Trace replay through the Gymnasium envs: gym.make(..., trace=PATH)."""

import pytest

from evalstop_gym.baselines import make_policy
from evalstop_gym import run_policy
from evalstop_gym.config import ConfigError
from evalstop_gym.envs.adapter import run_through_env
from evalstop_gym.traces import read_trace, replay_trace, trace_config

ROWS = [  # timestamp, duration (s), GPUs: a tiny Philly-layout trace
    ("2017-10-01 00:00:00", 7200, 8), ("2017-10-01 00:10:00", 3600, 4), ("2017-10-01 00:20:00", 1800, 1),
    ("2017-10-01 00:30:00", 9000, 8), ("2017-10-01 00:40:00", 600, 2), ("2017-10-01 01:00:00", 5400, 4),
    ("2017-10-01 01:30:00", 2400, 1), ("2017-10-01 02:00:00", 7200, 8),
]


@pytest.fixture
def trace(tmp_path):
    p = tmp_path / "philly.csv"
    p.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n" +
                 "".join(f"{t},{d},{g},{d * g},c{i % 2}\n" for i, (t, d, g) in enumerate(ROWS)))
    return str(p)


@pytest.mark.parametrize("env_id", ["EvalStop-Cluster-v0", "EvalStop-StopControl-v0"])
@pytest.mark.parametrize("policy", [("fifo", "none"), ("srtf-est", "evalstop")])
def test_trace_through_env_equals_direct_replay(trace, env_id, policy):
    options = {"rescale": "none"}
    via_env = run_through_env(*policy, env_id=env_id, seed=5, trace=trace, gpus=8, trace_options=options)
    w, _ = replay_trace(read_trace(trace), trace_config(gpus=8, seed=5), **options)
    assert via_env == run_policy(w, make_policy(*policy))
    assert via_env["jobs"] == len(ROWS)


def test_trace_options_need_a_trace():
    import gymnasium as gym

    with pytest.raises(ConfigError, match="trace_options"):
        gym.make("EvalStop-StopControl-v0", trace_options={"jobs": 3})


def test_a_bad_trace_fails_at_make(tmp_path):
    import gymnasium as gym

    p = tmp_path / "bad.csv"
    p.write_text("timestamp,duration\n2017-10-01 00:00:00,60\n")
    with pytest.raises(ConfigError, match="bad.csv"):
        gym.make("EvalStop-StopControl-v0", trace=str(p))
