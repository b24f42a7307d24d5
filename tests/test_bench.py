"""evalstop-gym bench: the suite as data, policies of every kind, the scorecard's statistics, results files."""

import dataclasses
import json
import textwrap

import pytest

from evalstop_gym.bench import results as res
from evalstop_gym.bench import suite as suite_mod
from evalstop_gym.bench.policies import BUILTIN, USER, parse_policy
from evalstop_gym.bench.arms import EVALSTOP_K2, NO_STOPPER
from evalstop_gym.bench.run import RESULTS_FILE, RUNS_FILE, run_bench
from evalstop_gym.bench.score import compare, holm, verdicts
from evalstop_gym.bench.suite import DEFAULT_SUITE, PHILLY, PHILLY_SHAPE, SUITES, V1, V2, V3, Row, suite_hash
from evalstop_gym.config import ConfigError, UsageError
from evalstop_gym.seeds import TEST, TUNED_ON_TEST

TOY = (Row("toy-paper", jobs=40, gpus=16, seeds=(1000, 1001, 1002)),
       Row("toy-realistic", calibration="realistic", jobs=40, gpus=16, seeds=(1100, 1101, 1102)))


@pytest.fixture
def toy_suite(monkeypatch):
    monkeypatch.setitem(suite_mod.SUITES, "toy", TOY)
    suite_hash.cache_clear()
    yield "toy"
    suite_hash.cache_clear()


def test_v1_plays_fixed_test_seeds_that_no_default_was_tuned_on():
    seeds = [s for r in V1 for s in r.seeds]
    assert len(seeds) == len(set(seeds)) and all(s in TEST for s in seeds)
    assert not any(s in used for used in TUNED_ON_TEST.values() for s in seeds)
    assert len({r.name for r in V1}) == len(V1)
    assert {r.calibration for r in V1} >= {"paper", "realistic"} and any(r.trace for r in V1)
    for r in V1:
        assert r.config(r.seeds[0]).seed == r.seeds[0]   # every row builds


def test_v1_is_frozen_and_v2_extends_it_with_the_grounded_world_and_real_curves():
    # v1's hash is the one its results files carry (docs/leaderboard.md's heading); a field added to Row
    # later stays out of a row's description while unset, so it cannot move
    assert suite_hash("v1") == "fa4b1d555bd37d31" and len(V1) == 16
    assert V2[:len(V1)] == V1 and SUITES["v2"] is V2
    new = {r.name: r for r in V2[len(V1):]}
    assert {r.calibration for r in V2} == {"paper", "realistic", "grounded"}
    assert new["grounded"].synthetic and new["grounded-trl-curves"].curves == "trl-library"
    assert not new["grounded-trl-curves"].synthetic and new["grounded-trl-curves"].missing() is None
    seeds = [s for r in V2 for s in r.seeds]
    assert len(seeds) == len(set(seeds)) and all(s in TEST for s in seeds)
    assert suite_hash("v2") != suite_hash("v1")
    assert "curves" not in V1[0].describe() and new["grounded-trl-curves"].describe()["curves"] == "trl-library"


def test_v3_is_v2_with_the_philly_trace_replaced_by_its_shipped_shape_so_a_clone_plays_every_row(monkeypatch, tmp_path):
    from evalstop_gym.bench.results import clone_rows

    assert DEFAULT_SUITE == "v3" and SUITES["v3"] is V3 and len(V3) == len(V2)
    changed = [(a, b) for a, b in zip(V2, V3) if a != b]
    assert len(changed) == 1
    (old, new), = changed
    assert old.trace == PHILLY and new.trace == PHILLY_SHAPE and new.name == "realistic-philly-shape"
    assert dataclasses.replace(new, name=old.name, trace=old.trace) == old      # nothing else moved, seeds too
    monkeypatch.setenv("EVALSTOP_GYM_TRACES", str(tmp_path))          # no trace on this "machine"
    assert [r.name for r in V3 if r.missing() is not None] == []
    assert [r.name for r in V2 if r.missing() is not None] == ["realistic-philly"]
    names = [r.name for r in V3]
    assert clone_rows({"suite": "v3", "rows": names}) == names
    assert "realistic-philly" not in clone_rows({"suite": "v2", "rows": [r.name for r in V2]})


def test_a_curves_row_replays_the_shipped_library_and_hashes_it_into_the_run_id():
    from evalstop_gym.bench.play import BenchSpec
    from evalstop_gym.bench.policies import builtin
    from evalstop_gym.checks import JOB_TYPES
    from evalstop_gym.data import trl_library

    row = next(r for r in V2 if r.curves)
    plain = Row("plain", calibration=row.calibration, seeds=row.seeds)
    p = builtin("srtf-est", "evalstop", k=2)
    a, b = BenchSpec.make(p, row, row.seeds[0]), BenchSpec.make(p, plain, row.seeds[0])
    assert a.curves_sha and a.run_id != b.run_id and a.describe()["curves"]["sha256"] == a.curves_sha
    w, base = a.workload(), b.workload()
    rlhf = w.job_type == JOB_TYPES.index("rlhf")
    # the RLHF jobs' hidden curves now come from the logged runs; the other jobs keep theirs and their labels
    assert (w.hacking[~rlhf] == base.hacking[~rlhf]).all() and (w.curves.gold[~rlhf] == base.curves.gold[~rlhf]).all()
    assert not (w.curves.gold[rlhf] == base.curves.gold[rlhf]).all()
    # each job starts at its run's first gold score (the library logs gold: the true score of a replayed run)
    starts = {round(float(r.series("gold")[1][0]), 6) for r in trl_library().values()}
    assert {round(float(x), 6) for x in w.curves.start[rlhf]} <= starts


def test_the_hash_covers_every_field_of_every_row(monkeypatch, toy_suite):
    before = suite_hash("toy")
    monkeypatch.setitem(suite_mod.SUITES, "toy", (TOY[0], Row("toy-realistic", calibration="realistic", jobs=41,
                                                               gpus=16, seeds=TOY[1].seeds)))
    suite_hash.cache_clear()
    assert suite_hash("toy") != before


def test_a_row_whose_trace_is_absent_says_where_it_looked(monkeypatch, tmp_path):
    monkeypatch.setenv(suite_mod.TRACES_ENV, str(tmp_path))
    (row,) = [r for r in V1 if r.trace is not None]
    assert "not found in" in row.missing() and str(tmp_path) in row.missing()
    assert Row("x", calibration="no-such-world").missing().startswith("calibration 'no-such-world'")


@pytest.mark.parametrize("text, sched, stop, params", [
    ("droptest", "srtf-est", "droptest", ()), ("fifo", "fifo", "none", ()),
    ("sjf-est+evalstop:k=3", "sjf-est", "evalstop", (("k", 3),)),
    ("tiresias+cusum:threshold=3,drift=0.5", "tiresias", "cusum", (("drift", 0.5), ("threshold", 3)))])
def test_built_in_names(text, sched, stop, params):
    p = parse_policy(text)
    assert (p.kind, p.scheduler, p.stopper, p.params) == (BUILTIN, sched, stop, params)


@pytest.mark.parametrize("text, says", [("nope", "'nope' is not a policy"), ("evalstop:kk=1", "kk"),
                                        ("evalstop+fifo", "at most one scheduler then one stopper"),
                                        ("no_such_module_xyz:Cls", "cannot be imported"), ("", "must be")])
def test_bad_policies_are_one_config_error(text, says):
    with pytest.raises(ConfigError) as e:
        parse_policy(text)
    assert says in str(e.value)


def test_one_policy_named_twice_is_refused():
    from evalstop_gym.bench.policies import parse_policies

    with pytest.raises(ConfigError, match="lists the same policy twice"):
        parse_policies(["evalstop", "srtf-est+evalstop"])   # a stopper alone runs over srtf-est
    assert [p.label for p in parse_policies(["evalstop", "fifo+evalstop"])] == ["srtf-est + evalstop", "fifo + evalstop"]


def test_holm_by_hand():
    # sorted: 0.01 x 3 = 0.03; 0.03 x 2 = 0.06; 0.04 x 1 = 0.04, raised to the running max 0.06
    assert holm([0.01, 0.04, 0.03, None]) == [pytest.approx(0.03), pytest.approx(0.06), pytest.approx(0.06), None]


def test_paired_comparisons_by_hand():
    c = compare([9.0, 8.0], [10.0, 10.0], "avg_jct_h")   # -10% and -20%
    assert c["unit"] == "%" and c["n"] == 2 and c["change"] == pytest.approx(-15.0)
    assert c["ci"][0] < -15.0 < c["ci"][1]
    d = compare([0.5, None, 0.7], [0.4, 0.3, 0.4], "f1")   # the undefined pair is left out
    assert d["unit"] == "abs" and d["n"] == 2 and d["change"] == pytest.approx(0.2)


def test_a_change_whose_interval_excludes_zero_is_significant_before_correction():
    """Over workloads of very different sizes (a small row and a large one) the p-value tests the per-workload
    % changes the interval is on: a +10% change on every small workload and a -1% one on every large workload
    is +4.5% [CI > 0], significant, where a test on raw differences (dominated by the large rows) is not."""
    import numpy as np

    rng = np.random.default_rng(0)
    ref = [*(1.0 + rng.random(20)), *(100.0 + 10 * rng.random(20))]
    arm = [r * (1.10 if r < 10 else 0.99) * (1 + 0.01 * rng.standard_normal()) for r in ref]
    c = compare(arm, ref, "avg_jct_h")
    assert c["ci"][0] > 0 and c["p"] < 0.05 and 3.0 < c["change"] < 6.0
    for seed in range(20):   # in general: the interval excludes 0 exactly when p < 0.05
        r = np.random.default_rng(seed)
        ref = list(np.exp(3 * r.standard_normal(12)))
        arm = [x * (1 + 0.1 * r.standard_normal()) for x in ref]
        c = compare(arm, ref, "avg_jct_h")
        assert (c["ci"][0] > 0 or c["ci"][1] < 0) == (c["p"] < 0.05), (seed, c)


def _card(change, p):
    c = {"change": change, "ci": [None, None], "unit": "%", "p": p}
    return {"vs": {"ref": {"aggregate": {m: dict(c) for m in ("avg_jct_h", "compute_waste_gpu_h", "f1",
                                                               "delivered_quality_regret")}}}}


def test_a_verdict_needs_significance_after_holm():
    # 4 tests at p = 0.02: Holm multiplies the smallest by 4 -> 0.08: every one is a tie
    assert {v["verdict"] for v in verdicts(_card(-5.0, 0.02))} == {"tie"}
    v = {x["metric"]: x["verdict"] for x in verdicts(_card(-5.0, 0.001))}
    assert v["avg_jct_h"] == "better" and v["f1"] == "worse"   # lower F1 is worse


USER_MODULE = '''
from evalstop_gym.policy import Stopper


class TwoDeclines(Stopper):
    """EvalStop k=2 written by a user: stop after two consecutive declines."""

    def __init__(self, base, k=2):
        super().__init__(base)
        self.k = k

    def rule(self, job, cluster):
        return job.consecutive_declines >= self.k
'''


def test_a_user_class_plays_like_the_built_in_rule_it_restates(tmp_path, monkeypatch, toy_suite):
    (tmp_path / "my_rules.py").write_text(textwrap.dedent(USER_MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    p = parse_policy("my_rules:TwoDeclines")
    assert (p.kind, p.scheduler, p.stopper) == (USER, "srtf-est", "my_rules:TwoDeclines") and p.source
    out = run_bench(["my_rules:TwoDeclines", "fifo+my_rules:TwoDeclines:k=3"], suite_name=toy_suite,
                    out=tmp_path / "b", progress=False, echo=lambda _t: None)
    mine = out["policies"][0]
    assert mine["per_seed"] == out["reference_values"][EVALSTOP_K2]
    assert all(v["verdict"] == "tie" for v in mine["verdicts"] if v["reference"] == EVALSTOP_K2)


def test_results_resume_and_are_deterministic(tmp_path, toy_suite):
    kw = dict(suite_name=toy_suite, progress=False, echo=lambda _t: None)
    a = run_bench(["droptest"], out=tmp_path / "a", **kw)
    lines = (tmp_path / "a" / RUNS_FILE).read_text().splitlines()
    assert len(lines) == 3 * 2 * 3   # 3 arms x 2 rows x 3 seeds
    again = run_bench(["droptest"], out=tmp_path / "a", **kw)
    assert (tmp_path / "a" / RUNS_FILE).read_text().splitlines() == lines   # nothing run again
    fresh = run_bench(["droptest"], out=tmp_path / "c", **kw)
    undated = [{k: v for k, v in r.items() if k != "date"} for r in (a, again, fresh)]   # the date: when it ran
    assert undated[0] == undated[1] == undated[2]
    # a policy's scorecard does not depend on what else was scored with it (the leaderboard's per-row commands)
    both = run_bench(["fifo", "droptest"], out=tmp_path / "a", **kw)
    assert both["policies"][1] == a["policies"][0]
    saved = res.load(tmp_path / "a" / RESULTS_FILE, suite_name=toy_suite)
    assert saved["suite_hash"] == suite_hash(toy_suite) and saved["version"] and saved["code"]
    assert set(saved["references"]) == {NO_STOPPER, EVALSTOP_K2}


def test_two_results_are_comparable_or_refused(tmp_path, toy_suite):
    kw = dict(suite_name=toy_suite, progress=False, echo=lambda _t: None)
    run_bench(["droptest"], out=tmp_path / "a", **kw)
    run_bench(["fifo+evalstop"], out=tmp_path / "b", command="evalstop-gym bench --policy fifo+evalstop", **kw)
    a, b = tmp_path / "a" / RESULTS_FILE, tmp_path / "b" / RESULTS_FILE
    board = res.leaderboard([a, b])
    assert "srtf-est + droptest" in board and "`evalstop-gym bench --suite toy --policy fifo+evalstop`" in board
    assert "`evalstop-gym bench --policy fifo+evalstop`" in board   # the command that wrote the file
    from evalstop_gym.cli import main

    assert main(["bench", "--leaderboard", str(a), str(b), "--leaderboard-out", str(tmp_path / "lb.md")]) == 0
    assert (tmp_path / "lb.md").read_text() == board
    other = json.loads(b.read_text())
    other["suite_hash"] = "0" * 16
    res.save(other, tmp_path / "other.json")
    with pytest.raises(UsageError, match="not comparable.*suite_hash"):
        res.leaderboard([a, tmp_path / "other.json"])
    other = json.loads(b.read_text())
    other["rows"] = other["rows"][:1]
    res.save(other, tmp_path / "fewer.json")
    with pytest.raises(UsageError, match="rows"):
        res.check_comparable([("a", res.load(a)), ("fewer", res.load(tmp_path / "fewer.json"))])


def test_the_cli_refuses_bad_input_in_one_line(capsys):
    from evalstop_gym.cli import main

    assert main(["bench"]) == 2
    assert main(["bench", "--policy", "nope", "--out", "/nonexistent-dir/x"]) == 2
    # a clone without the shared Philly trace also says, in a line of its own, which row it does not play
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if "is NOT played" not in ln]
    assert len(err) == 2 and all(line.startswith("evalstop-gym bench: error:") for line in err)
    assert "'nope' is not a policy" in err[1]



def test_a_trace_row_plays_the_trace_or_is_skipped_with_a_note(tmp_path, monkeypatch):
    from evalstop_gym.bench.suite import Trace

    row = Row("toy-philly", calibration="realistic", jobs=50, gpus=16, trace=Trace("philly_jobs_pollux.csv", jobs=50),
              seeds=(1200, 1201))
    monkeypatch.setitem(suite_mod.SUITES, "toy-trace", (TOY[0], row))
    suite_hash.cache_clear()
    kw = dict(suite_name="toy-trace", progress=False, echo=lambda _t: None)
    monkeypatch.setenv(suite_mod.TRACES_ENV, str(tmp_path / "empty"))
    out = run_bench(["evalstop"], out=tmp_path / "a", **kw)
    assert out["rows"] == ["toy-paper"] and "not found in" in out["skipped"]["toy-philly"]
    assert "skipped: toy-philly (trace philly_jobs_pollux.csv not found" in (tmp_path / "a" / "bench.md").read_text()
    monkeypatch.delenv(suite_mod.TRACES_ENV)
    if row.missing() is not None:
        pytest.skip(f"the Philly trace is not on this machine: {row.missing()}")
    played = run_bench(["evalstop"], out=tmp_path / "b", **kw)
    suite_hash.cache_clear()
    assert played["rows"] == ["toy-paper", "toy-philly"] and played["skipped"] == {}
    runs = [json.loads(line) for line in (tmp_path / "b" / RUNS_FILE).open()]
    traced = [r for r in runs if "trace" in r["spec"]]
    assert traced and all(r["metrics"]["jobs"] == 50 and r["spec"]["trace"]["sha256"] for r in traced)


def test_the_bench_imports_neither_torch_nor_the_learned_layer():
    import subprocess
    import sys

    code = ("import sys, evalstop_gym.bench, evalstop_gym.bench.tune, evalstop_gym.commands.bench; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'stable_baselines3', 'optuna') "
            "or m.startswith('evalstop_gym.agents')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_leaderboard_quality_bar_reads_the_regret_verdict_against_evalstop():
    def card(verdict):
        return {"verdicts": [{"reference": EVALSTOP_K2, "metric": "delivered_quality_regret", "verdict": verdict},
                             {"reference": NO_STOPPER, "metric": "delivered_quality_regret", "verdict": "worse"}]}

    assert res.quality_worse(card("worse")) and not res.quality_worse(card("tie"))
