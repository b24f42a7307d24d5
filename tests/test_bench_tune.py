"""The bench's tuner: the same budget for every family, validation seeds only, the rule fixed in code."""

import json
import os

import pytest

pytest.importorskip("optuna")

from evalstop_gym.bench import suite as suite_mod  # noqa: E402
from evalstop_gym.bench.arms import TUNED_BEST  # noqa: E402
from evalstop_gym.bench.run import RESULTS_FILE, TUNE_FILE, run_bench  # noqa: E402
from evalstop_gym.bench.suite import Row, suite_hash  # noqa: E402
from evalstop_gym.bench.tune import f1_objective, objective  # noqa: E402
from evalstop_gym.seeds import VALIDATION  # noqa: E402

TOY = (Row("toy-paper", jobs=30, gpus=16, seeds=(1000, 1001)),)


def test_the_rule_by_hand():
    none = {"r": {"avg_jct_h": [10.0, 20.0], "delivered_quality_regret": [0.3, 0.3]}}
    cap = {"r": {"avg_jct_h": [8.0, 16.0], "delivered_quality_regret": [0.02, 0.04]}}
    ok = {"r": {"avg_jct_h": [5.0, 15.0], "delivered_quality_regret": [0.03, 0.03]}}   # regret 0.03 = the cap
    assert objective(ok, none, cap) == (pytest.approx((0.5 + 0.75) / 2), True)
    bad = {"r": {"avg_jct_h": [5.0, 15.0], "delivered_quality_regret": [0.03, 0.04]}}
    assert objective(bad, none, cap) == (pytest.approx(1.625), False)


def test_the_f1_rule_by_hand():
    # per episode 2TP / (2TP + FP + FN): 6/8, 0/2 (stopped no hacking run: 0), none (no hacking run, no stop)
    arm = {"r": {"true_positives": [3, 0, 0], "false_positives": [1, 0, 0], "false_negatives": [1, 2, 0],
                 "compute_waste_gpu_h": [10.0, 20.0, 30.0]},
           "s": {"true_positives": [1], "false_positives": [0], "false_negatives": [0], "compute_waste_gpu_h": [40.0]}}
    assert f1_objective(arm, {}, {}) == (pytest.approx(-(0.75 + 0.0 + 1.0) / 3), True, pytest.approx(25.0))
    nothing = {"r": {"true_positives": [0], "false_positives": [0], "false_negatives": [0], "compute_waste_gpu_h": [1.0]}}
    assert f1_objective(nothing, {}, {}) == (0.0, True, 1.0)


def test_rows_played_as_given_must_hold_validation_seeds(tmp_path):
    from evalstop_gym.bench.tune import tune_families
    from evalstop_gym.config import ConfigError
    from evalstop_gym.experiments.runner import ResultStore

    with pytest.raises(ConfigError, match="validation"):
        tune_families(TOY, ResultStore(tmp_path / "t.jsonl"), budget=1, families=["none"], validation=None,
                      progress=False)
    with pytest.raises(ConfigError, match="schedulers"):
        tune_families(TOY, ResultStore(tmp_path / "t.jsonl"), budget=1, families=["none"], schedulers=["nope"],
                      progress=False)
    assert not (tmp_path / "t.jsonl").exists() or not (tmp_path / "t.jsonl").read_text()


def test_tune_gives_every_family_the_budget_on_validation_seeds_and_records_it(tmp_path, monkeypatch):
    from evalstop_gym.bench import tune

    monkeypatch.setitem(suite_mod.SUITES, "toy", TOY)
    suite_hash.cache_clear()
    calls = []
    real = tune.tune_families
    monkeypatch.setattr(tune, "tune_families",
                        lambda *a, **k: calls.append(k) or real(*a, **{**k, "families": ["none", "evalstop"]}))
    out = run_bench(["evalstop"], suite_name="toy", out=tmp_path, tune=True, budget=3, progress=False,
                    echo=lambda _t: None)
    suite_hash.cache_clear()
    t = out["tuning"]
    assert t["trials"] == 3 and set(t["families"]) == {"none", "evalstop"}
    assert t["families"]["evalstop"]["searched"] == ["k"] and "k" in t["families"]["evalstop"]["params"]
    assert t["best"] in t["families"].values() and TUNED_BEST in out["references"]
    seeds = {json.loads(line)["spec"]["workload"]["seed"] for line in (tmp_path / TUNE_FILE).open()}
    assert seeds and all(s in VALIDATION for s in seeds)
    assert json.loads((tmp_path / RESULTS_FILE).read_text())["tuning"] == t
    again = run_bench(["evalstop"], suite_name="toy", out=tmp_path / "b", tuned=tmp_path / RESULTS_FILE,
                      progress=False, echo=lambda _t: None)
    assert again["references"][TUNED_BEST] == out["references"][TUNED_BEST]


def undated(page) -> str:
    """A page less the date its results files were written (a rescore writes them again, with the same figures)."""
    import re

    text = page.read_text() if isinstance(page, os.PathLike) else page
    return re.sub(r"played \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "played DATE", text)


def test_one_command_regenerates_the_leaderboard_and_resumes(tmp_path, monkeypatch, capsys):
    # measured: under 10 CPU seconds with pytest start-up (47-61 s wall at a load average of 20 on 2 cores)
    from evalstop_gym.bench import regenerate as regen
    from evalstop_gym.bench import tune
    from evalstop_gym.cli import main

    monkeypatch.setitem(suite_mod.SUITES, "toy", TOY)
    suite_hash.cache_clear()
    real = tune.tune_families
    monkeypatch.setattr(tune, "tune_families", lambda *a, **k: real(*a, **{**k, "families": ["none", "evalstop"]}))
    monkeypatch.setattr(regen, "builtin_pairs", lambda: ["fifo", "fifo+evalstop", "sjf-est+droptest"])
    out = tmp_path / "lb"
    argv = ["bench", "--leaderboard-run", str(out), "--suite", "toy", "--budget", "2", "--quiet",
            "--leaderboard-out", str(tmp_path / "copy.md")]
    assert main(argv) == 0
    board = (out / regen.BOARD).read_text()
    # the published copy is rendered from the results files shipped beside it, with the run's table
    from evalstop_gym.bench import results as res

    shipped = sorted((tmp_path / "copy").glob("*.json"))
    assert [p.name for p in shipped] == ["1-scored.json"]   # it holds the tuning too
    copy = (tmp_path / "copy.md").read_text()
    assert copy == res.leaderboard([os.path.relpath(p) for p in shipped])
    # the same table; its commands name the tuning as each page's files hold it: the run's, or the shipped copy
    tuned_from, tuned_copy = f" --tuned {out / regen.SCORED / RESULTS_FILE}`", f" --tuned {os.path.relpath(shipped[0])}`"
    assert [x.replace(tuned_copy, tuned_from) for x in copy.splitlines() if x.startswith("| ")] \
        == [x for x in board.splitlines() if x.startswith("| ")]
    assert tuned_from in board and tuned_copy in copy
    scored = json.loads((out / regen.SCORED / RESULTS_FILE).read_text())
    tuning = json.loads((out / regen.TUNED / RESULTS_FILE).read_text())["tuning"]
    assert scored["tuning"] == tuning and TUNED_BEST in scored["references"]
    labels = [c["label"] for c in scored["policies"]]
    # every tuned family's pair and every built-in pair, each once (a family tuned to a default pair is one row)
    assert {tuning["families"][f]["label"] for f in ("none", "evalstop")} <= set(labels)
    assert {"fifo", "fifo + evalstop", "sjf-est + droptest"} <= set(labels) and len(labels) == len(set(labels))
    assert all(f"| {label} |" in board or f"| {label} (*below the bar*) |" in board for label in labels)
    assert "Generated by `evalstop-gym bench --leaderboard-run" in board
    # resumed: nothing is played again, the tuning is reused as it is, the page is the same
    files = {p: p.read_text() for p in out.rglob("*.jsonl")}
    capsys.readouterr()
    assert main([a for a in argv if a != "--quiet"]) == 0
    assert "tuning: reusing" in capsys.readouterr().err
    assert {p: p.read_text() for p in out.rglob("*.jsonl")} == files and undated(out / regen.BOARD) == undated(board)
    # interrupted mid-scoring (the last runs lost, no results file yet): only what is missing is played
    runs = out / regen.SCORED / "runs.jsonl"
    lines = runs.read_text().splitlines(keepends=True)
    runs.write_text("".join(lines[:-3]))
    (out / regen.SCORED / RESULTS_FILE).unlink()
    assert main(argv) == 0
    assert sorted(runs.read_text().splitlines()) == sorted(x.rstrip("\n") for x in lines)
    assert undated(out / regen.BOARD) == undated(board)
    suite_hash.cache_clear()


def test_leaderboard_run_refuses_flags_it_sets_itself(capsys):
    from evalstop_gym.cli import main

    assert main(["bench", "--leaderboard-run", "x", "--policy", "fifo", "--tune"]) == 2
    assert main(["bench", "--learned", "--policy", "fifo"]) == 2
    err = capsys.readouterr().err
    assert "drop --policy, --tune" in err and "--learned goes with --leaderboard-run" in err


def test_every_tuned_parameter_is_a_parameter_of_its_stopper():
    # a renamed detector parameter must not silently leave the tuner's space (divergence's proxy_rise did)
    from evalstop_gym.baselines import stopper_params
    from evalstop_gym.bench.tune import SPACES

    for family, space in SPACES.items():
        assert set(space) <= set(stopper_params(family)), (family, sorted(set(space) - set(stopper_params(family))))
