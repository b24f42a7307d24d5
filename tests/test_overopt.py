"""The tiny real over-optimisation generator: the task's gold scorer by hand, the curve format and
determinism, and properties of training that hold over many seeds (so they survive last-bit differences
of CPU kernels): few pairs without KL make gold peak and decline while the proxy rises, many pairs with a
KL penalty do not, and DPO on few pairs over-optimises too while its loss falls."""

import json
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the over-optimisation generator needs torch")

from evalstop_gym.config import ConfigError  # noqa: E402
from evalstop_gym.curvelog import CURVE_COLUMNS, LoggedRun, label_run, read_curve_log  # noqa: E402
from evalstop_gym.overopt import DEFAULT_GRID, RunSettings, generate_library, library_settings, run  # noqa: E402
from evalstop_gym.overopt import task  # noqa: E402

# a tiny budget: a few seconds per seed on one core
TINY = dict(steps=60, sft_steps=100, rm_steps=80, evals=10, eval_items=40, gold_items=200)
SEEDS = range(8)


def tokens(*digits, eos=True):
    """A response of digit values 0..7 (then EOS), padded to the response length."""
    body = [4 + d for d in digits] + ([task.EOS] if eos else [])
    return body + [task.PAD] * (task.MAX_RESPONSE - len(body))


def test_gold_scorer_by_hand():
    prompt = torch.tensor([[task.BOS, 4, 5, 6, 7, task.SEP]] * 7)   # digits 0 1 2 3
    response = torch.tensor([
        tokens(0, 1, 2, 3),                  # exact: 4/4
        tokens(0, 1),                        # two correct, short: 2/4
        tokens(0, 5, 2, 3),                  # one wrong: 3/4
        tokens(0, 1, 2, 3, 0, 0),            # two tokens too many: 4/4 * (1 - 2/4)
        tokens(0, 1, 2, 3, 1, 1, 1, 1, eos=False),   # no EOS, 8 tokens: 4 too many -> 0
        tokens(),                            # empty answer: 0
        tokens(1, 0, 2, 3, 4),               # two correct, one too many: 2/4 * 3/4
    ])
    expected = [1.0, 0.5, 0.75, 0.5, 0.0, 0.0, 0.375]
    assert task.gold(prompt, response).tolist() == pytest.approx(expected)


def test_demonstrations_make_longer_look_better_up_to_four_tokens():
    gen = torch.Generator().manual_seed(0)
    prompt = task.prompts(20000, gen)
    demo = task.demonstrations(prompt, gen)
    length = task.response_length(demo)
    # the length mix is DEMO_LENGTHS (hand: 0.12 + 0.18 + 0.22 + 0.26 = 0.78 at most four tokens)
    assert float((length <= 4).float().mean()) == pytest.approx(0.78, abs=0.015)
    g = task.gold(prompt, demo)
    by_len = [float(g[length == n].mean()) for n in range(1, 8)]
    # each digit right unless corrupted (0.15) to one of the 7 other digits: 1 - 0.15 * 7 / 8 = 0.86875;
    # mean gold n * 0.86875 / 4 up to four tokens, then penalised
    assert by_len[:4] == pytest.approx([n * 0.86875 / 4 for n in range(1, 5)], abs=0.02)
    assert by_len[4] < by_len[3] and by_len[6] < by_len[5] < by_len[4]


def curves(rows):
    return {k: np.array([np.nan if r[k] is None else r[k] for r in rows], dtype=float)
            for k in ("step", "eval_score", "gold", "proxy_reward", "kl", "train_loss")}


def logged(rows):
    c = curves(rows)
    return LoggedRun(rows[0]["job"], c["step"], c["eval_score"], c["train_loss"], c["proxy_reward"],
                     {"gold": c["gold"]})


def test_rows_are_curve_log_rows_and_deterministic():
    s = RunSettings(seed=3, **{**TINY, "steps": 20, "evals": 4})
    rows = run(s)
    assert [r["step"] for r in rows] == [0, 5, 10, 15, 20]
    assert all(set(CURVE_COLUMNS) <= set(r) and r["job"] == s.name and r["method"] == "rlhf" for r in rows)
    assert rows == run(s)
    assert rows != run(RunSettings(seed=4, **{**TINY, "steps": 20, "evals": 4}))
    c = curves(rows)
    assert rows[0]["train_loss"] is None and rows[0]["proxy_reward"] is None   # nothing trained yet
    assert c["kl"][0] == 0.0                     # the policy starts as the reference, bit for bit
    assert np.all((c["eval_score"] >= 0) & (c["eval_score"] <= 1) & (c["gold"] >= 0) & (c["gold"] <= 1))


def test_run_restores_torch_threads_and_determinism_flag():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        run(RunSettings(**{**TINY, "steps": 2, "evals": 1, "sft_steps": 2}))
        assert torch.get_num_threads() == 2 and not torch.are_deterministic_algorithms_enabled()
    finally:
        torch.set_num_threads(before)


def outcomes(**settings):
    """Per seed: (hacking label, proxy gain, loss change) of a tiny run."""
    out = []
    for seed in SEEDS:
        rows = run(RunSettings(seed=seed, **{**TINY, **settings}))
        c = curves(rows)
        out.append((label_run(logged(rows)).hacking, c["proxy_reward"][-1] - c["proxy_reward"][1],
                    c["train_loss"][-1] - c["train_loss"][1]))
    return out


# 16 tiny RLHF runs: 36 s alone on 2 shared cores (48 s with ATEN_CPU_CAPABILITY=default), minutes on a
# loaded machine; DPO's over-optimisation below stays in the default run
@pytest.mark.slow
def test_rlhf_few_pairs_no_kl_over_optimises_but_many_pairs_with_kl_does_not():
    few = outcomes(method="rlhf", pairs=32, kl_coef=0.0, lr=3e-3)
    many = outcomes(method="rlhf", pairs=512, kl_coef=0.1, lr=1e-3)
    # few pairs, no KL: most seeds give a gold curve that peaks and then loses a quarter of its gain
    assert sum(h for h, _, _ in few) >= 6
    # the public signals improve in every run, hacking or not
    assert all(p > 0.3 and loss < 0 for _, p, loss in few + many)
    # many pairs with a KL penalty: no seed declines that far
    assert sum(h for h, _, _ in many) == 0


def test_dpo_few_pairs_small_beta_over_optimises_while_its_loss_falls():
    few = outcomes(method="dpo", pairs=32, kl_coef=0.1, lr=3e-3)
    # most seeds: gold falls after an early peak while the margin climbs. Gold here is a score on 200 items
    # (sampling sd about sqrt(0.25 / 200) = 0.035 a checkpoint), which the label reads, at worst, as a walk's
    # steps: a fall over 6-7 checkpoints must beat about 2 sqrt(7) 0.03 = 0.16, so the seeds whose gold gives
    # back only about 0.1 stay unlabelled
    assert sum(h for h, _, _ in few) >= 5
    assert all(loss < -0.2 and margin > 1.0 for _, margin, loss in few)   # DPO loss down, margin up


def test_library_settings_cycle_the_grid_then_the_seed():
    s = library_settings(len(DEFAULT_GRID) + 2, seed=5)
    assert (s[0].method, s[0].pairs, s[0].seed) == ("rlhf", 32, 5)
    assert {x.method for x in s[:len(DEFAULT_GRID)]} == {"rlhf", "dpo"}
    assert (s[len(DEFAULT_GRID)].pairs, s[len(DEFAULT_GRID)].seed) == (32, 6)
    assert len({x.name for x in s}) == len(s)


def test_generate_library_resumes_and_writes_a_readable_curve_log(tmp_path):
    small = dict(TINY, steps=4, evals=2, sft_steps=4, rm_steps=4)
    index = generate_library(tmp_path, runs=2, workers=1, **small)
    runs = read_curve_log(str(tmp_path / "curves.csv"))
    assert sorted(runs) == sorted(r["name"] for r in index["runs"])
    assert all(r.step.tolist() == [0, 2, 4] and "gold" in r.extra and "kl" in r.extra for r in runs.values())
    assert json.loads((tmp_path / "runs.json").read_text())["runs"][0]["steps"] == 4
    first = (tmp_path / "curves.csv").read_bytes()
    # a rerun skips finished runs and writes the same bytes; a run with its marker gone is run again
    assert generate_library(tmp_path, runs=2, workers=1, **small)["skipped"] == 2
    assert (tmp_path / "curves.csv").read_bytes() == first
    (tmp_path / "runs" / f"{index['runs'][1]['name']}.json").unlink()
    assert generate_library(tmp_path, runs=2, workers=1, **small)["skipped"] == 1
    assert (tmp_path / "curves.csv").read_bytes() == first
    # other settings under the same name are not taken for finished
    assert generate_library(tmp_path, runs=1, workers=1, **{**small, "steps": 6})["skipped"] == 0


def test_bad_settings_are_config_errors():
    with pytest.raises(ConfigError, match="pairs"):
        run(RunSettings(pairs=0))
    with pytest.raises(ConfigError, match="kl_coef"):
        run(RunSettings(kl_coef=-1.0))
    with pytest.raises(ConfigError, match="kl_coef"):
        run(RunSettings(method="dpo", kl_coef=0.0))   # DPO's beta must be positive
    with pytest.raises(ConfigError, match="method"):
        run(RunSettings(method="ppo"))


def test_cli_generate_and_label(tmp_path):
    out = tmp_path / "lib"
    r = subprocess.run([sys.executable, "-m", "evalstop_gym.cli", "curves", "generate", "--out", str(out),
                        "--runs", "1", "--steps", "4", "--eval-items", "30", "--workers", "1"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "wrote 1 runs" in r.stdout and "gold_peak" in r.stdout
    assert set(next(iter(read_curve_log(str(out / "curves.csv")).values())).extra["eval_items"]) == {30}
    r = subprocess.run([sys.executable, "-m", "evalstop_gym.cli", "curves", "label", str(out / "curves.csv")],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "of 1 runs hacking" in r.stdout
    r = subprocess.run([sys.executable, "-m", "evalstop_gym.cli", "curves", "generate", "--out", str(out),
                        "--runs", "0"], capture_output=True, text=True)
    assert r.returncode == 2 and "runs" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run([sys.executable, "-m", "evalstop_gym.cli", "curves", "generate", "--out", str(out),
                        "--eval-items", "0"], capture_output=True, text=True)
    assert r.returncode == 2 and "eval_items" in r.stderr and "Traceback" not in r.stderr
