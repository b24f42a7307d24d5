"""`evalstop-gym train` / `evaluate` and `python -m evalstop_gym.agents.train`: bad input is one line and exit 2;
evaluation is deterministic across processes."""

import json
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("sb3_contrib")

from evalstop_gym.agents.evaluate import evaluate  # noqa: E402
from evalstop_gym.agents.policy import LearnedPolicy  # noqa: E402
from evalstop_gym.agents.train import train  # noqa: E402
from evalstop_gym import WorkloadConfig  # noqa: E402
from evalstop_gym.cli import main  # noqa: E402

STOP_ID = "EvalStop-StopControl-v0"
TINY = {"n_steps": 128, "batch_size": 64, "n_epochs": 1, "eval_freq": 256, "n_eval_episodes": 1,
        "eval_workload": {"jobs": 10}}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny-model")
    train(STOP_ID, "ppo", out=out, timesteps=256, n_envs=1, overrides=TINY, echo=lambda _: None)
    return out


def one_line_error(capsys, argv, *needles):
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in lines[0], lines[0]
    assert "\x1b" not in lines[0]   # no terminal colour codes (torch colours some of its messages)
    return lines[0]


@pytest.mark.parametrize("argv, needles", [
    (["--env", STOP_ID, "--algo", "sac"], ("algo='sac'", "ppo")),
    (["--env", "CartPole-v1", "--algo", "ppo"], ("env='CartPole-v1'", "EvalStop-Cluster-v0")),
    (["--env", "EvalStop-Cluster-v0", "--algo", "dqn"], ("dqn.yml has no hyperparameters",)),
    (["--env", STOP_ID, "--algo", "ppo", "--timesteps", "0"], ("timesteps=0",)),
])
def test_train_bad_input(capsys, tmp_path, argv, needles):
    one_line_error(capsys, ["train", *argv, "--out", str(tmp_path)], *needles)


def test_train_bad_hyperparameter_file(capsys, tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text("EvalStop-StopControl-v0: [unclosed\n")
    one_line_error(capsys, ["train", "--env", STOP_ID, "--algo", "ppo", "--hyperparams", str(bad),
                            "--out", str(tmp_path)], "not valid YAML")
    bad.write_text("EvalStop-StopControl-v0:\n  n_timesteps: 10\n  n_envs: 1\n  no_such_keyword: 3\n")
    line = one_line_error(capsys, ["train", "--env", STOP_ID, "--algo", "ppo", "--hyperparams", str(bad),
                                   "--out", str(tmp_path)], "no_such_keyword")
    assert f"{bad}: EvalStop-StopControl-v0.no_such_keyword=3" in line and "ppo.yml" not in line


GOOD_ENTRY = "EvalStop-StopControl-v0:\n  n_timesteps: 10\n  n_envs: 1\n"


@pytest.mark.parametrize("algo, lines, needle", [
    ("ppo", "  learning_rate: fast\n", "EvalStop-StopControl-v0.learning_rate='fast' is invalid: must be a number > 0"),
    ("ppo", "  n_steps: 0\n", "EvalStop-StopControl-v0.n_steps=0 is invalid: must be an integer in [1, "),
    ("ppo", "  policy: BogusPolicy\n", "EvalStop-StopControl-v0.policy='BogusPolicy' is invalid: must be one of "
                                      "MlpPolicy"),
    ("ppo", "  policy: evalstop_gym.agents.nowhere.Policy\n", "policy='evalstop_gym.agents.nowhere.Policy' is invalid: must be one of"),
    ("ppo", "  gamma: 5\n", "EvalStop-StopControl-v0.gamma=5 is invalid: must be a number in [0, 1]"),
    ("ppo", "  buffer_size: 1000\n", "buffer_size=1000 is invalid: unknown key for ppo"),
    ("dqn", "  n_epochs: 3\n", "n_epochs=3 is invalid: unknown key for dqn"),
    ("ppo", "  train_workload: {jobs: 1}\n", "put training workload fields in env_kwargs"),
    ("ppo", "  normalize: true\n", "an RL Zoo key that evalstop-gym train does not support"),
    ("ppo", "  env_wrapper: [elsewhere.JobFeatures]\n", "env_wrapper='elsewhere.JobFeatures' is invalid"),
    ("ppo", "  policy_kwargs: 'dict(net_arch=[8])'\n", "strings are not evaluated"),
    ("a2c", "  learning_rate: lin_x\n", "learning_rate='lin_x' is invalid"),
    ("ppo", "evalstop-gym:\n  EvalStop-StopControl-v0:\n    gamma: 5\n",
     "evalstop-gym.EvalStop-StopControl-v0.gamma=5 is invalid: unknown key: the evalstop-gym section takes"),
    ("ppo", "evalstop-gym:\n  EvalStop-StopControl-v0:\n    eval_workload: {speed: 2}\n",
     "eval_workload.speed=2 is invalid: unknown keyword"),
    ("ppo", "evalstop-gym:\n  EvalStop-StopControl-v0:\n    vec_env: threads\n",
     "evalstop-gym.EvalStop-StopControl-v0.vec_env='threads' is invalid: must be one of subprocess, in-process"),
])
def test_hyperparameter_values_are_checked_before_training(capsys, tmp_path, algo, lines, needle):
    bad = tmp_path / "mine.yml"
    bad.write_text(GOOD_ENTRY + lines)
    line = one_line_error(capsys, ["train", "--env", STOP_ID, "--algo", algo, "--hyperparams", str(bad),
                                   "--out", str(tmp_path / "out")], needle)
    assert str(bad) in line
    assert not (tmp_path / "out").exists()   # nothing written before the check


def test_train_refuses_to_overwrite_a_model_without_force(capsys, model_dir):
    one_line_error(capsys, ["train", "--env", STOP_ID, "--algo", "ppo", "--out", str(model_dir)],
                   "already holds a model", "--force")


def test_train_reports_progress_in_one_line_summaries_when_not_on_a_terminal(tmp_path):
    tiny = json.dumps(TINY)
    code = ("import json, sys\nfrom evalstop_gym.agents.train import train\n"
            f"train('{STOP_ID}', 'ppo', out=sys.argv[1], timesteps=256, n_envs=1, overrides=json.loads(sys.argv[2]),"
            " echo=print)")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "m"), tiny], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    reports = [ln for ln in r.stderr.splitlines() if ln.startswith("train: ")]
    assert 5 <= len(reports) <= 10 and reports[-1].startswith("train: 256/256 steps (100%)"), r.stderr


def test_evaluate_missing_model(capsys, tmp_path):
    one_line_error(capsys, ["evaluate", "--policy", str(tmp_path / "nowhere")], "no such model file")


def test_evaluate_model_without_config(capsys, model_dir, tmp_path):
    shutil.copy(model_dir / "model.zip", tmp_path / "model.zip")
    one_line_error(capsys, ["evaluate", "--policy", str(tmp_path)], "config.json")


def test_evaluate_corrupt_model(capsys, model_dir, tmp_path):
    shutil.copy(model_dir / "config.json", tmp_path / "config.json")
    (tmp_path / "model.zip").write_bytes(b"PK\x03\x04 this is not a model")
    one_line_error(capsys, ["evaluate", "--policy", str(tmp_path)], "cannot be loaded as a ppo model")


def test_evaluate_model_trained_for_other_spaces(capsys, model_dir, tmp_path):
    import gymnasium as gym
    from stable_baselines3 import PPO

    # a PPO model of the raw 30-feature observation beside a config that says JobFeatures (18)
    PPO("MlpPolicy", gym.make(STOP_ID, jobs=5), n_steps=64, batch_size=32, device="cpu").save(tmp_path / "model.zip")
    shutil.copy(model_dir / "config.json", tmp_path / "config.json")
    one_line_error(capsys, ["evaluate", "--policy", str(tmp_path)], "trained for other spaces")


def test_evaluate_corrupt_config(capsys, model_dir, tmp_path):
    shutil.copy(model_dir / "model.zip", tmp_path / "model.zip")
    (tmp_path / "config.json").write_text("{not json")
    one_line_error(capsys, ["evaluate", "--policy", str(tmp_path)], "config.json, line 1: is not valid JSON")
    (tmp_path / "config.json").write_text(json.dumps({"env_id": STOP_ID, "env_kwargs": {}, "env_wrapper": [],
                                                      "algo": "sac"}))
    one_line_error(capsys, ["evaluate", "--policy", str(tmp_path)], "'sac'")


@pytest.mark.parametrize("argv, needle", [   # read by the bench's parser, so its messages
    (["--policy", "nope"], "'nope' is not a policy: schedulers fifo"),
    (["--policy", "evalstop:q=3"], "is not a parameter of stopper 'evalstop' (it takes: k, min_delta, warmup, warmup_progress)"),
    (["--policy", "evalstop", "--seed", "899995"], "held-out test seeds"),
])
def test_evaluate_bad_policy_or_seeds(capsys, argv, needle):
    one_line_error(capsys, ["evaluate", *argv], needle)


def test_evaluate_reads_a_users_class_as_bench_does(tmp_path, monkeypatch):
    """``module:Class`` works in evaluate as in ``bench --policy``: a user's subclass of EvalStop over the same
    base scheduler plays exactly the built-in's episodes, and stoppers named alone run over --scheduler."""
    (tmp_path / "evaluate_rules.py").write_text("from evalstop_gym.baselines.evalstop import EvalStop\n\n\n"
                                          "class MyStop(EvalStop):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    ev = evaluate(["evaluate_rules:MyStop:k=3", "evalstop:k=3"], scheduler="fifo", seeds=2,
                  base=WorkloadConfig(jobs=30))
    mine, builtin = (ev.per_seed[row["arm"]] for row in ev.rows)
    assert [row["arm"] for row in ev.rows] == ["fifo + evaluate_rules:MyStop k=3", "fifo + evalstop k=3"]
    assert mine == builtin and any(m["jobs_stopped"] for m in mine)


def test_reproduce_with_a_missing_model(capsys, tmp_path):
    one_line_error(capsys, ["reproduce", "--experiments", "E1", "--model", str(tmp_path / "none"),
                            "--out", str(tmp_path / "out")], "no such model file")


def test_cli_processes_exit_2_and_evaluate_is_deterministic_across_processes(model_dir):
    r = subprocess.run([sys.executable, "-m", "evalstop_gym.agents.train", "--env", STOP_ID, "--algo", "sac", "--out", "x"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "algo='sac'" in r.stderr
    argv = ["evaluate", "--policy", str(model_dir), "--policy", "evalstop", "--seeds", "2", "--jobs", "30",
            "--noise", "0.05", "--json"]
    r = subprocess.run([sys.executable, "-m", "evalstop_gym.cli", *argv], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    here = evaluate([str(model_dir), "evalstop"], seeds=2, base=WorkloadConfig(jobs=30, noise=0.05))
    assert json.loads(r.stdout) == json.loads(json.dumps(here.rows))


@pytest.mark.parametrize("algo, tiny", [("a2c", {"n_steps": 16}), ("dqn", {"learning_starts": 64, "buffer_size": 1000})])
def test_evalstop_train_reads_the_same_zoo_files(tmp_path, algo, tiny):
    config = train(STOP_ID, algo, out=tmp_path, timesteps=256, n_envs=1, echo=lambda _: None,
                   overrides={**tiny, "eval_freq": 128, "n_eval_episodes": 1, "eval_workload": {"jobs": 5}},
                   progress=False)
    assert config["algo"] == algo and config["env_wrapper"] == [["JobFeatures", {}]]
    assert config["train_workload"] == {"jobs": 1, "noise": 0.05} and config["env_kwargs"] == {"scheduler": "srtf-est"}
    assert LearnedPolicy.load(tmp_path).run(seed=0, jobs=5)["jobs"] == 5
