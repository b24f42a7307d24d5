"""Learned policies: every ``train`` flag reaches training, ``reproduce --model`` adds the model's row,
and a saved model acts exactly as the in-memory model it was saved from."""

import json

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")

import evalstop_gym.agents.train as train_module  # noqa: E402
from evalstop_gym.agents.policy import LearnedPolicy  # noqa: E402
from evalstop_gym.agents.train import train  # noqa: E402
from evalstop_gym.cli import main  # noqa: E402
from evalstop_gym.config import ConfigError  # noqa: E402
from evalstop_gym.envs.adapter import CLUSTER_ID, STOP_CONTROL_ID  # noqa: E402

# no validation round within the run (eval_freq > timesteps): model.zip is the final model
TINY_PPO = {"n_steps": 64, "batch_size": 32, "n_epochs": 2, "eval_freq": 10**6, "n_eval_episodes": 1,
            "eval_workload": {"jobs": 10}}
TINY_MASKABLE = {**TINY_PPO, "env_kwargs": {"reward_weights": {"quality": 0.0}, "jobs": 10},
                 "policy_kwargs": {"hidden": 8}}
VOLATILE = ("cpu_seconds", "wall_seconds", "command")   # config.json keys that differ from run to run


def trained_with_its_model(monkeypatch, env_id, algo, out, overrides, timesteps=128):
    """Train through ``evalstop_gym.agents.train.train`` and also keep the in-memory model it saved."""
    made = []
    real = train_module.algo_class

    def recording_class(name):
        cls = real(name)

        class Recorded(cls):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                made.append(self)

        return Recorded

    monkeypatch.setattr(train_module, "algo_class", recording_class)
    train(env_id, algo, out=out, timesteps=timesteps, seed=1, n_envs=1, overrides=overrides, echo=lambda _: None)
    monkeypatch.setattr(train_module, "algo_class", real)
    assert len(made) == 1
    return made[0]


def fixed_observations(env, n=40, seed=0):
    """Observations (and masks) met on one episode under a seeded random valid policy."""
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    seen = []
    for _ in range(n):
        mask = env.action_masks() if hasattr(env, "action_masks") else np.ones(env.action_space.n, dtype=bool)
        seen.append((obs.copy(), mask.copy()))
        obs, _, terminated, truncated, _ = env.step(int(rng.choice(np.flatnonzero(mask))))
        if terminated or truncated:
            obs, _ = env.reset(seed=seed + 1)
    return seen


def probabilities_and_values(model, obs, mask=None):
    import torch as th

    with th.no_grad():
        t = model.policy.obs_to_tensor(obs)[0]
        dist = model.policy.get_distribution(t, action_masks=mask) if mask is not None else \
            model.policy.get_distribution(t)
        return dist.distribution.probs.numpy(), model.policy.predict_values(t).numpy()


@pytest.mark.parametrize("env_id, algo, overrides", [(STOP_CONTROL_ID, "ppo", TINY_PPO),
                                                     (CLUSTER_ID, "maskable-ppo", TINY_MASKABLE)])
def test_a_loaded_model_acts_exactly_as_the_model_it_was_saved_from(monkeypatch, tmp_path, env_id, algo, overrides):
    memory = trained_with_its_model(monkeypatch, env_id, algo, tmp_path, overrides)
    loaded = LearnedPolicy.load(tmp_path)
    env = loaded.make_env(jobs=12)
    masked = algo == "maskable-ppo"
    for obs, mask in fixed_observations(env):
        kw = {"action_masks": mask} if masked else {}
        a_mem = int(memory.predict(obs, deterministic=True, **kw)[0])
        a_disk = int(loaded.model.predict(obs, deterministic=True, **kw)[0])
        assert a_mem == a_disk
        p_mem, v_mem = probabilities_and_values(memory, obs, mask if masked else None)
        p_disk, v_disk = probabilities_and_values(loaded.model, obs, mask if masked else None)
        np.testing.assert_allclose(p_disk, p_mem, rtol=0, atol=1e-6)
        np.testing.assert_allclose(v_disk, v_mem, rtol=0, atol=1e-6)
    # the weights themselves, parameter by parameter
    mem_params, disk_params = memory.policy.state_dict(), loaded.model.policy.state_dict()
    assert mem_params.keys() == disk_params.keys()
    for name in mem_params:
        np.testing.assert_array_equal(disk_params[name].numpy(), mem_params[name].numpy(), err_msg=name)
    # a whole episode through LearnedPolicy (our loader and env rebuild) matches one driven by the in-memory model
    from evalstop_gym.envs.adapter import rollout

    env = loaded.make_env(jobs=12)
    mem_agent = (lambda o: int(memory.predict(o, deterministic=True, action_masks=env.action_masks())[0])) \
        if masked else (lambda o: int(memory.predict(o, deterministic=True)[0]))
    assert rollout(env, mem_agent, seed=4)["metrics"] == loaded.run(seed=4, jobs=12)


# -- train flags ---------------------------------------------------------------------------

def test_every_train_flag_reaches_train(monkeypatch, capsys, tmp_path):
    """The parsed command line is exactly the call ``train`` gets (the CLI's seam to training)."""
    calls = []
    monkeypatch.setattr(train_module, "train", lambda *a, **kw: calls.append((a, kw)))
    argv = ["train", "--env", CLUSTER_ID, "--algo", "maskable-ppo", "--timesteps", "77", "--seed", "9",
            "--out", str(tmp_path / "m"), "--n-envs", "3", "--tensorboard", str(tmp_path / "tb"),
            "--hyperparams", str(tmp_path / "h.yml"), "--verbose", "2", "--calibration", "realistic", "--force"]
    assert main(argv) == 0
    assert calls == [((CLUSTER_ID, "maskable-ppo"), dict(out=str(tmp_path / "m"), timesteps=77, seed=9, n_envs=3,
                                                         tensorboard=str(tmp_path / "tb"),
                                                         hyperparams=str(tmp_path / "h.yml"), verbose=2,
                                                         calibration="realistic", force=True))]
    from test_cli_flags import flags_of

    assert flags_of("train") == {x for x in argv if x.startswith("--")}     # every flag is in this call


HYPERPARAMS = """EvalStop-StopControl-v0:
  n_timesteps: 1000000
  n_envs: 2
  policy: MlpPolicy
  policy_kwargs: {net_arch: [16]}
  env_wrapper: [evalstop_gym.agents.wrappers.JobFeatures]
  env_kwargs: {scheduler: fifo, jobs: 1}
  n_steps: 64
  batch_size: 32
  n_epochs: 1

evalstop-gym:
  EvalStop-StopControl-v0:
    eval_workload: {jobs: 10}
    eval_freq: 128
    n_eval_episodes: 1
"""


def test_train_command_gives_the_apis_model_and_config(capsys, tmp_path):
    """A real (tiny) run: the CLI's config.json and weights equal the API's for the same flags; each flag
    shows in the config or on disk (the file's own n_timesteps, n_envs and seed 0 would differ)."""
    hp = tmp_path / "h.yml"
    hp.write_text(HYPERPARAMS)
    argv = ["train", "--env", STOP_CONTROL_ID, "--algo", "ppo", "--timesteps", "256", "--seed", "3",
            "--out", str(tmp_path / "cli"), "--n-envs", "1", "--tensorboard", str(tmp_path / "tb"),
            "--hyperparams", str(hp), "--verbose", "1"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "rollout/" in printed and "trained ppo on EvalStop-StopControl-v0 for 256 steps with seed 3" in printed
    train(STOP_CONTROL_ID, "ppo", out=tmp_path / "api", timesteps=256, seed=3, n_envs=1, hyperparams=str(hp),
          echo=lambda _: None)
    cli_cfg = json.loads((tmp_path / "cli" / "config.json").read_text())
    api_cfg = json.loads((tmp_path / "api" / "config.json").read_text())
    assert {k: v for k, v in cli_cfg.items() if k not in VOLATILE} == \
        {k: v for k, v in api_cfg.items() if k not in VOLATILE}
    assert (cli_cfg["timesteps"], cli_cfg["seed"], cli_cfg["n_envs"]) == (256, 3, 1)
    assert cli_cfg["env_kwargs"]["scheduler"] == "fifo" and cli_cfg["hyperparams"]["n_steps"] == 64
    assert list((tmp_path / "tb").rglob("events.out.tfevents.*"))
    a, b = LearnedPolicy.load(tmp_path / "cli").model, LearnedPolicy.load(tmp_path / "api").model
    for name, value in a.policy.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), b.policy.state_dict()[name].numpy(), err_msg=name)
    # --verbose 0 (the default) prints no SB3 log
    assert main([*argv[:-1], "0", "--out", str(tmp_path / "quiet")]) == 0
    assert "rollout/" not in capsys.readouterr().out


# -- reproduce --model ---------------------------------------------------------------------

def test_reproduce_model_flag_adds_the_learned_row(capsys, tmp_path, monkeypatch):
    from test_cli_flags import REPRO, api_reproduce, cli_reproduce

    monkeypatch.chdir(tmp_path)
    train(STOP_CONTROL_ID, "ppo", out=tmp_path / "m", timesteps=128, n_envs=1, overrides=TINY_PPO,
          echo=lambda _: None)
    assert "--experiments" in REPRO
    args = ("--experiments", "E1", "--detectors", "patience")
    got = cli_reproduce(capsys, tmp_path / "cli", *args, "--model", str(tmp_path / "m"))
    assert got == api_reproduce(tmp_path / "api", names=("E1",), detectors=["patience"], model=str(tmp_path / "m"))
    without = cli_reproduce(capsys, tmp_path / "without", *args)
    learned = [r for r in got[0].values() if r["spec"]["stopper"] == "learned"]
    assert len(learned) == 1 and len(got[0]) == len(without[0]) + 1
    assert "learned stop-policy (ppo)" in got[1]["E1.csv"] and "learned" not in without[1]["E1.csv"]
    # the learned row's metrics are the model's own episode on that seed
    pol = LearnedPolicy.load(tmp_path / "m")
    assert learned[0]["metrics"] == pol.run(seed=0, jobs=20, scheduler="srtf-est")


def test_a_scheduler_names_its_stop_policy_so_that_it_loads_from_any_folder(monkeypatch, tmp_path):
    """A recipe names the stop-policy its scheduler plays over by a path from the working directory; the saved
    config names it by its absolute path, so the model loads (and fingerprints) from anywhere."""
    from evalstop_gym.agents.saved import fingerprint

    monkeypatch.chdir(tmp_path)
    train(STOP_CONTROL_ID, "ppo", out="stop", timesteps=64, n_envs=1, overrides=TINY_PPO, echo=lambda _: None)
    stops = {"evalstop_gym.agents.wrappers.HandCodedStops": {"stop_model": "stop", "work_conserving": True}}
    config = train(CLUSTER_ID, "maskable-ppo", out="sched", timesteps=64, n_envs=1,
                   overrides={**TINY_MASKABLE, "env_wrapper": [stops]}, echo=lambda _: None)
    assert config["env_wrapper"][0][1]["stop_model"] == str((tmp_path / "stop").resolve())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    policy = LearnedPolicy.load(tmp_path / "sched")
    assert policy.run(seed=3, jobs=8)["jobs"] == 8
    assert len(fingerprint(tmp_path / "sched")) == 12


@pytest.mark.parametrize("stop_model,says", [(5, "stop_model"), ("no/such/stop", "no/such/stop")])
def test_a_bad_stop_model_in_a_recipe_is_a_one_line_error_naming_it_as_written(tmp_path, stop_model, says):
    stops = {"evalstop_gym.agents.wrappers.HandCodedStops": {"stop_model": stop_model}}
    with pytest.raises(ConfigError, match=says):
        train(CLUSTER_ID, "maskable-ppo", out=tmp_path / "sched", timesteps=64, n_envs=1,
              overrides={**TINY_MASKABLE, "env_wrapper": [stops]}, echo=lambda _: None)
