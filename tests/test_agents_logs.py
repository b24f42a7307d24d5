"""``train`` leaves SB3's usual logs in the model folder: a Monitor CSV per training env, EvalCallback's
``evaluations.npz`` and TensorBoard events, readable with SB3's and TensorBoard's own loaders."""

import numpy as np
import pytest

pytest.importorskip("stable_baselines3", reason="training needs the rl extra")

from evalstop_gym.agents.train import train  # noqa: E402

TINY = {"n_steps": 64, "batch_size": 32, "n_epochs": 1, "eval_freq": 128, "n_eval_episodes": 1,
        "eval_workload": {"jobs": 10}}


def test_train_writes_monitor_csv_evaluations_npz_and_tensorboard_into_the_model_folder(tmp_path):
    from stable_baselines3.common.monitor import load_results
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "m"
    config = train("EvalStop-StopControl-v0", "ppo", out=out, timesteps=256, n_envs=1, seed=0, overrides=TINY,
                   echo=lambda _: None)
    assert [p.name for p in out.glob("*.monitor.csv")] == ["0.monitor.csv"]
    episodes = load_results(str(out))              # SB3's own reader of Monitor files
    assert len(episodes) >= 1 and {"r", "l", "t"} <= set(episodes.columns)
    assert episodes["l"].sum() <= 256               # finished episodes within the steps trained
    with np.load(out / "evaluations.npz") as ev:     # EvalCallback's file
        assert set(ev.files) >= {"timesteps", "results", "ep_lengths"}
        rounds = [{"timesteps": int(t), "mean_return": float(np.mean(r))}
                  for t, r in zip(ev["timesteps"], ev["results"])]
    assert rounds == config["validation_rounds"] and len(rounds) == 2     # 256 steps, a round every 128
    events = list((out / "tensorboard").rglob("events.out.tfevents.*"))
    assert len(events) == 1
    acc = EventAccumulator(str(events[0].parent))
    acc.Reload()
    assert {"rollout/ep_rew_mean", "eval/mean_reward"} <= set(acc.Tags()["scalars"])
    # --force with fewer envs leaves no monitor file of the earlier run
    (out / "1.monitor.csv").write_text("stale")
    train("EvalStop-StopControl-v0", "ppo", out=out, timesteps=128, n_envs=1, seed=0, overrides=TINY,
          force=True, echo=lambda _: None)
    assert [p.name for p in out.glob("*.monitor.csv")] == ["0.monitor.csv"]
