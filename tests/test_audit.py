"""The leak audit: its AUC against a reference, and every shipped world checked for an early giveaway."""

import functools
import hashlib
import os

import numpy as np
import pytest

from evalstop_gym import audit as au
from evalstop_gym.api import simulate
from evalstop_gym.cli import main
from evalstop_gym.config import CALIBRATIONS, WorkloadConfig
from evalstop_gym.data import TRL_LIBRARY, TRL_LIBRARY_VARIED, trl_library

LEAK_CEILING = 0.80       # best early AUC a synthetic world may show, whatever the real runs show
LIBRARY_MARGIN = 0.05     # ... and at most this much above the real TRL library's (issue 25)
SEEDS = range(700, 716)   # audit seeds: the package tunes nothing on 700-739
# the pre-peak figure on all of them: a world's runs that have not peaked by eval 2 hold few hacking runs, and an
# AUC over 11 of them (grounded's DPO runs on 700-715) has a standard error of about 0.08 (0.730 there, 0.614 on
# 716-739 with 14); on 700-739 every grounded row but DPO eval 3 (10 hacking runs, 0.642) has 25 or more, and the
# best, 0.685, is RLHF eval 3's over 29 (grounded as refitted at 1aefe96, held_gold_lag)
PRE_PEAK_SEEDS = range(700, 740)


# the real runs a world is held to: the library it is fitted to (a world file's provenance.source), the shipped
# 48-run library for the worlds set by hand
FITTED_TO = {"grounded": TRL_LIBRARY_VARIED}


@functools.lru_cache(maxsize=None)
def library_rows(path: str = TRL_LIBRARY):
    """Audit rows of a TRL library (classifier included: 48 or 96 runs, a few seconds)."""
    return au.audit(au.logged_runs(trl_library(path)))


@functools.lru_cache(maxsize=None)
def library_rlhf_auc(path: str = TRL_LIBRARY):
    """Best early AUC over all of a library's RLHF runs (GRPO and RLOO, the job type of the worlds' largest
    audited rows; single features and classifier)."""
    from evalstop_gym.fit import job_type_of

    return au.best_early_auc(au.audit(au.logged_runs({n: r for n, r in trl_library(path).items()
                                                      if job_type_of(n) == "rlhf"})))


def reference(calibration: str) -> str:
    return FITTED_TO.get(calibration, TRL_LIBRARY)


def test_each_world_is_held_to_the_library_it_is_fitted_to():
    from evalstop_gym.config import GROUNDED_WORLD
    from evalstop_gym.files import load_yaml

    prov = load_yaml(GROUNDED_WORLD)["provenance"]
    with open(FITTED_TO["grounded"], "rb") as f:
        assert prov["sha256"] == hashlib.sha256(f.read()).hexdigest()
    assert os.path.basename(prov["source"]) == os.path.basename(FITTED_TO["grounded"])


def detection_bar(library_rlhf_auc):
    # over all runs a visible decline counts, and a world shaped like its real runs shows its cliffs as early as
    # they do: that is detection, not a leak (the pre-peak test holds the leak to 0.80). A world may be as
    # readable over all runs as real runs of the same job type, not more
    return library_rlhf_auc + LIBRARY_MARGIN


def test_rank_auc_hand_cases_and_reference():
    assert au.rank_auc([1, 2, 3, 4], [0, 0, 1, 1]) == 1.0
    assert au.rank_auc([4, 3, 2, 1], [0, 0, 1, 1]) == 0.0
    assert au.rank_auc([1, 1, 1, 1], [0, 1, 0, 1]) == 0.5            # ties count half
    assert au.rank_auc([1, 2, 2, 3], [0, 0, 1, 1]) == pytest.approx(7 / 8)   # pairs: 3 wins + 1 tie of 4
    assert au.oriented(0.2) == pytest.approx(0.8)
    rng = np.random.default_rng(0)
    v, y = rng.integers(0, 20, 500).astype(float), rng.random(500) < 0.4
    pos, neg = v[y], v[~y]
    brute = np.mean((pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :]))
    assert au.rank_auc(v, y) == pytest.approx(brute)


def test_audit_finds_a_planted_leak():
    n = 400
    rng = np.random.default_rng(1)
    y = rng.random(n) < 0.5
    obs = rng.normal(size=(n, 10)) + 3.0 * y[:, None] * (np.arange(10) == 1)   # leak in score@2 only
    runs = au.Runs(obs, np.full((n, 10), np.nan), rng.normal(size=(n, 10)), {"gpus": rng.integers(1, 3, n) * 1.0}, y)
    rows = au.audit_runs(runs, "rlhf", classifier=False)
    assert rows[0].best_feature_auc < 0.6
    assert rows[1].best_feature in ("score@2", "dscore@2") and rows[1].best_feature_auc > 0.95


def test_pre_peak_rows_tell_a_leak_from_detection():
    # 40 healthy runs peak at the last checkpoint; of 40 hacking runs, 20 peak at checkpoint 1 and fall by 1.0
    # at checkpoint 2 (a visible decline: detection), 20 peak at checkpoint 5 and look like the healthy ones
    # until then. Eval 2 reads the label from all runs, but not from the pre-peak runs, where nothing tells
    # the runs apart.
    n = 80
    y = np.arange(n) >= 40
    early = np.arange(n) >= 60                 # hacking runs that peak at checkpoint 1
    obs = np.tile(np.linspace(0.1, 1.0, 10), (n, 1))
    obs[early, 1:] -= 1.0
    peak = np.where(y, np.where(early, 1, 5), 10)
    runs = au.Runs(obs, np.full((n, 10), np.nan), np.full((n, 10), np.nan), {}, y, peak)
    row = au.audit_runs(runs, "rlhf", evals=(2,), classifier=False)[0]
    # all runs, score@2: of the 40 x 40 hacking-healthy pairs the 20 decliners win none and the 20 others tie
    # (half each): AUC (0 + 20 * 40 / 2) / 1600 = 0.25, oriented 0.75
    assert row.best_feature_auc == pytest.approx(0.75)
    assert (row.pre_peak_runs, row.pre_peak_hacking) == (60, 20)    # peaks at 1 have passed by eval 2
    assert row.pre_peak_feature_auc == pytest.approx(0.5)           # 20 vs 40 identical runs: all ties
    assert au.best_pre_peak_auc([row]) == row.pre_peak_auc == row.pre_peak_feature_auc
    # too few pre-peak runs of a label: n/a, never a number
    row1 = au.audit_runs(au.Runs(obs, runs.proxy, runs.loss, {}, y, np.where(y, 1, 10)), "rlhf", evals=(2,),
                         classifier=False)[0]
    assert row1.pre_peak_hacking == 0 and np.isnan(row1.pre_peak_auc)
    assert "| 40 (0) | n/a |" in au.table([row1])


def test_peak_checkpoint_is_the_first_maximum_from_the_start():
    start = np.array([0.9, 0.1, 0.1])
    gold = np.array([[0.5, 0.6], [0.3, 0.3], [0.2, 0.4]])
    assert au.peak_checkpoint(start, gold).tolist() == [0, 1, 2]


@pytest.mark.parametrize("calibration", sorted(CALIBRATIONS))
def test_no_world_reads_the_label_before_the_peak_better_than_real_runs(calibration):
    # the leak figure: readability among runs that have not peaked yet, against the same figure of real runs
    library = au.best_pre_peak_auc(library_rows(reference(calibration)))
    assert np.isfinite(library), au.table(library_rows(reference(calibration)))
    rows = au.audit(au.world_runs(WorkloadConfig(calibration=calibration), PRE_PEAK_SEEDS), classifier=False)
    assert au.best_pre_peak_auc(rows) <= min(LEAK_CEILING, library + LIBRARY_MARGIN), (library, au.table(rows))


@pytest.mark.parametrize("calibration", sorted(CALIBRATIONS))
def test_no_single_public_feature_gives_the_label_away_early(calibration):
    rows = au.audit(au.world_runs(WorkloadConfig(calibration=calibration), SEEDS), classifier=False)
    assert rows, "every shipped world has hacking and healthy runs to audit"
    auc = library_rlhf_auc(reference(calibration))
    assert max(r.best_feature_auc for r in rows) <= detection_bar(auc), (auc, au.table(rows))


@pytest.mark.slow   # measured 10-22 s per world (load average 3 on 2 cores; scikit-learn CV), 3 worlds;
#                     183 s for the paper world alone at load average 15
@pytest.mark.parametrize("calibration", sorted(CALIBRATIONS))
def test_no_classifier_reads_the_label_early(calibration):
    rows = au.audit(au.world_runs(WorkloadConfig(calibration=calibration), SEEDS))
    auc = library_rlhf_auc(reference(calibration))
    assert au.best_early_auc(rows) <= detection_bar(auc), (auc, au.table(rows))


def test_the_library_reference_is_the_shipped_library():
    # the bar the worlds are held to comes from real runs: 48 TRL runs, both labels, a finite AUC
    runs = au.logged_runs(trl_library())
    assert sum(r.hacking.size for r in runs.values()) == len(trl_library())
    assert 0.5 < au.best_early_auc(au.audit(runs, classifier=False)) < 1.0


def test_paper_world_keeps_the_abstracts_detection_regime():
    # the abstract: EvalStop k=2 precision 98%, recall 99%; >= 91% precision at sigma <= 0.05 (it states
    # no recall there: the 0.80 floor only checks that hacking runs still fall clearly at that noise)
    for noise, p_min, r_min in ((0.02, 0.95, 0.95), (0.05, 0.91, 0.80)):
        ms = [simulate("srtf-est", "evalstop", seed=s, noise=noise) for s in range(720, 725)]
        assert np.mean([m["precision"] for m in ms]) >= p_min, (noise, ms[0])
        assert np.mean([m["recall"] for m in ms]) >= r_min, (noise, ms[0])


def test_cli_audit_prints_a_table_and_refuses_bad_seeds(capsys):
    assert main(["audit", "--seeds", "700-702", "--jobs", "100", "--no-classifier"]) == 0
    out = capsys.readouterr().out
    assert "| rlhf | 1 |" in out and "best early AUC" in out and "labelled hacking: " in out
    assert main(["audit", "--seeds", "9-3"]) == 2
    assert "seeds" in capsys.readouterr().err


def test_cli_audit_reads_a_curve_log(tmp_path, capsys):
    from evalstop_gym.curvelog import write_curve_log
    from evalstop_gym.workload import generate

    w = generate(WorkloadConfig(seed=3, jobs=200))
    rows = []
    for j in np.flatnonzero(w.job_type == 2):
        gold = np.concatenate([[w.curves.start[j]], w.curves.gold[j]])
        obs = np.concatenate([[w.curves.start[j]], w.observed[j]])
        for i in range(11):
            rows.append({"job": f"rlhf-{j}", "step": i, "eval_score": obs[i], "gold": gold[i],
                         "proxy_reward": w.curves.proxy[j, max(i - 1, 0)], "train_loss": w.curves.loss[j, max(i - 1, 0)]})
    path = tmp_path / "runs.csv"
    write_curve_log(path, rows)
    runs = au.log_runs(str(path))
    np.testing.assert_array_equal(runs["rlhf"].hacking, w.hacking[w.job_type == 2])   # the same gold rule
    assert main(["audit", "--curves", str(path), "--no-classifier"]) == 0
    assert "| rlhf | 1 |" in capsys.readouterr().out


def test_the_configuration_is_audited_alone_and_beside_the_curves():
    # planted: the label is exactly "has a KL penalty" (a configuration field), the curves are pure noise
    rng = np.random.default_rng(4)
    n = 200
    y = np.arange(n) % 2 == 0
    config = {"kl_coef": np.where(y, 0.0, 0.1), "learning_rate": rng.uniform(0.5, 2.0, n),
              "data_size": np.full(n, np.nan)}
    runs = au.Runs(rng.normal(size=(n, 10)), np.full((n, 10), np.nan), np.full((n, 10), np.nan), {}, y,
                   np.full(n, 5), config)
    assert np.isnan(au.audit_runs(runs, "rlhf", evals=(1,), classifier=False)[0].config_auc)   # not asked
    row = au.audit_runs(runs, "rlhf", evals=(1,), classifier=False, config=True)[0]
    assert row.config_auc == 1.0 and row.with_config_auc == 1.0          # kl_coef splits the labels
    assert row.pre_peak_config_auc == 1.0
    assert row.best_auc < 0.7                                              # the curves alone do not
    assert "config:data_size" not in au.config_features(runs)            # no varying value: no feature
    plain = au.audit_runs(au.Runs(runs.observed, runs.proxy, runs.loss, {}, y), "rlhf", evals=(1,), classifier=False,
                          config=True)
    assert np.isnan(plain[0].config_auc) and np.isnan(plain[0].with_config_auc)


def test_a_logged_run_s_configuration_comes_from_the_manifest_beside_its_log():
    from evalstop_gym.data import TRL_LIBRARY

    settings = au.manifest_settings(TRL_LIBRARY)
    assert settings is not None and len(settings) == len(trl_library())
    s = settings["trl-dpo-pairs128-kl0.1-lr0.001-seed0"]
    assert au.run_config(s) == {"kl_coef": 0.1, "learning_rate": 0.001, "data_size": 128.0, "model_size": 106560.0}
    assert np.isnan(au.run_config(None)["kl_coef"])
    assert au.manifest_settings("nowhere/runs.csv") is None


def test_labelled_counts_each_job_type_and_all():
    def runs(labels):
        n = len(labels)
        return au.Runs(np.zeros((n, 3)), np.zeros((n, 3)), np.zeros((n, 3)), {}, np.array(labels, bool))

    got = au.labelled({"rlhf": runs([1, 0, 1, 1]), "lora": runs([0, 0])})
    assert got == {"rlhf": (3, 4), "lora": (0, 2), "all": (3, 6)}
