"""The shipped TRL curve libraries (evalstop_gym/data/trl_library*.csv.gz): each loads without torch or TRL,
holds the runs its metadata lists (GRPO or RLOO and DPO), both labels occur, the label rule agrees
with a plain restatement of it (tests/label_reference.py), and ``curves compare`` runs on it."""

import json
import subprocess
import sys

import numpy as np
import pytest

from evalstop_gym.config import WorkloadConfig
from evalstop_gym.curvelog import label_run
from evalstop_gym.data import (TRL_LIBRARY, TRL_LIBRARY_META, TRL_LIBRARY_VARIED, TRL_LIBRARY_VARIED_META,
                               trl_library)
from label_reference import reference_label

LIBRARIES = {"first": (TRL_LIBRARY, TRL_LIBRARY_META), "varied": (TRL_LIBRARY_VARIED, TRL_LIBRARY_VARIED_META)}


@pytest.fixture(scope="module", params=sorted(LIBRARIES))
def library(request):
    path, meta_path = LIBRARIES[request.param]
    with open(meta_path) as f:
        return trl_library(path), json.load(f)


@pytest.fixture(scope="module")
def runs(library):
    return library[0]


@pytest.fixture(scope="module")
def meta(library):
    return library[1]


def reference(run, evals):
    """Gold and proxy at the start and at E even checkpoints (the proxy's start unknown: TRL logs no
    reward before the first step), labelled by the rule's plain restatement."""
    at = run.step[0] + np.arange(evals + 1) / evals * (run.step[-1] - run.step[0])
    logged = np.isfinite(run.proxy_reward)
    assert not logged[0]
    return reference_label(np.interp(at, run.step, run.extra["gold"]),
                           np.r_[np.nan, np.interp(at[1:], run.step[logged], run.proxy_reward[logged])])


def test_the_library_holds_the_runs_its_metadata_lists(runs, meta):
    assert len(runs) >= 48 and meta["runs"] == len(runs)
    assert sorted(runs) == sorted(s["name"] for s in meta["settings"])
    methods = {s["method"] for s in meta["settings"]}
    assert "dpo" in methods and methods & {"grpo", "rloo"}
    assert all(s["backend"] == "trl" and s["cpu_s"] > 0 for s in meta["settings"])
    # made by `curves generate --backend trl` (the shipped file) or by tools/trl_library.py, which runs it
    assert ("--backend trl" in meta["command"] or "tools/trl_library.py" in meta["command"]) and "trl" in meta["packages"]
    for run in runs.values():
        assert {"gold", "kl", "eval_items"} <= set(run.extra)
        assert np.all(np.isfinite(run.eval_score)) and run.step[0] == 0


@pytest.mark.parametrize("evals", [5, 10, 20])
def test_both_labels_and_the_rule_agrees_with_a_reference(runs, evals):
    labels = {name: label_run(run, evals=evals).hacking for name, run in runs.items()}
    assert 0 < sum(labels.values()) < len(labels)          # over-optimising and healthy runs both
    for name, run in runs.items():
        assert labels[name] == reference(run, evals), name


def test_over_optimising_runs_gain_proxy_while_gold_falls(runs):
    """The over-optimisation signature, in the runs that meet the rule: after the gold peak the proxy
    reward keeps rising (or holds) in most runs while gold falls."""
    hacking = [r for r in runs.values() if label_run(r, evals=10).hacking]
    rising = 0
    for r in hacking:
        p = int(np.argmax(r.extra["gold"]))
        proxy = r.proxy_reward
        after = proxy[max(p, 1):]
        rising += bool(after[-1] >= after[0] - 0.05)
    assert rising >= 0.6 * len(hacking)


def test_curves_compare_runs_on_the_library(runs):
    from evalstop_gym.commands.curves import compare

    rows = compare(runs, WorkloadConfig(jobs=40, seed=0), "fifo", k=2, seeds=1)
    by = {(r["curves"], r["stopper"]): r for r in rows}
    assert set(by) == {(c, s) for c in ("logged", "calibrated") for s in ("none", "evalstop k=2")}
    rate = np.mean([label_run(r, evals=WorkloadConfig().evals_per_job).hacking for r in runs.values()])
    assert by[("logged", "none")]["hacking_rate"] == pytest.approx(rate)
    assert by[("logged", "evalstop k=2")]["recall"] is not None


def test_cli_compare_and_label_read_the_shipped_file():
    r = subprocess.run([sys.executable, "-m", "evalstop_gym.cli", "curves", "label", TRL_LIBRARY, "--format", "csv"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "runs hacking" in r.stdout.splitlines()[-1]


def test_the_varied_library_is_the_grid_it_names_within_its_cpu_budget():
    with open(TRL_LIBRARY_VARIED_META) as f:
        meta = json.load(f)
    runs = trl_library(TRL_LIBRARY_VARIED)
    settings = meta["settings"]
    assert meta["grid"] == "varied" and len(runs) == len(settings) == 96
    assert {s["task"] for s in settings} == {"copy", "add"} and {s["dim"] for s in settings} == {80, 160}
    rl = [s for s in settings if s["method"] in ("grpo", "rloo")]
    assert 2 * sum(s["kl_coef"] == 0 for s in rl) == len(rl)    # half the RL runs without a KL penalty
    assert meta["cpu_s_total"] <= 2 * 3600                      # the library's budget: 2 CPU-hours
    for run in runs.values():                                   # the start and 18 evals, 360 steps
        assert len(run.step) == 19 and run.step[-1] == 360
