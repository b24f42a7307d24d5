"""The set networks: slot order and padding do not matter, and one set of weights runs on any
window or cluster size."""

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("sb3_contrib")
import torch as th  # noqa: E402

from evalstop_gym.agents.networks import SlotScorerPolicy, SlotSetExtractor, slot_layout, transfer  # noqa: E402
from evalstop_gym.envs.adapter import CLUSTER_ID, STOP_CONTROL_ID  # noqa: E402
from evalstop_gym.envs.features import N_CLUSTER, N_JOB  # noqa: E402

SLOTS = 8


def busy_obs(env, steps=12):
    """An observation with running and waiting jobs (and some empty slots): start jobs, then commit."""
    obs, _ = env.reset(seed=3)
    for _ in range(steps):
        mask = env.unwrapped.action_masks()
        obs, *_ = env.step(int(np.flatnonzero(mask)[-1]))
    return obs


def split(obs, slots, nodes):
    """(job rows, cluster, node free, per-slot topology) of one observation."""
    rows = obs[:slots * N_JOB].reshape(slots, N_JOB)
    end = slots * N_JOB + N_CLUSTER
    return rows, obs[slots * N_JOB:end], obs[end:end + nodes], obs[end + nodes:].reshape(slots, 2)


def join(rows, cluster, free, topo):
    return np.concatenate([rows.ravel(), cluster, free, topo.ravel()]).astype(np.float32)


@pytest.fixture(scope="module")
def realistic():
    env = gym.make(CLUSTER_ID, slots=SLOTS, jobs=40, calibration="realistic")
    obs = busy_obs(env)
    nodes = slot_layout(obs.shape[0], SLOTS)
    assert nodes == 8  # the realistic world's 8 nodes of 8 GPUs
    rows = split(obs, SLOTS, nodes)[0]
    assert 0 < rows[:, 0].sum() < SLOTS  # some slots hold jobs, some are padding
    return env, obs, nodes


def run(extractor, obs):
    with th.no_grad():
        return extractor(th.as_tensor(obs[None]))[0].numpy()


def test_permuting_slots_and_nodes_keeps_the_features(realistic):
    env, obs, nodes = realistic
    th.manual_seed(0)
    fx = SlotSetExtractor(env.observation_space, slots=SLOTS, hidden=16)
    rows, cluster, free, topo = split(obs, SLOTS, nodes)
    rng = np.random.default_rng(0)
    slot_perm, node_perm = rng.permutation(SLOTS), rng.permutation(nodes)
    out = run(fx, obs)
    out_p = run(fx, join(rows[slot_perm], cluster, free[node_perm], topo[slot_perm]))
    assert out.shape == (fx.features_dim,) == (2 * 16 + N_CLUSTER + 3,)
    np.testing.assert_allclose(out_p, out, atol=1e-6)
    # ... and a change in one job's row does change them (the test could fail)
    rows2 = rows.copy()
    rows2[0, 7] += 0.3
    assert not np.allclose(run(fx, join(rows2, cluster, free, topo)), out, atol=1e-4)


def test_per_slot_embeddings_permute_with_the_slots(realistic):
    env, obs, nodes = realistic
    th.manual_seed(0)
    fx = SlotSetExtractor(env.observation_space, slots=SLOTS, hidden=16, per_slot=True)
    rows, cluster, free, topo = split(obs, SLOTS, nodes)
    perm = np.random.default_rng(1).permutation(SLOTS)
    out = run(fx, obs)
    out_p = run(fx, join(rows[perm], cluster, free, topo[perm]))
    pooled = fx.pooled_dim
    np.testing.assert_allclose(out_p[:pooled], out[:pooled], atol=1e-6)
    np.testing.assert_allclose(out_p[pooled:].reshape(SLOTS, 16), out[pooled:].reshape(SLOTS, 16)[perm], atol=1e-6)


def test_padding_slots_change_nothing(realistic):
    env, obs, nodes = realistic
    rows, cluster, free, topo = split(obs, SLOTS, nodes)
    big = 3 * SLOTS
    padded = join(np.vstack([rows, np.zeros((big - SLOTS, N_JOB))]), cluster, free,
                  np.vstack([topo, np.zeros((big - SLOTS, 2))]))
    big_space = gym.spaces.Box(-np.inf, np.inf, padded.shape, np.float32)
    th.manual_seed(0)
    fx = SlotSetExtractor(env.observation_space, slots=SLOTS, hidden=16)
    fx_big = SlotSetExtractor(big_space, slots=big, hidden=16)
    fx_big.load_state_dict(fx.state_dict())   # no weight depends on the slot count
    np.testing.assert_allclose(run(fx_big, padded), run(fx, obs), atol=1e-6)


def test_layout_refuses_an_observation_of_another_env():
    with pytest.raises(ValueError, match="not an EvalStop observation over 4 slots"):
        slot_layout(4 * N_JOB + N_CLUSTER + 3, 4)
    assert slot_layout(4 * N_JOB + N_CLUSTER, 4) == 0


def test_ppo_trains_a_stop_policy_over_the_extractor_on_two_cluster_sizes():
    from stable_baselines3 import PPO

    kw = {"features_extractor_class": SlotSetExtractor, "features_extractor_kwargs": {"slots": 1, "hidden": 16},
          "net_arch": [16]}
    env = gym.make(STOP_CONTROL_ID, jobs=20, calibration="realistic")
    model = PPO("MlpPolicy", env, n_steps=128, batch_size=64, n_epochs=2, seed=0, device="cpu", policy_kwargs=kw)
    model.learn(256)
    # the same weights on a cluster twice the size (16 nodes: a longer node block)
    env2 = gym.make(STOP_CONTROL_ID, jobs=20, calibration="realistic", gpus=128)
    assert env2.observation_space.shape[0] == env.observation_space.shape[0] + 8
    moved = transfer(model, env2)
    obs, _ = env2.reset(seed=0)
    assert moved.predict(obs, deterministic=True)[0] in (0, 1)
    for a, b in zip(model.policy.state_dict().values(), moved.policy.state_dict().values()):
        assert th.equal(a, b)


def test_maskable_scheduler_trained_on_8_slots_scores_the_same_jobs_on_24(realistic):
    from sb3_contrib import MaskablePPO

    env, obs, nodes = realistic
    # the extractor under sb3-contrib's own MlpPolicy (pooled features, a flat head) ...
    plain = MaskablePPO("MlpPolicy", env, n_steps=128, batch_size=64, n_epochs=2, seed=0, device="cpu",
                        policy_kwargs={"features_extractor_class": SlotSetExtractor,
                                       "features_extractor_kwargs": {"slots": SLOTS, "hidden": 16}})
    plain.learn(256)
    # ... and under the equivariant head, which runs on any window size
    model = MaskablePPO(SlotScorerPolicy, env, n_steps=128, batch_size=64, n_epochs=2, seed=0, device="cpu",
                        policy_kwargs={"hidden": 16})
    model.learn(256)
    big = gym.make(CLUSTER_ID, slots=3 * SLOTS, jobs=40, calibration="realistic")
    moved = transfer(model, big)
    rows, cluster, free, topo = split(obs, SLOTS, nodes)
    padded = join(np.vstack([rows, np.zeros((2 * SLOTS, N_JOB))]), cluster, free, np.vstack([topo, np.zeros((2 * SLOTS, 2))]))

    def logits(m, o):
        pol = m.policy
        with th.no_grad():
            return pol.mlp_extractor.forward_actor(pol.features_extractor(th.as_tensor(o[None])))[0].numpy()

    small_logits, big_logits = logits(model, obs), logits(moved, padded)
    np.testing.assert_allclose(big_logits[:2 + SLOTS], small_logits, atol=1e-6)
    obs_big = busy_obs(big)
    a, _ = moved.predict(obs_big, action_masks=big.unwrapped.action_masks(), deterministic=True)
    assert big.unwrapped.action_masks()[a]
    # a model trained on nodes cannot play a flat pool (no node block): a ConfigError naming why, not torch's
    from evalstop_gym.config import ConfigError

    flat = gym.make(CLUSTER_ID, slots=SLOTS, jobs=40, calibration="realistic", cluster="flat")
    with pytest.raises(ConfigError, match="trained on nodes of GPUs sees a node block"):
        transfer(model, flat)


def test_train_reads_the_extractor_by_name_from_a_hyperparameter_file(tmp_path):
    from evalstop_gym.agents.hparams import sb3_policy_kwargs
    from evalstop_gym.config import ConfigError

    kw = sb3_policy_kwargs({"features_extractor_class": "evalstop_gym.agents.networks.SlotSetExtractor"})
    assert kw["features_extractor_class"] is SlotSetExtractor
    with pytest.raises(ConfigError, match="policy_kwargs.features_extractor_class"):
        sb3_policy_kwargs({"features_extractor_class": "os.system"})


def test_a_saved_stop_policy_answers_cluster_checkpoints_as_it_does_in_its_own_env(tmp_path):
    """HandCodedStops(stop_model=...), as make_env builds it, plays the stop-policy's own decisions: a hand-coded
    scheduler through it gives exactly the metrics of the stop-policy over that scheduler in StopControl-v0."""
    from evalstop_gym.agents.policy import LearnedPolicy, make_env
    from evalstop_gym.agents.train import train
    from evalstop_gym.baselines import make_policy
    from evalstop_gym.envs.adapter import PolicyAgent, rollout

    tiny = {"n_steps": 64, "batch_size": 32, "n_epochs": 2, "eval_freq": 10**6, "n_eval_episodes": 1,
            "eval_workload": {"jobs": 10}}
    recipe = Path(__file__).resolve().parents[1] / "evalstop_gym" / "agents" / "hyperparams" / "ppo-realistic.yml"
    train(STOP_CONTROL_ID, "ppo", out=tmp_path / "stop", timesteps=128, overrides=tiny, hyperparams=str(recipe),
          n_envs=1, progress=False, echo=lambda s: None)
    # the trained weights, and the same network made to stop every job (action 1 dominates) and to stop none: the
    # two forced ones tell the decisions apart whatever a 128-step training happened to learn
    from stable_baselines3 import PPO

    for name, bias in (("always", [0.0, 50.0]), ("never", [50.0, 0.0])):
        model = PPO.load(tmp_path / "stop" / "model.zip", device="cpu")
        with th.no_grad():
            model.policy.action_net.bias.copy_(th.tensor(bias))
        (tmp_path / name).mkdir()
        model.save(tmp_path / name / "model.zip")
        (tmp_path / name / "config.json").write_text((tmp_path / "stop" / "config.json").read_text())
    stopped = []
    for path in (tmp_path / "stop", tmp_path / "always", tmp_path / "never"):
        direct = LearnedPolicy.load(path).run(5, scheduler="srtf-est", jobs=30)
        env = make_env(CLUSTER_ID, {"slots": 30}, {"jobs": 30, "calibration": "realistic"},
                       [("HandCodedStops", {"stop_model": str(path)})])
        out = rollout(env, PolicyAgent(make_policy("srtf-est"), env), seed=5)
        assert out["metrics"] == direct
        stopped.append(direct["jobs_stopped"])
    assert stopped[1] == 30 and stopped[2] == 0
