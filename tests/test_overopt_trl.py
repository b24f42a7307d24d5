"""The TRL backend of the over-optimisation generator: its tokenizer speaks the task's token ids, bad
settings name the field, and one tiny TRL run end to end (SFT, RewardTrainer, GRPOTrainer / DPOTrainer,
the gold evals) writes a curve log that is exactly its own trainer_state.json read back, resumes, and
repeats byte for byte."""

import json
import os

import numpy as np
import pytest

pytest.importorskip("trl", reason="the TRL backend needs the live extra")
torch = pytest.importorskip("torch")

from evalstop_gym.config import ConfigError  # noqa: E402
from evalstop_gym.curvelog import read_curve_log  # noqa: E402
from evalstop_gym.overopt import generate_library, task  # noqa: E402
from evalstop_gym.overopt.library import library_settings  # noqa: E402
from evalstop_gym.overopt.trl_backend import TRL_GRID, TRLRunSettings, build_tokenizer, parameter_counts, text  # noqa: E402
from evalstop_gym.curvelog import read_trainer_state  # noqa: E402

# one run in seconds: 12 steps, 4 evals, small eval sets, short SFT and reward-model fits
TINY = dict(steps=12, evals=4, eval_items=20, gold_items=100, sft_steps=50, rm_steps=20, dim=16, rm_dim=16)


def test_tokenizer_ids_are_the_task_token_ids():
    tok = build_tokenizer()
    prompt = torch.tensor([[task.BOS, 4, 5, 6, 7, task.SEP]])
    response = [4, 5, 6, 7, 4, task.EOS, task.PAD, task.PAD]
    assert text(prompt[0]) == "<bos> 0 1 2 3 <sep>"
    assert text(response) == "0 1 2 3 0 <eos>"
    # TRL concatenates prompt and completion text, and appends EOS to a completion without one
    assert tok(text(prompt[0]) + " " + text(response), add_special_tokens=False)["input_ids"] == \
        prompt[0].tolist() + response[:6]
    assert tok("<bos> 3 <sep> 1 2" + tok.eos_token, add_special_tokens=False)["input_ids"] == [1, 7, 2, 5, 6, 3]
    assert (tok.pad_token_id, tok.eos_token_id, tok.bos_token_id) == (task.PAD, task.EOS, task.BOS)


@pytest.mark.parametrize("field, value, allowed", [
    ("method", "ppo", "grpo, rloo, dpo"), ("steps", 10, "multiple of evals"), ("kl_coef", -0.1, ">="),
    ("group", 1, ">= 2"), ("rm_dim", 15, "even"),
])
def test_bad_settings_name_the_field(field, value, allowed):
    with pytest.raises(ConfigError, match=field) as e:
        TRLRunSettings(**{field: value}).validate()
    assert allowed in str(e.value)
    with pytest.raises(ConfigError, match="kl_coef"):
        TRLRunSettings(method="dpo", kl_coef=0.0).validate()   # DPO's beta must be positive


def gpt2_parameters(d: int, blocks: int, head: int) -> int:
    """A GPT-2's parameters by hand (vocabulary 12, 16 positions, inner width 2d, tied LM head; ``head``: the
    output layer's own weights, 0 for the LM, d for the classifier's bias-free score)."""
    block = 4 * d + (3 * d * d + 3 * d) + (d * d + d) + (d * 2 * d + 2 * d) + (2 * d * d + d)
    return task.VOCAB * d + 16 * d + blocks * block + 2 * d + head


def test_the_default_policy_has_at_least_a_tenth_of_a_million_parameters():
    s = TRLRunSettings()
    counts = parameter_counts(s)
    assert counts["policy"] == gpt2_parameters(s.dim, s.layers, 0) >= 100_000
    assert counts["reward_model"] == gpt2_parameters(s.rm_dim, s.rm_layers, s.rm_dim)   # a knob, 9,536 at 32
    assert parameter_counts(TRLRunSettings(method="dpo", kl_coef=0.1))["reward_model"] is None


def test_the_grid_has_every_method_and_distinct_names():
    assert {g["method"] for g in TRL_GRID} == {"grpo", "rloo", "dpo"} and len(TRL_GRID) == 24
    names = [s.name for s in library_settings(48, backend_name="trl")]
    assert len(set(names)) == 48 and names[0].endswith("seed0") and names[-1].endswith("seed1")


def tiny_run(out, method):
    """One tiny run of ``method`` into ``out``; checks its files and returns (settings index, LoggedRun)."""
    grid = ({"method": method, "pairs": 32, "kl_coef": 0.1, "lr": 3e-3},)
    index = generate_library(out, runs=1, grid=grid, backend_name="trl", **TINY)
    (meta,) = index["runs"]
    runs_dir = out / "runs"
    run_meta = json.loads((runs_dir / f"{meta['name']}.json").read_text())
    assert run_meta["backend"] == "trl" and run_meta["cpu_s"] > 0
    run = read_curve_log(out / "curves.csv")[meta["name"]]
    assert run.step.tolist() == [0, 3, 6, 9, 12]                           # step 0 and every steps / evals
    assert np.all((run.extra["gold"] >= 0) & (run.extra["gold"] <= 1))
    assert run.extra["eval_items"].tolist() == [20] * 5
    assert np.isnan(run.train_loss[0]) and np.all(np.isfinite(run.train_loss[1:]))
    assert np.all(np.isfinite(run.proxy_reward[1:])) and abs(run.extra["kl"][0]) < 1e-3   # KL 0 at the start
    # the curve log is the Trainer's own log_history read back (rounded to 6 places)
    (state,) = read_trainer_state(runs_dir / f"{meta['name']}.trainer_state.json").values()
    for column in ("eval_score", "train_loss", "proxy_reward"):
        np.testing.assert_allclose(getattr(run, column), getattr(state, column), atol=1e-6)
    np.testing.assert_allclose(run.extra["gold"], state.extra["gold"], atol=1e-6)
    assert os.path.isdir(out / "models")   # the SFT folder TRL loaded policy and reference from
    return grid, run


def test_one_tiny_dpo_run_end_to_end(tmp_path):
    # measured: 6.3 s on 2 nearly idle cores (DPOTrainer, no reward model); 24-49 s under a load average of 13-20
    tiny_run(tmp_path, "dpo")


# measured: 5.2 s on 2 nearly idle cores (two GRPO runs, reward model included); 50 s under a load average of 13
def test_a_grpo_run_resumes_and_repeats_byte_for_byte(tmp_path):
    grid, _ = tiny_run(tmp_path / "a", "grpo")
    assert generate_library(tmp_path / "a", runs=1, grid=grid, backend_name="trl", **TINY)["skipped"] == 1
    generate_library(tmp_path / "b", runs=1, grid=grid, backend_name="trl", **TINY)
    assert (tmp_path / "a" / "curves.csv").read_bytes() == (tmp_path / "b" / "curves.csv").read_bytes()


def test_cli_backend_trl_refuses_bad_steps_before_any_run(tmp_path):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "evalstop_gym.cli", "curves", "generate", "--backend", "trl", "--out",
                        str(tmp_path / "lib"), "--runs", "1", "--steps", "7"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and "steps" in r.stderr and "multiple of evals (15)" in r.stderr, r.stderr
    assert not (tmp_path / "lib" / "runs").exists() or not any((tmp_path / "lib" / "runs").iterdir())
