"""The EvalStop envs follow the Gymnasium and stable-baselines3 APIs: checkers, seeding,
spaces and masks, pickling, vectorization, spec round trip, bad actions, config, rendering."""

import pickle
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.registration import EnvSpec
from gymnasium.utils.env_checker import check_env, data_equivalence

from evalstop_gym import ConfigError
from evalstop_gym.envs import ENVS
from evalstop_gym.envs.adapter import CLUSTER_ID, STOP_CONTROL_ID, PolicyAgent, rollout
from evalstop_gym.envs.features import feature_names

ENV_IDS = sorted(ENVS)
# The checkers step with unmasked random actions; on the Cluster env most of them are masked out,
# and the default plays them as penalized no-ops. test_envs_defaults.py runs them on default kwargs.
CHECK_KWARGS = {"jobs": 30}
ALLOWED_WARNINGS: tuple[str, ...] = ()  # checker warnings we accept: none so far


def assert_no_unexpected_warnings(caught):
    bad = [str(w.message) for w in caught if not any(a in str(w.message) for a in ALLOWED_WARNINGS)]
    assert not bad, bad


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_gymnasium_check_env_without_warnings(env_id):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = gym.make(env_id, **CHECK_KWARGS)
        check_env(env.unwrapped)
        env.close()
    assert_no_unexpected_warnings(caught)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_sb3_check_env_without_warnings(env_id):
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sb3_check_env(gym.make(env_id, **CHECK_KWARGS), warn=True)
    assert_no_unexpected_warnings(caught)


def masked_rollout(env, seed, steps):
    """Random masked actions; every return value of every step."""
    out = [env.reset(seed=seed)]
    env.action_space.seed(seed)
    for _ in range(steps):
        mask = out[-1][-1]["action_mask"]
        step = env.step(env.action_space.sample(mask))
        out.append(step)
        if step[2] or step[3]:
            out.append(env.reset())
    return out


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_same_seed_same_everything(env_id):
    a = masked_rollout(gym.make(env_id, jobs=12), seed=4, steps=400)
    b = masked_rollout(gym.make(env_id, jobs=12), seed=4, steps=400)
    assert any("metrics" in r[-1] for r in a)  # episodes ended and restarted on the way
    assert data_equivalence(a, b, exact=True)
    c = masked_rollout(gym.make(env_id, jobs=12), seed=5, steps=50)
    assert not data_equivalence(a[:51], c, exact=True)


@pytest.mark.parametrize("env_id,kwargs", [(CLUSTER_ID, {"slots": 8}), (CLUSTER_ID, {}),
                                           (STOP_CONTROL_ID, {})])
def test_long_random_masked_rollouts_stay_in_space(env_id, kwargs):
    env = gym.make(env_id, jobs=40, load=1.5, **kwargs)
    space = env.observation_space
    if env_id == CLUSTER_ID:
        assert space.shape == (len(feature_names(env.unwrapped.slots)),)
    episodes, rewards = 0, []
    for t, (obs, *rest) in enumerate(masked_rollout(env, seed=7, steps=3000)):
        info = rest[-1]
        assert obs in space, (t, obs[~((obs >= space.low) & (obs <= space.high))])
        assert info["action_mask"].dtype == np.int8 and info["action_mask"].any()
        if len(rest) == 4:
            reward, terminated, truncated, _ = rest
            assert type(reward) is float and type(terminated) is bool and type(truncated) is bool
            rewards.append(reward)
            episodes += terminated
            if terminated:
                m = info["metrics"]
                assert m["jobs"] == 40 and m["avg_jct_h"] > 0
    assert episodes >= 1 and np.isfinite(rewards).all()


def test_action_masks_method_matches_info_and_maskable_ppo_can_read_it():
    from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported
    from stable_baselines3.common.vec_env import DummyVecEnv

    env = gym.make(CLUSTER_ID, jobs=10)
    _, info = env.reset(seed=0)
    assert is_masking_supported(env)
    assert np.array_equal(env.unwrapped.action_masks(), info["action_mask"])
    vec = DummyVecEnv([lambda: gym.make(CLUSTER_ID, jobs=10)])
    vec.reset()
    assert get_action_masks(vec).shape == (1, env.action_space.n)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_pickle_round_trip_continues_identically(env_id):
    env = gym.make(env_id, jobs=15)
    masked_rollout(env, seed=2, steps=30)
    clone = pickle.loads(pickle.dumps(env))
    agent_a = np.random.default_rng(0)
    agent_b = np.random.default_rng(0)

    def play(e, rng):
        out = []
        mask = e.unwrapped.action_masks()
        for _ in range(60):
            step = e.step(int(rng.choice(np.flatnonzero(mask))))
            out.append(step)
            if step[2]:
                break
            mask = step[-1]["action_mask"]
        return out

    assert data_equivalence(play(env, agent_a), play(clone, agent_b), exact=True)


@pytest.mark.parametrize("vector_cls", [gym.vector.SyncVectorEnv, gym.vector.AsyncVectorEnv])
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_vector_envs(vector_cls, env_id):
    venv = vector_cls([lambda: gym.make(env_id, jobs=8) for _ in range(2)])
    try:
        obs, infos = venv.reset(seed=0)
        assert obs.shape == (2, *venv.single_observation_space.shape)
        rng = np.random.default_rng(0)
        done = 0
        for _ in range(150):
            masks = infos["action_mask"]
            actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
            obs, rewards, term, trunc, infos = venv.step(actions)
            assert obs in venv.observation_space
            done += int(term.sum())
        assert done >= 1
    finally:
        venv.close()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_spec_json_round_trip(env_id):
    env = gym.make(env_id, jobs=10, noise=0.05, workload="balanced", reward_weights={"quality": 20.0})
    spec = EnvSpec.from_json(env.spec.to_json())
    assert spec == env.spec
    again = spec.make()
    assert data_equivalence(masked_rollout(env, 3, 100), masked_rollout(again, 3, 100), exact=True)


def test_spaces_and_config_are_fixed_at_construction():
    env = gym.make(CLUSTER_ID, slots=8, jobs=10)
    space = env.observation_space
    assert space.dtype == np.float32 and env.action_space == gym.spaces.Discrete(10)
    env.reset(seed=0, options={"gpus": 128, "noise": 0.08, "jobs": 25})
    assert env.observation_space == space and env.unwrapped.cluster.total_gpus == 128
    env.reset(seed=0)  # options last one episode
    assert env.unwrapped.cluster.total_gpus == 64
    stop = gym.make(STOP_CONTROL_ID)
    assert stop.action_space == gym.spaces.Discrete(2)
    assert stop.unwrapped.scheduler_name in ("srtf-est", "fifo")


@pytest.mark.parametrize("kwargs,field", [({"noise": -1.0}, "noise"), ({"bogus": 1}, "bogus"),
                                          ({"slots": 0}, "slots"), ({"invalid_action": "ignore"}, "invalid_action"),
                                          ({"reward_weights": {"speed": 1.0}}, "reward_weights.speed"),
                                          ({"max_steps": 0}, "max_steps")])
def test_bad_config_names_the_field(kwargs, field):
    with pytest.raises(ConfigError, match=field):
        gym.make(CLUSTER_ID, **kwargs)


def test_bad_reset_options_name_the_option():
    env = gym.make(STOP_CONTROL_ID, jobs=5)
    with pytest.raises(ConfigError, match="options.speed"):
        env.reset(options={"speed": 2})
    with pytest.raises(ConfigError, match="reset\\(seed="):
        env.reset(options={"seed": 2})
    with pytest.raises(ConfigError, match="scheduler"):
        gym.make(STOP_CONTROL_ID, scheduler="nope")


def test_masked_or_out_of_range_actions_raise_in_strict_mode():
    env = gym.make(CLUSTER_ID, jobs=10, invalid_action="raise")
    env.reset(seed=0)
    with pytest.raises(ValueError, match="commit|start a job"):
        env.step(0)  # an idle cluster with a queue cannot commit
    for bad in (-1, 10_000, 1.5, "2"):
        with pytest.raises(ValueError, match="invalid action"):
            env.step(bad)
    with pytest.raises(ValueError, match="only valid at an eval checkpoint"):
        env.step(1)
    stop = gym.make(STOP_CONTROL_ID, jobs=5, invalid_action="raise")
    stop.reset(seed=0)
    with pytest.raises(ValueError, match="0 \\(continue\\) and 1 \\(stop\\)"):
        stop.step(2)


def test_penalize_makes_a_bad_action_a_penalized_no_op():
    env = gym.make(CLUSTER_ID, jobs=10, reward_weights={"invalid": -3.0})   # penalize is the default
    obs, info = env.reset(seed=0)
    obs2, r, term, trunc, info2 = env.step(0)
    assert r == -3.0 and info2["invalid_action"] and info2["reward_terms"]["invalid"] == 1.0
    assert np.array_equal(obs, obs2) and info2["time_h"] == info["time_h"]
    assert np.array_equal(info2["action_mask"], info["action_mask"])
    _, r, *_ = env.step(int(np.flatnonzero(info["action_mask"])[0]))
    assert r == 0.0


def test_truncation_by_max_steps():
    env = gym.make(STOP_CONTROL_ID, jobs=30, max_steps=5)
    env.reset(seed=0)
    flags = [env.step(0)[2:4] for _ in range(5)]
    assert flags == [(False, False)] * 4 + [(False, True)]


def test_step_before_reset_and_after_the_end_is_an_error():
    env = gym.make(STOP_CONTROL_ID, jobs=3).unwrapped
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)
    env.reset(seed=0)
    while not env.step(0)[2]:
        pass
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_render_modes_headless(env_id):
    text_env = gym.make(env_id, jobs=20, render_mode="ansi")
    text_env.reset(seed=0)
    text = text_env.render()
    assert text.startswith("t=") and " h  decision=" in text and "running:" in text and "waiting:" in text

    env = gym.make(env_id, jobs=20, render_mode="rgb_array")
    agent = PolicyAgent(_stopping_policy(), env)
    rollout(env, agent, seed=0)
    img = env.render()
    assert img.shape == (360, 640, 3) and img.dtype == np.uint8   # the chart with axes, legend, clock
    red = (img[..., 0] > 200) & (img[..., 1] < 60) & (img[..., 2] < 60)
    assert red.any()  # stopped jobs are marked
    assert len(np.unique(img.reshape(-1, 3), axis=0)) > 5  # jobs have colours


def _stopping_policy():
    from evalstop_gym.baselines import make_policy

    return make_policy("fifo", "evalstop", k=1)


def test_mdp_doc_lists_every_feature():
    from pathlib import Path

    from evalstop_gym.envs.features import CLUSTER_FEATURES, JOB_FEATURES

    doc = (Path(__file__).resolve().parents[1] / "docs" / "mdp.md").read_text()
    for name, (lo, hi, _) in {**JOB_FEATURES, **CLUSTER_FEATURES}.items():
        assert f"| `{name}` | [{lo:g}, {hi:g}] |" in doc, name


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_maskable_ppo_trains_a_few_steps(env_id):
    from sb3_contrib import MaskablePPO

    env = gym.make(env_id, jobs=10)
    model = MaskablePPO("MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=1, seed=0, device="cpu")
    model.learn(128)
    obs, info = env.reset(seed=1)
    action, _ = model.predict(obs, action_masks=info["action_mask"], deterministic=True)
    assert info["action_mask"][int(action)] == 1
