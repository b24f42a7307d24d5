"""The experiment suite's pieces: statistics, experiment specs, tables and claim verdicts.

Runner, resume and backends are in ``test_experiments_runner.py``; the
command line in ``test_experiments_cli.py``.
"""

import math

import pytest

from evalstop_gym.config import ConfigError, WorkloadConfig
from evalstop_gym.experiments.spec import (EXPERIMENTS, Check, Claim, Experiment, Point, Registry,
                                           build_suite, parse_names)
from evalstop_gym.experiments.stats import paired_gain, summarize
from evalstop_gym.experiments.tables import claim_verdicts, csv_table, fmt_cell, markdown_table

# -- stats --------------------------------------------------------------------------


def test_summary_is_mean_sample_std_and_t_interval():
    s = summarize([1.0, 2.0, 3.0, None])       # None: undefined on that seed, dropped
    assert (s.n, s.mean, s.std) == (3, 2.0, 1.0)
    half = 4.302652729911275 / math.sqrt(3)    # t(0.975, df=2) * std / sqrt(n)
    assert s.ci_lo == pytest.approx(2.0 - half) and s.ci_hi == pytest.approx(2.0 + half)


def test_t_quantile_is_students_and_asked_of_scipy_once_per_df(monkeypatch):
    from evalstop_gym.experiments import stats

    stats._t_975.cache_clear()
    asked = []
    scipy_stats = stats._scipy_stats
    monkeypatch.setattr(stats, "_scipy_stats", lambda: asked.append(1) or scipy_stats())
    # Student's t table, 0.975 quantile, df 1, 2 and 9
    assert [round(stats._t_975(df), 3) for df in (1, 2, 9)] == [12.706, 4.303, 2.262]
    summarize([1.0, 2.0, 4.0])      # df 2 again: from the cache
    assert len(asked) == 3
    stats._t_975.cache_clear()


def test_summary_of_nothing_or_one_value():
    assert summarize([None, None]).mean is None
    one = summarize([5.0])
    assert one.mean == 5.0 and one.std is None and one.ci_lo is None


def test_paired_gain_is_relative_reduction_with_paired_tests():
    base = [10.0, 20.0, 40.0, 10.0, 20.0, 40.0]
    treated = [9.0, 18.0, 36.0, 8.0, 17.0, 35.0]  # 10, 10, 10, 20, 15, 12.5 percent lower
    g = paired_gain(base, treated)
    assert g.gain_pct == pytest.approx((10 + 10 + 10 + 20 + 15 + 12.5) / 6)
    assert g.ci_lo < g.gain_pct < g.ci_hi
    assert g.p_t < 0.01
    assert g.p_wilcoxon == pytest.approx(2 / 2 ** 6)  # exact: every difference has the same sign


def test_paired_gain_undefined_tests_are_none_not_nan():
    same = paired_gain([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    assert same.gain_pct == 0.0 and same.p_t is None and same.p_wilcoxon is None
    shift = paired_gain([2.0, 3.0], [1.0, 2.0])      # constant difference: t undefined
    assert shift.p_t is None and shift.p_wilcoxon is not None
    with pytest.raises(ValueError):
        paired_gain([1.0], [1.0, 2.0])


# -- specs --------------------------------------------------------------------------
TODAY = Registry(("fifo",), {"none": (), "evalstop": ("k",)})
FULL = Registry(("fifo", "sjf-est", "srtf-est", "lossaware", "tiresias"),
                {"none": (), "evalstop": ("k",), "stopat": ("p",), "lossplateau": ("window", "tolerance"),
                 "patience": ("patience",), "cusum": ("threshold",)})


def arms(exp):
    return [p.arm for p in exp.points]


def test_full_registry_e1_has_every_stopper_on_srtf_est():
    (e1,) = build_suite(["E1"], registry=FULL)
    assert arms(e1) == ["none", "stopat p=0.65", "lossplateau", "evalstop k=2", "patience", "cusum"]
    assert {p.scheduler for p in e1.points} == {"srtf-est"}
    assert dict(e1.points[3].params) == {"k": 2}
    assert not any("srtf-est" in n for n in e1.notes)


def test_missing_policies_are_skipped_with_a_note():
    e1, e2, e3 = build_suite(["E1", "E2", "E3"], registry=TODAY)
    assert arms(e1) == ["none", "evalstop k=2"]
    assert {p.scheduler for p in e1.points} == {"fifo"}
    notes = " ".join(e1.notes)
    assert "'srtf-est' is not registered yet: ran on 'fifo'" in notes
    assert "'stopat' is not registered yet" in notes and "'lossplateau' is not registered yet" in notes
    assert "sjf-est, srtf-est, lossaware, tiresias" in " ".join(e2.notes)
    assert "no noise-robust detectors" in " ".join(e3.notes)


def test_e2_pairs_every_base_scheduler_with_its_own_baseline():
    (e2,) = build_suite(["E2"], registry=FULL)
    expected = [(s, stopper) for s in FULL.schedulers for stopper in ("none", "evalstop")]
    assert [(p.x, p.stopper) for p in e2.points] == expected
    for p in e2.points:
        if p.stopper == "evalstop":
            assert e2.baseline_of(p) == Point("none", p.scheduler, x=p.scheduler)


def test_sweeps_change_the_workload_and_pair_within_a_sweep_value():
    e3, e4, e5, e6 = build_suite(["E3", "E4", "E5", "E6"], registry=FULL)
    assert sorted({dict(p.workload)["noise"] for p in e3.points}) == [0.01, 0.02, 0.05, 0.08, 0.10, 0.12]
    assert sorted({p.x for p in e4.points}) == [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]
    assert [p.x for p in e5.points] == [None, 1, 2, 3, 4, 5]
    assert {p.stopper for p in e3.points} == {"none", "evalstop", "patience", "cusum"}
    for exp in (e3, e4, e6):
        for p in exp.points:
            b = exp.baseline_of(p)
            assert (b is None) == (p.stopper == "none")
            assert b is None or (b.workload == p.workload and b.stopper == "none")
    assert all(e5.baseline_of(p) == e5.points[0] for p in e5.points[1:])   # one none for every k
    assert {(dict(p.workload)["evals_per_job"], dict(p.workload)["noise"]) for p in e6.points} == {
        (e, s) for e in (5, 10, 20) for s in (0.02, 0.05)}


def test_a_stopper_parameter_that_does_not_exist_is_dropped_with_a_note():
    reg = Registry(("fifo",), {"none": (), "evalstop": ("k",), "stopat": ("progress",)})
    (e1,) = build_suite(["E1"], registry=reg)
    assert "stopat" in arms(e1)
    assert any("takes no parameter 'p'" in n for n in e1.notes)


def test_names_and_choices_are_validated():
    assert parse_names(None) == list(EXPERIMENTS) == parse_names("all")
    assert parse_names("e3, E1,E3") == ["E3", "E1"]
    for bad in ("E99", "E1,nope", ","):
        with pytest.raises(ConfigError, match="experiments"):
            parse_names(bad)
    with pytest.raises(ConfigError, match="base_scheduler"):
        build_suite(["E1"], registry=TODAY, base_scheduler="srtf-est")   # named explicitly: no fallback
    with pytest.raises(ConfigError, match="detectors"):
        build_suite(["E3"], registry=FULL, detectors=["evalstop"])      # an anchor, not a detector
    (e3,) = build_suite(["E3"], registry=FULL, detectors=["cusum"])
    assert {p.stopper for p in e3.points} == {"none", "evalstop", "cusum"}


# -- tables and claims ------------------------------------------------------------
def toy_experiment(claims=()):
    points = (Point("none", "fifo", x=0.1), Point("evalstop", "fifo", "evalstop", x=0.1))
    columns = ("precision", "jct_gain", "jct_gain_p")
    return Experiment("EX", "toy", "?", "noise", points, columns, ("precision",), claims)


ROWS = [
    {"x": 0.1, "arm": "none", "stopper": "none", "scheduler": "fifo", "precision": None,
     "precision_std": None},
    {"x": 0.1, "arm": "evalstop", "stopper": "evalstop", "scheduler": "fifo", "precision": 0.9712,
     "precision_std": 0.0104, "jct_gain_pct": 8.64, "jct_gain_ci_lo": 7.06, "jct_gain_ci_hi": 10.2,
     "jct_gain_p_t": 0.0004, "jct_gain_p_wilcoxon": 0.0123},
]


def test_cells_show_mean_std_gain_ci_and_both_p_values():
    assert fmt_cell(ROWS[1], "precision") == "0.971 ± 0.010"
    assert fmt_cell(ROWS[1], "jct_gain") == "8.6% [7.1, 10.2]"
    assert fmt_cell(ROWS[1], "jct_gain_p") == "<0.001 / 0.012"
    assert fmt_cell(ROWS[0], "precision") == "n/a" and fmt_cell(ROWS[0], "jct_gain") == "baseline"
    md = markdown_table(toy_experiment(), ROWS)
    assert md.splitlines()[0].split("|")[1:4] == [" noise   ", " arm      ", " precision     "]
    header, *lines = csv_table(toy_experiment(), ROWS).splitlines()
    assert header.startswith("noise,arm,stopper,scheduler,precision")
    assert lines[0].startswith("0.1,none,none,fifo,,")       # undefined -> empty cell


def test_claim_verdicts_yes_no_and_not_run():
    evalstop = lambda r: r["stopper"] == "evalstop"  # noqa: E731
    claims = (Claim("precision", "98%", evalstop, (Check("precision", ">=", 0.95),)),
              Claim("JCT", "9%", evalstop,
                    (Check("jct_gain_pct", ">=", 10.0), Check("jct_gain_p_t", "<", 0.05))),
              Claim("stopat", "~65%", lambda r: r["stopper"] == "stopat", (Check("fpr", ">=", 0.5),)),
              Claim("each", "", lambda r: True, (Check("precision", ">=", 0.5),), each=True))
    v = claim_verdicts(toy_experiment(claims), ROWS)
    assert [x["holds"] for x in v] == ["yes", "no", "n/a", "n/a", "yes"]
    assert v[0]["paper"] == "98%" and v[0]["ours"] == "precision 0.971"
    assert v[1]["ours"] == "JCT gain % 8.6; p(t) <0.001" and v[1]["target"].startswith("JCT gain % >= 10")
    assert v[2]["ours"] == "not run"
    assert v[3]["claim"] == "each [none, noise 0.1]" and v[3]["ours"] == "precision n/a"


def test_claims_that_issue_3_names_are_all_checked():
    (e1, e2, e3, e4) = build_suite(["E1", "E2", "E3", "E4"], registry=FULL)
    checked = {(e.name, c.column) for e in (e1, e2, e3, e4) for cl in e.claims for c in cl.checks}
    assert {("E1", "precision"), ("E1", "recall"), ("E1", "fpr"), ("E1", "jct_gain_pct"),
            ("E1", "jct_gain_p_t"), ("E1", "waste_cut_pct"), ("E1", "waste_cut_p_t"), ("E2", "jct_gain_pct"),
            ("E3", "precision"), ("E3", "recall"), ("E4", "precision")} <= checked
    assert WorkloadConfig().workload == "rlhf-heavy"   # E1's headline setting is the default workload


def test_a_method_keeps_its_colour_in_every_figure_and_variants_differ_by_style():
    from evalstop_gym.experiments.plots import arm_styles

    e1 = [{"arm": "none", "stopper": "none"}, {"arm": "stopat p=0.65", "stopper": "stopat"},
          {"arm": "evalstop k=2", "stopper": "evalstop"}]
    e3 = [{"arm": "evalstop k=2", "stopper": "evalstop"}, {"arm": "cusum", "stopper": "cusum"}]
    e6 = [{"arm": "evalstop k=2 sigma=0.02", "stopper": "evalstop"},
          {"arm": "evalstop k=2 sigma=0.05", "stopper": "evalstop"}]
    s1, s3, s6 = arm_styles(e1), arm_styles(e3), arm_styles(e6)
    assert s1["evalstop k=2"][0] == s3["evalstop k=2"][0] == s6["evalstop k=2 sigma=0.05"][0]
    assert len({s1[a][0] for a in s1}) == 3
    assert s6["evalstop k=2 sigma=0.02"][1] != s6["evalstop k=2 sigma=0.05"][1]


def test_console_tables_fit_120_columns_and_point_to_the_full_table():
    from evalstop_gym.experiments.spec import Arm, Experiment, Point
    from evalstop_gym.experiments.tables import console_text

    cols = ("precision", "recall", "fpr", "f1", "avg_jct_h", "p50_jct_h", "p99_jct_h", "avg_queue_h",
            "utilization", "compute_waste_gpu_h", "delivered_quality", "jct_gain", "jct_gain_p")
    exp = Experiment("EX", "A wide table", "?", None, (Point.of(Arm("a very long arm label " * 4, "none"), "fifo"),),
                     cols, ())
    label = "a very long arm label number " + " ".join(str(i) for i in range(20))
    row = {"arm": label, "x": None, "stopper": "evalstop", "scheduler": "fifo", **{c: 0.123456 for c in cols},
           "jct_gain_pct": 12.5}
    none = {**row, "arm": "none", "stopper": "none", "jct_gain_pct": None}
    claim = {"claim": "a claim of many words " * 5 + "END", "ours": "JCT gain % 12.5", "holds": "yes"}
    text = console_text(exp, [row, none], [claim], full="OUT/EX.md")
    lines = text.splitlines()
    assert max(map(len, lines)) <= 120
    assert "OUT/EX.md" in text and "![" not in text and "…" not in text and "..." not in text
    # every column is there (the ones that do not fit in a table under the first), nothing is cut:
    # the long label and the claim wrap, each word once per table
    flat = " ".join(text.split())
    for header in ("precision", "p99 JCT (h)", "utilization", "JCT gain %"):
        assert header in flat, header
    assert flat.count("number") == text.count("arm  ") >= 2 and "19" in text and "END" in text
    assert "baseline" in text                         # the no-stopper row's gain says why it is blank


def test_blank_gain_cells_say_why():
    from evalstop_gym.experiments.spec import Arm, Experiment, Point
    from evalstop_gym.experiments.tables import fmt_cell

    cols = ("avg_jct_h", "jct_gain", "jct_gain_p")
    exp = Experiment("EX", "t", "?", None, (Point.of(Arm("evalstop", "evalstop"), "sjf-est"),), cols, ())
    assert exp.baseline_of(exp.points[0]) is None           # nothing to compare with, as in `evaluate`
    alone = {"arm": "evalstop", "stopper": "evalstop", "scheduler": "sjf-est", "seeds": 3, "avg_jct_h": 1.0}
    assert fmt_cell(alone, "jct_gain") == "n/a: no sjf-est row without a stopper to compare with"
    assert fmt_cell({**alone, "stopper": "none"}, "jct_gain") == "baseline"
    assert fmt_cell({**alone, "stopper": "none"}, "jct_gain_p") == "baseline"
    one_seed = {**alone, "seeds": 1, "jct_gain_pct": 10.0, "jct_gain_ci_lo": None, "jct_gain_p_t": None,
                "jct_gain_p_wilcoxon": None}
    assert fmt_cell(one_seed, "jct_gain") == "10.0%" and fmt_cell(one_seed, "jct_gain_p") == "n/a: one seed"


def test_e2_says_which_tie_rules_it_uses():
    (e2,) = build_suite(["E2"], registry=FULL)
    notes = " ".join(e2.notes)
    assert "keeps running jobs ahead of waiting ones" in notes
    assert "tiresias: order='queue'" in notes and "demotion_timer='exact'" in notes
