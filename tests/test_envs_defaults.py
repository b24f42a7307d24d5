"""The envs as a new user meets them: default kwargs pass both checkers with warnings as errors,
plain SB3 algorithms learn on them, invalid actions are penalized no-ops, episodes are bounded,
and bad keywords are a ValueError naming the keyword (also under fuzzing)."""

import warnings

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalstop_gym import ConfigError
from evalstop_gym.envs import ENVS
from evalstop_gym.envs.adapter import CLUSTER_ID, STOP_CONTROL_ID
from evalstop_gym.envs.base import DEFAULT_REWARD_WEIGHTS, STEPS_PER_JOB

ENV_IDS = sorted(ENVS)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_both_checkers_pass_on_default_kwargs_with_warnings_as_errors(env_id):
    from gymnasium.utils.env_checker import check_env
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(gym.make(env_id).unwrapped)
        sb3_check_env(gym.make(env_id), warn=True)


@pytest.mark.parametrize("env_id", ENV_IDS)
@pytest.mark.parametrize("algo", ["PPO", "A2C", "DQN"])
def test_plain_sb3_algorithms_learn_on_default_kwargs(env_id, algo):
    import stable_baselines3

    env = gym.make(env_id)
    cls = getattr(stable_baselines3, algo)
    model = cls("MlpPolicy", env, seed=0, device="cpu").learn(2048)
    assert model.num_timesteps >= 2048


def test_maskable_ppo_still_uses_the_masks():
    """In strict mode a single masked-out action would raise: MaskablePPO never plays one."""
    from sb3_contrib import MaskablePPO

    env = gym.make(CLUSTER_ID, jobs=20, invalid_action="raise")
    model = MaskablePPO("MlpPolicy", env, n_steps=256, batch_size=64, seed=0, device="cpu").learn(1024)
    assert model.num_timesteps >= 1024


def test_invalid_action_is_a_no_op_with_the_documented_small_penalty():
    env = gym.make(CLUSTER_ID, jobs=10)
    obs, info = env.reset(seed=0)
    assert info["action_mask"][0] == 0          # t=0: idle cluster with a queue, commit is masked
    obs2, r, terminated, truncated, info2 = env.step(0)
    assert r == DEFAULT_REWARD_WEIGHTS["invalid"] == -0.1
    assert info2["invalid_action"] and not (terminated or truncated)
    assert np.array_equal(obs, obs2) and info2["time_h"] == info["time_h"] == 0.0


def test_default_truncation_is_500_steps_per_job_and_says_so():
    env = gym.make(CLUSTER_ID, jobs=2)
    env.reset(seed=0)
    steps, truncated, info = 0, False, {}
    while not truncated:       # an agent stuck on one invalid action: commit on an idle cluster
        _, _, terminated, truncated, info = env.step(0)
        steps += 1
        assert not terminated
    assert STEPS_PER_JOB == 500 and steps == 1000   # 500 steps per job x 2 jobs
    assert "max_steps=1000" in info["truncation"] and "2 of 2 jobs unfinished" in info["truncation"]
    assert "metrics" not in info
    with pytest.raises(RuntimeError, match="reset"):
        env.step(2)


def test_an_ended_episode_has_metrics_and_no_truncation_note():
    env = gym.make(STOP_CONTROL_ID, jobs=3)
    env.reset(seed=1)
    while True:
        _, _, terminated, truncated, info = env.step(0)
        if terminated or truncated:
            break
    assert terminated and not truncated and "truncation" not in info and info["metrics"]["jobs"] == 3


def test_max_steps_none_never_truncates_and_an_integer_truncates_there():
    env = gym.make(CLUSTER_ID, jobs=2, max_steps=None)
    env.reset(seed=0)
    for _ in range(1500):      # beyond the automatic limit of 1000
        assert env.step(0)[3] is False
    env = gym.make(CLUSTER_ID, jobs=2, max_steps=7)
    env.reset(seed=0)
    assert [env.step(0)[3] for _ in range(7)] == [False] * 6 + [True]


@pytest.mark.parametrize("kwargs,message", [
    ({"reward_weights": [1]}, "reward_weights=[1] is invalid: must be a dict"),
    ({"reward_weights": {"speed": 1}}, "reward_weights.speed=1 is invalid: unknown term; known: jct_h"),
    ({"mix": "rlhf"}, "mix='rlhf' is invalid: must be a dict of job type -> fraction"),
    ({"curves": "x"}, "curves='x' is invalid: must be an evalstop_gym.CurveModel"),
    ({"job_types": 3}, "job_types=3 is invalid: must be a dict"),
    ({"max_steps": "forever"}, "max_steps='forever' is invalid: must be an integer >= 1"),
    ({"invalid_action": "ignore"}, "invalid_action='ignore' is invalid: must be one of penalize, raise"),
    ({"trace_options": [1]}, "trace_options=[1] is invalid: must be a dict"),
])
def test_bad_make_keywords_name_the_keyword_value_and_what_is_allowed(kwargs, message):
    with pytest.raises(ConfigError) as e:
        gym.make(CLUSTER_ID, **kwargs)
    assert str(e.value).startswith(message)


@pytest.mark.parametrize("options", [[1, 2], "s", 3])
def test_reset_options_must_be_a_dict(options):
    env = gym.make(STOP_CONTROL_ID, jobs=3)
    with pytest.raises(ConfigError, match="options=.*must be a dict"):
        env.reset(options=options)


def test_unknown_trace_options_fail_at_make(tmp_path):
    p = tmp_path / "philly.csv"
    p.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-01 00:00:00,3600,1,3600,c0\n")
    with pytest.raises(ConfigError, match="trace_options.bogus=1 .*known: jobs"):
        gym.make(STOP_CONTROL_ID, trace=str(p), trace_options={"bogus": 1})


def test_numpy_scalars_are_accepted():
    env = gym.make(CLUSTER_ID, jobs=np.int64(10), noise=np.float32(0.05), gpus=np.int32(16),
                   max_steps=np.int64(50), reward_weights={"quality": np.float32(50)})
    cfg = env.unwrapped.config
    assert (cfg.jobs, cfg.gpus) == (10, 16) and type(cfg.jobs) is int
    assert cfg.noise == pytest.approx(0.05) and env.unwrapped.reward_weights["quality"] == 50.0
    env.reset(seed=np.int64(3), options={"noise": np.float64(0.02), "jobs": np.int16(4)})
    assert env.unwrapped.cluster.finished == 0


# -- fuzzing: any keyword value is a clean ValueError or a working env ------------------------
KEYS = ["jobs", "gpus", "load", "noise", "hacking_fraction", "evals_per_job", "estimate_error", "tenants",
        "seed", "workload", "mix", "curves", "slots", "max_steps", "invalid_action", "reward_weights",
        "render_mode", "trace_options", "scheduler", "bogus"]
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 300), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8), st.sampled_from(["rlhf-heavy", "balanced", "auto", "ansi", "raise", "fifo", "rlhf"]),
    st.integers(-3, 300).map(np.int64), st.floats(-2, 2, width=32).map(np.float32))
VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=3),
                   st.dictionaries(st.sampled_from(["rlhf", "dpo", "lora", "quality", "jct_h", "x"]),
                                   SCALARS, max_size=3))


def _check(env, options):
    obs, info = env.reset(seed=0, options=options)
    assert obs in env.observation_space
    mask = info["action_mask"]
    obs, *_ = env.step(int(np.flatnonzero(mask)[0]))
    assert obs in env.observation_space


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(env_id=st.sampled_from(ENV_IDS), kwargs=st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=3),
       options=st.one_of(st.none(), VALUES, st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=2)))
def test_fuzzed_make_and_reset_kwargs_give_a_value_error_or_a_valid_env(env_id, kwargs, options):
    kwargs.setdefault("jobs", 5)   # keep generated episodes small
    mode = kwargs.get("render_mode")
    # gym.make itself calls str methods on render_mode before the env is built, and formats its warning about
    # an unknown mode with `%` (gymnasium.logger.warn: msg % args), so a '%' in it raises TypeError there
    if not isinstance(mode, (str, type(None))) or "%" in (mode or ""):
        kwargs["render_mode"] = "bogus"
    if isinstance(options, dict):
        options.setdefault("jobs", 5)
    try:
        env = gym.make(env_id, **kwargs)
    except ValueError:
        return
    try:
        _check(env, options)
    except ValueError:
        pass
