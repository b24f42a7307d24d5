"""Learned agents: masks through SubprocVecEnv, training beats random, a model folder and its zip are one
policy, and the wrappers' contracts."""

import json

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("sb3_contrib")

import evalstop_gym  # noqa: F401,E402
from evalstop_gym.agents.evaluate import evaluate  # noqa: E402
from evalstop_gym.agents.policy import LearnedPolicy  # noqa: E402
from evalstop_gym.agents.seeds import TEST_SEEDS_END, VALIDATION_FIRST, check_test_seeds, train_first  # noqa: E402
from evalstop_gym.agents.policy import make_env  # noqa: E402
from evalstop_gym.agents.train import train  # noqa: E402
from evalstop_gym.agents.wrappers import STOP_FEATURES, HandCodedStops, JobFeatures, WorkloadSeeds  # noqa: E402
from evalstop_gym.baselines import make_policy  # noqa: E402
from evalstop_gym import ConfigError, simulate  # noqa: E402
from evalstop_gym.envs.adapter import CLUSTER_ID, STOP_CONTROL_ID, PolicyAgent, rollout  # noqa: E402
from evalstop_gym.envs.features import JOB_FEATURES  # noqa: E402

# a PPO run that learns something (slow: 16k steps of one-job episodes at a higher learning rate than the
# recipe's, one validation round), and a tiny one for the tests of what a saved model is (1,024 steps)
SHORT_PPO = {"n_steps": 512, "batch_size": 128, "n_epochs": 10, "learning_rate": 1e-3, "eval_freq": 16384,
             "n_eval_episodes": 1, "eval_workload": {"noise": 0.05, "jobs": 30}}
TINY_STEPS = 1024
TINY_PPO = {**SHORT_PPO, "n_epochs": 2, "eval_freq": TINY_STEPS}


def _train_stop_model(tmp_path_factory, timesteps, overrides):
    out = tmp_path_factory.mktemp("stop-model")
    return out, train(STOP_CONTROL_ID, "ppo", out=out, timesteps=timesteps, seed=0, n_envs=1, overrides=overrides,
                      echo=lambda _: None)


@pytest.fixture(scope="module")
def stop_model(tmp_path_factory):
    return _train_stop_model(tmp_path_factory, TINY_STEPS, TINY_PPO)


@pytest.fixture(scope="module")
def trained_stop_model(tmp_path_factory):
    return _train_stop_model(tmp_path_factory, 16384, SHORT_PPO)


def test_maskable_ppo_on_subproc_vec_env_reads_masks_from_the_env():
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.utils import get_action_masks
    from stable_baselines3.common.vec_env import SubprocVecEnv

    wrappers = [("HandCodedStops", {"work_conserving": True, "preempt": False})]
    # fork: the workers start with this process's imports instead of importing torch again (seconds each)
    venv = SubprocVecEnv([lambda r=r: make_env(CLUSTER_ID, {"slots": 12}, {"jobs": 12}, wrappers, 100 + r, 2)
                          for r in range(2)], start_method="fork")
    try:
        venv.reset()
        masks = get_action_masks(venv)
        assert masks.shape == (2, 14) and masks.dtype == np.int8
        # the masks come from the worker's env stack: the wrapper's narrowed ones, commit masked while a job fits
        for mask in masks:
            assert mask[1] == 0 and mask.any()
            assert not (mask[0] and mask[2:].any())
        # the env raises on any masked-out action, so a finished run proves every action honoured the masks
        # one rollout of 2 x 128 steps and one update: every action of it went through the workers' masks
        model = MaskablePPO("MlpPolicy", venv, n_steps=128, batch_size=64, n_epochs=1, seed=0, device="cpu")
        model.learn(256)
        assert model.num_timesteps == 256
    finally:
        venv.close()


@pytest.mark.slow   # 14 s alone at load 1 on 2 cores, several times that on a busy machine
def test_short_training_beats_a_random_policy_on_fixed_seeds(trained_stop_model):
    path, _ = trained_stop_model
    pol = LearnedPolicy.load(path)
    rng = np.random.default_rng(0)
    learned, random_ = [], []
    for seed in range(3):
        env = pol.make_env(noise=0.05, jobs=40)
        learned.append(rollout(env, pol.agent(env), seed=seed)["return"])
        random_.append(rollout(env, lambda obs: int(rng.integers(2)), seed=seed)["return"])
    assert np.mean(learned) > np.mean(random_) + 10.0, (learned, random_)


def test_a_model_folder_and_its_zip_evaluate_identically(stop_model):
    """Both ways of naming a saved model give one policy. (That a loaded model acts as the in-memory model
    it was saved from: tests/test_agents_flags.py.)"""
    path, _ = stop_model
    a = evaluate([str(path)], seeds=2, base=evalstop_gym.WorkloadConfig(jobs=40, noise=0.05))
    b = evaluate([str(path / "model.zip")], seeds=2, base=evalstop_gym.WorkloadConfig(jobs=40, noise=0.05))
    assert a.per_seed[a.rows[0]["arm"]] == b.per_seed[b.rows[0]["arm"]]
    assert a.table == b.table
    again = LearnedPolicy.load(path)
    assert again.run(seed=1, jobs=40, noise=0.05) == a.per_seed[a.rows[0]["arm"]][1]


def test_two_saved_models_of_one_kind_get_a_row_each(stop_model, tmp_path):
    """A model's label names its kind and its folder ("learned stop-policy (ppo) [copy] over srtf-est"); two
    folders of one name are two rows named by their paths too; one model named twice (folder and zip) is
    refused."""
    import shutil

    path, _ = stop_model
    other = tmp_path / "copy"
    shutil.copytree(path, other)
    base = evalstop_gym.WorkloadConfig(jobs=20, noise=0.05)
    r = evaluate([str(path), str(other)], seeds=1, base=base)
    assert [row["arm"] for row in r.rows] == [f"learned stop-policy (ppo) [{path.name}] over srtf-est",
                                              "learned stop-policy (ppo) [copy] over srtf-est"]
    assert r.per_seed[r.rows[0]["arm"]] == r.per_seed[r.rows[1]["arm"]]     # the same weights
    namesake = shutil.copytree(path, tmp_path / "elsewhere" / path.name)
    r = evaluate([str(path), str(namesake)], seeds=1, base=base)
    label = f"learned stop-policy (ppo) [{path.name}] over srtf-est"
    assert [row["arm"] for row in r.rows] == [f"{label} [{path}]", f"{label} [{namesake}]"]
    with pytest.raises(ConfigError, match="lists the same policy twice"):
        evaluate([str(path), str(path / "model.zip")], seeds=1, base=base)


def test_config_records_what_rebuilds_and_reproduces_the_run(stop_model):
    path, config = stop_model
    on_disk = json.loads((path / "config.json").read_text())
    assert on_disk == config
    assert (path / "model.zip").is_file() and (path / "final_model.zip").is_file()
    assert config["env_id"] == STOP_CONTROL_ID and config["algo"] == "ppo" and config["seed"] == 0
    assert config["env_wrapper"] == [["JobFeatures", {}]]
    assert config["observation_space"]["shape"] == [len(STOP_FEATURES)]
    assert config["hyperparams"]["n_steps"] == 512 and config["timesteps"] == TINY_STEPS
    assert {"stable-baselines3", "sb3-contrib", "torch", "gymnasium"} <= set(config["versions"])
    assert config["seeds"]["validation"] == [VALIDATION_FIRST]
    assert config["cpu_seconds"] > 0 and config["validation_rounds"]


def test_training_validation_and_test_seeds_are_disjoint():
    first = train_first(0, 1)
    env = WorkloadSeeds(gym.make(STOP_CONTROL_ID, jobs=3), first, 2)
    ref = gym.make(STOP_CONTROL_ID, jobs=3)
    for i in range(3):
        obs, _ = env.reset(seed=0)      # SB3's seed + rank is ignored: the wrapper owns the workload seed
        assert np.array_equal(obs, ref.reset(seed=first + 2 * i)[0])
        assert not np.array_equal(obs, ref.reset(seed=0)[0])
    env.rewind()
    assert np.array_equal(env.reset()[0], ref.reset(seed=first)[0])
    assert min(first, train_first(5, 0), VALIDATION_FIRST) >= TEST_SEEDS_END
    check_test_seeds(0, 10)
    with pytest.raises(ConfigError, match="held-out"):
        check_test_seeds(TEST_SEEDS_END - 5, 10)


def test_job_features_keep_exactly_the_named_features():
    raw = gym.make(STOP_CONTROL_ID, jobs=20, noise=0.05)
    env = JobFeatures(gym.make(STOP_CONTROL_ID, jobs=20, noise=0.05))
    idx = [list(JOB_FEATURES).index(f) for f in STOP_FEATURES]
    o_raw, _ = raw.reset(seed=4)
    o, _ = env.reset(seed=4)
    for _ in range(30):
        assert np.array_equal(o, o_raw[idx]) and env.observation_space.contains(o)
        o_raw, *_ = raw.step(0)
        o, *_ = env.step(0)


@pytest.mark.parametrize("scheduler,work_conserving,preempt", [
    ("srtf-est", False, True), ("tiresias", False, True), ("fifo", True, False), ("sjf-est", True, False)])
def test_hand_coded_stops_give_exactly_the_direct_simulator(scheduler, work_conserving, preempt):
    env = HandCodedStops(gym.make(CLUSTER_ID, slots=50, jobs=50), "evalstop", {"k": 2},
                         work_conserving=work_conserving, preempt=preempt)
    out = rollout(env, PolicyAgent(make_policy(scheduler, "evalstop"), env), seed=3)
    assert out["metrics"] == simulate(scheduler, "evalstop", jobs=50, seed=3)


def test_hand_coded_stops_masks_are_never_empty_and_the_agent_sees_no_eval():
    env = HandCodedStops(gym.make(CLUSTER_ID, slots=16, jobs=30, invalid_action="raise"), work_conserving=True,
                         preempt=False)
    rng = np.random.default_rng(1)
    obs, info = env.reset(seed=2)
    refused = False
    for _ in range(2000):
        mask = env.action_masks()
        assert mask.any() and np.array_equal(mask, info["action_mask"])
        assert env.unwrapped.decision == "schedule"
        if not refused and env.unwrapped.action_masks()[0] and not mask[0]:
            with pytest.raises(ValueError, match="HandCodedStops"):
                env.step(0)   # commit while a waiting job fits: the env allows it, work_conserving does not
            refused = True
        obs, _, terminated, _, info = env.step(int(rng.choice(np.flatnonzero(mask))))
        if terminated:
            break
    assert terminated and refused and info["metrics"]["jobs"] == 30


def test_slot_scorer_is_permutation_equivariant_and_round_trips(tmp_path):
    import torch as th
    from sb3_contrib import MaskablePPO

    from evalstop_gym.agents.networks import SlotScorerPolicy
    from evalstop_gym.envs.features import N_JOB

    env = gym.make(CLUSTER_ID, slots=8, jobs=20)
    model = MaskablePPO(SlotScorerPolicy, env, n_steps=64, batch_size=32, seed=0, device="cpu",
                        policy_kwargs={"hidden": 16})
    model.learn(64)
    obs, _ = env.reset(seed=1)
    for _ in range(5):
        obs, *_ = env.step(int(np.flatnonzero(env.unwrapped.action_masks())[-1]))
    perm = np.array([0, 3, 1, 2, 7, 5, 6, 4])   # slot 0 stays: it holds the job at a checkpoint
    rows = obs[:8 * N_JOB].reshape(8, N_JOB)
    obs_p = np.concatenate([rows[perm].ravel(), obs[8 * N_JOB:]]).astype(np.float32)
    with th.no_grad():
        pol = model.policy
        logits = pol.mlp_extractor.forward_actor(pol.features_extractor(th.as_tensor(obs[None])))[0].numpy()
        logits_p = pol.mlp_extractor.forward_actor(pol.features_extractor(th.as_tensor(obs_p[None])))[0].numpy()
    assert np.allclose(logits_p[2:], logits[2:][perm], atol=1e-6)
    assert np.allclose(logits_p[:2], logits[:2], atol=1e-6)
    model.save(tmp_path / "m.zip")
    again = MaskablePPO.load(tmp_path / "m.zip", device="cpu")
    mask = env.unwrapped.action_masks()
    assert model.predict(obs, action_masks=mask, deterministic=True)[0] == \
        again.predict(obs, action_masks=mask, deterministic=True)[0]


def test_train_on_two_subprocess_workers_with_tensorboard_logs(tmp_path):
    """Two SubprocVecEnv workers play the documented seeds: the model equals the one trained on the same
    two envs in this process (the recipe key vec_env: in-process, SB3's DummyVecEnv), weight for weight, and
    that run's CPU seconds are its own process's, not counted again per env; TensorBoard gets the training
    scalars."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tiny = {"n_steps": 128, "batch_size": 64, "n_epochs": 1, "eval_freq": 256, "n_eval_episodes": 1,
            "eval_workload": {"jobs": 10}}
    config = train(STOP_CONTROL_ID, "ppo", out=tmp_path / "m", timesteps=512, n_envs=2, seed=3,
                   tensorboard=str(tmp_path / "tb"), overrides=tiny, echo=lambda _: None)
    assert config["n_envs"] == 2 and config["seed"] == 3
    assert str(train_first(3, 0)) in config["seeds"]["train"] and "2 * i" in config["seeds"]["train"]
    events = list((tmp_path / "tb").rglob("events.out.tfevents.*"))
    assert len(events) == 1
    acc = EventAccumulator(str(events[0].parent))
    acc.Reload()
    assert {"rollout/ep_rew_mean", "train/loss", "eval/mean_reward"} <= set(acc.Tags()["scalars"])
    assert [e.step for e in acc.Scalars("train/loss")][-1] == 512     # 2 workers x 128 steps x 2 rollouts

    inline = train(STOP_CONTROL_ID, "ppo", out=tmp_path / "inline", timesteps=512, n_envs=2, seed=3,
                   overrides={**tiny, "vec_env": "in-process"}, echo=lambda _: None)
    assert inline["hyperparams"]["evalstop-gym.vec_env"] == "in-process"
    assert inline["validation_rounds"] == config["validation_rounds"]
    assert inline["cpu_seconds"] <= 1.5 * inline["wall_seconds"] + 1.0, inline   # one process: not 3x its own
    a, b = (LearnedPolicy.load(tmp_path / d).model.policy.state_dict() for d in ("m", "inline"))
    for name in a:
        np.testing.assert_array_equal(a[name].numpy(), b[name].numpy(), err_msg=name)


def test_a_hand_coded_stops_mask_is_a_penalized_no_op_in_the_default_mode():
    env = HandCodedStops(gym.make(CLUSTER_ID, slots=16, jobs=30), work_conserving=True, preempt=False)
    rng = np.random.default_rng(1)
    obs, info = env.reset(seed=2)
    for _ in range(2000):
        mask = env.action_masks()
        if env.unwrapped.action_masks()[0] and not mask[0]:   # the env allows commit, work_conserving does not
            t, steps = env.unwrapped.cluster.now_h, env.unwrapped._steps
            obs2, r, terminated, truncated, info = env.step(0)
            assert info["invalid_action"] and r == pytest.approx(-0.1) and not (terminated or truncated)
            assert env.unwrapped.cluster.now_h == t and env.unwrapped._steps == steps + 1   # counted
            assert np.array_equal(obs, obs2)
            return
        obs, *_ = env.step(int(rng.choice(np.flatnonzero(mask))))
    pytest.fail("no state where work_conserving masks a commit the env allows")


def test_training_leaves_no_sb3_folder_in_the_temporary_directory(tmp_path, monkeypatch):
    """SB3 makes ``<tmp>/SB3-<date>`` on every ``learn()`` given no logger and no TensorBoard folder; ``train``
    gives it a logger without a folder. A private temporary directory keeps other processes' folders out."""
    import tempfile

    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    monkeypatch.delenv("SB3_LOGDIR", raising=False)
    for verbose in (0, 1):
        train("EvalStop-StopControl-v0", "ppo", out=tmp_path / f"m{verbose}", timesteps=64, n_envs=1,
              verbose=verbose, overrides={"n_steps": 32, "batch_size": 32, "n_epochs": 1, "eval_freq": 10**6},
              echo=lambda _: None)
    def sb3_folders():
        return [p.name for p in private.iterdir() if p.name.startswith("SB3-")]

    assert sb3_folders() == []
    # the check can fail: SB3 on its own leaves the folder there
    from stable_baselines3 import PPO

    PPO("MlpPolicy", "CartPole-v1", n_steps=32, batch_size=32, n_epochs=1, device="cpu").learn(32)
    assert len(sb3_folders()) == 1


@pytest.mark.timeout(120)
def test_training_interrupted_inside_a_step_ends_without_hanging(tmp_path, monkeypatch):
    """An interruption between a step's replies (Ctrl-C, a time limit) must leave train() with the error, with its
    SubprocVecEnv workers closed: SB3's close() would otherwise wait for replies already half read, forever."""
    import stable_baselines3.common.vec_env as vec_env

    real = vec_env.SubprocVecEnv.step_wait
    calls = []

    def interrupted(self):
        calls.append(1)
        if len(calls) < 3:
            return real(self)
        self.remotes[0].recv()              # one worker's reply read, the other's not yet
        raise KeyboardInterrupt

    monkeypatch.setattr(vec_env.SubprocVecEnv, "step_wait", interrupted)
    tiny = {"n_steps": 128, "batch_size": 64, "n_epochs": 1, "eval_freq": 256, "n_eval_episodes": 1,
            "eval_workload": {"jobs": 10}}
    with pytest.raises(KeyboardInterrupt):
        train(STOP_CONTROL_ID, "ppo", out=tmp_path / "m", timesteps=512, n_envs=2, seed=3, overrides=tiny,
              echo=lambda _: None)
    assert len(calls) == 3


def _fake_model(folder, env_id, wrapper):
    """A model folder as `evalstop-gym train` leaves it, with stand-in weights (fingerprints read bytes only)."""
    folder.mkdir()
    (folder / "model.zip").write_bytes(b"weights of " + folder.name.encode())
    (folder / "config.json").write_text(json.dumps({"env_id": env_id, "env_kwargs": {}, "env_wrapper": wrapper,
                                                    "algo": "maskable-ppo" if env_id == CLUSTER_ID else "ppo"}))
    return folder


def test_a_scheduler_fingerprint_changes_with_the_stop_policy_it_plays_over(tmp_path):
    """A scheduler trained over a saved stop-policy names it by path: retraining that stop-policy in place
    must give the scheduler's runs a new id (reproduce and targets cache by it), and a missing one says so."""
    from evalstop_gym.agents.saved import fingerprint

    stop = _fake_model(tmp_path / "stop", STOP_CONTROL_ID, [["JobFeatures", {}]])
    sched = _fake_model(tmp_path / "sched", CLUSTER_ID, [["HandCodedStops", {"stop_model": str(stop)}]])
    before = fingerprint(sched)
    assert fingerprint(sched) == before
    (stop / "model.zip").write_bytes(b"retrained weights")
    assert fingerprint(sched) != before
    plain = _fake_model(tmp_path / "plain", CLUSTER_ID, [["HandCodedStops", {"stopper": "evalstop"}]])
    assert len(fingerprint(plain)) == 12
    (stop / "model.zip").unlink()
    with pytest.raises(ConfigError, match="stop_model"):
        fingerprint(sched)
