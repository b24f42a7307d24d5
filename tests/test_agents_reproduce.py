"""`reproduce --model PATH`: a learned row in E1 and at every noise level of E3, resumable like the rest."""

import pytest

pytest.importorskip("sb3_contrib")

import evalstop_gym  # noqa: E402
from evalstop_gym.agents.train import train  # noqa: E402
from evalstop_gym.experiments import reproduce  # noqa: E402
from evalstop_gym.experiments.spec import NOISE_SWEEP  # noqa: E402

TINY = {"n_steps": 256, "batch_size": 128, "n_epochs": 2, "eval_freq": 512, "n_eval_episodes": 1,
        "eval_workload": {"jobs": 10}}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("model")
    train("EvalStop-StopControl-v0", "ppo", out=out, timesteps=512, n_envs=1, overrides=TINY, echo=lambda _: None)
    return out


def test_reproduce_adds_a_learned_row_to_e1_and_e3(model_dir, tmp_path):
    res = reproduce(["E1", "E3"], seeds=2, out=tmp_path, base=evalstop_gym.WorkloadConfig(jobs=30), workers=1,
                    progress=False, plots=False, echo=lambda _: None, model=str(model_dir))
    e1 = [r for r in res.rows["E1"] if r["stopper"] == "learned"]
    e3 = [r for r in res.rows["E3"] if r["stopper"] == "learned"]
    assert len(e1) == 1 and e1[0]["scheduler"] == "srtf-est" and e1[0]["jct_gain_pct"] is not None
    assert [r["x"] for r in e3] == list(NOISE_SWEEP)
    assert "learned stop-policy (ppo)" in (tmp_path / "E1.md").read_text()
    # a second call reuses every run, the learned ones included
    again = reproduce(["E1"], seeds=2, out=tmp_path, base=evalstop_gym.WorkloadConfig(jobs=30), workers=1,
                      progress=False, plots=False, echo=lambda _: None, model=str(model_dir))
    assert again.new_runs == 0 and again.rows["E1"] == res.rows["E1"]
