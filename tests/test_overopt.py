"""The tiny real overoptimization generator: determinism, the curve format, and that gold genuinely
peaks and declines with few preference pairs and no KL penalty but not with many pairs and a KL penalty."""

import json
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the overoptimization generator needs torch")

from evalstop_gym.config import ConfigError  # noqa: E402
from evalstop_gym.curvelog import CURVE_COLUMNS, label_run, read_curve_log  # noqa: E402
from evalstop_gym.overopt import GOLD_AT_PI0, RunSettings, generate_library, library_settings, run  # noqa: E402


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def curves(rows):
    return {k: np.array([r[k] for r in rows]) for k in ("step", "eval_score", "proxy_reward", "kl", "train_loss")}


def test_rows_are_curve_log_rows_and_deterministic():
    s = RunSettings(seed=3, steps=40, log_every=5, actions=64)
    rows = run(s)
    assert [r["step"] for r in rows] == list(range(0, 41, 5))
    assert all(set(CURVE_COLUMNS) <= set(r) and r["job"] == s.name for r in rows)
    assert rows == run(s)
    assert rows != run(RunSettings(seed=4, steps=40, log_every=5, actions=64))
    c = curves(rows)
    assert c["eval_score"][0] == pytest.approx(GOLD_AT_PI0, abs=1e-5)   # gold scaled: pi0 scores 0.1
    assert c["kl"][0] == pytest.approx(0.0, abs=1e-6) and np.all(c["kl"] >= -1e-6)
    assert c["proxy_reward"][0] == pytest.approx(0.0, abs=1e-5)         # proxy normalized under pi0


def test_proxy_rises_and_loss_falls_for_every_run():
    for s in (RunSettings(seed=1, pairs=16), RunSettings(seed=1, pairs=1024, kl_coef=1.0)):
        c = curves(run(s))
        assert c["proxy_reward"][-1] > c["proxy_reward"][0] + 0.5
        assert c["train_loss"][-1] < c["train_loss"][0]


def labels(pairs, kl, seeds):
    out = []
    for seed in seeds:
        rows = run(RunSettings(seed=seed, pairs=pairs, kl_coef=kl))
        c = curves(rows)
        out.append((label_run(read_rows(rows)), c["eval_score"]))
    return out


def read_rows(rows):
    from evalstop_gym.curvelog import LoggedRun

    c = curves(rows)
    return LoggedRun(rows[0]["job"], c["step"].astype(float), c["eval_score"], c["train_loss"], c["proxy_reward"])


def test_gold_peaks_and_declines_with_few_pairs_and_no_kl_but_not_with_many_pairs_and_kl():
    few = labels(16, 0.0, range(4))
    # few pairs, no KL: gold genuinely peaks early and falls far (below where it started, for some)
    hacked = [(lab, gold) for lab, gold in few if lab.hacking]
    assert len(hacked) >= 2
    for lab, gold in hacked:
        assert gold.max() - gold[-1] > 0.2 and lab.peak_progress < 0.6
    # many pairs and a KL penalty: gold rises and stays
    for lab, gold in labels(1024, 1.0, range(4)):
        assert not lab.hacking
        assert gold[-1] > gold[0] + 0.2 and gold.max() - gold[-1] < 0.02


def test_library_settings_cycle_the_grid_then_the_seed():
    s = library_settings(14, seed=5)
    assert [(x.pairs, x.kl_coef, x.seed) for x in s[:2]] == [(16, 0.0, 5), (16, 0.3, 5)]
    assert (s[12].pairs, s[12].kl_coef, s[12].seed) == (16, 0.0, 6)
    assert len({x.name for x in s}) == 14


def test_generate_library_writes_a_readable_curve_log(tmp_path):
    index = generate_library(tmp_path, runs=3, workers=1, steps=20, actions=32)
    runs = read_curve_log(str(tmp_path / "curves.csv"))
    assert sorted(runs) == sorted(r["name"] for r in index["runs"])
    assert all(r.step.tolist() == [0, 10, 20] for r in runs.values())
    assert "kl" in next(iter(runs.values())).extra
    assert json.loads((tmp_path / "runs.json").read_text())["runs"][0]["steps"] == 20


def test_bad_settings_are_config_errors():
    with pytest.raises(ConfigError, match="pairs"):
        run(RunSettings(pairs=0))
    with pytest.raises(ConfigError, match="kl_coef"):
        run(RunSettings(kl_coef=-1.0))


def test_cli_generate_and_label(tmp_path):
    out = tmp_path / "lib"
    r = subprocess.run([sys.executable, "-m", "evalstop_gym.cli", "curves", "generate", "--out", str(out),
                        "--runs", "2", "--steps", "20", "--workers", "1"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "wrote 2 runs" in r.stdout and (out / "curves.csv").exists()
    r = subprocess.run([sys.executable, "-m", "evalstop_gym.cli", "curves", "generate", "--out", str(out),
                        "--runs", "0"], capture_output=True, text=True)
    assert r.returncode == 2 and "runs" in r.stderr
