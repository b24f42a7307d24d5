"""The evaluation protocol for learned policies (docs/evaluation.md): selection on validation seeds only,
the targets' verdicts and paired statistics checked by hand, learned stop-policies as stoppers, learned
schedulers with a learned stop-policy at their checkpoints, and the generalisation rows."""

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")

from evalstop_gym import ConfigError, WorkloadConfig, simulate  # noqa: E402
from evalstop_gym.agents.combined import answer_checkpoints_with, learned_metrics  # noqa: E402
from evalstop_gym.agents.policy import LearnedPolicy, LearnedStop, policy_env  # noqa: E402
from evalstop_gym.agents.seeds import VALIDATION_END, VALIDATION_FIRST  # noqa: E402
from evalstop_gym.agents.selection import select  # noqa: E402
from evalstop_gym.metrics import f1_counts  # noqa: E402
from evalstop_gym.agents.targets import Setting, hand_coded_point, target_table, targets  # noqa: E402
from evalstop_gym.agents.verdicts import f1_verdict, judge, jct_verdict  # noqa: E402
from evalstop_gym.agents.train import train  # noqa: E402
from evalstop_gym.agents.wrappers import HandCodedStops  # noqa: E402
from evalstop_gym.api import run_policy  # noqa: E402
from evalstop_gym.envs.stop_env import stop_observation  # noqa: E402
from evalstop_gym.baselines import make_policy  # noqa: E402
from evalstop_gym.envs.adapter import rollout  # noqa: E402
from evalstop_gym.experiments import runner  # noqa: E402
from evalstop_gym.experiments.spec import Arm, Point, Registry  # noqa: E402
from evalstop_gym.experiments.stats import (PairedDifference, PairedGain, paired_difference, paired_gain,  # noqa: E402
                                          paired_relative_change)
from evalstop_gym.policy import Policy  # noqa: E402
from evalstop_gym.simulator import Simulator  # noqa: E402
from evalstop_gym.workload import generate  # noqa: E402

from test_agents_cli import one_line_error  # noqa: E402

REALISTIC = WorkloadConfig(calibration="realistic", jobs=20)   # 64 GPUs in 8 nodes, as the models train on
PHILLY = Path(__file__).resolve().parents[1] / ".." / "shared" / "traces" / "philly_jobs_pollux.csv"
# a few hundred steps each: the models are untrained, the tests check the machinery, never their quality
TINY_STOP = {"n_steps": 128, "batch_size": 64, "n_epochs": 1, "eval_freq": 10**6, "n_eval_episodes": 1,
             "eval_workload": {"jobs": 10}}
TINY_SCHEDULER = {**TINY_STOP, "n_steps": 64, "policy": "MlpPolicy", "policy_kwargs": {"net_arch": [16]}}
SMALL = Registry(("fifo", "sjf-est", "srtf-est"), {"none": (), "evalstop": ("k",), "divergence": ()})


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A stop-policy and a (maskable, MLP) scheduler trained for a few hundred steps in the realistic world."""
    root = tmp_path_factory.mktemp("targets-models")
    quiet = dict(n_envs=1, calibration="realistic", echo=lambda _: None)
    train("EvalStop-StopControl-v0", "ppo", out=root / "stop", timesteps=256, overrides=TINY_STOP, **quiet)
    train("EvalStop-Cluster-v0", "maskable-ppo", out=root / "sched", timesteps=128, overrides=TINY_SCHEDULER,
          **quiet)
    return root / "stop", root / "sched"


@pytest.fixture
def few_trials(monkeypatch):
    """``targets`` tunes every family at the bench's default budget (``FAMILY_BUDGET``, 100 trials, read when a
    tuning starts): most of a call's time is then the TPE sampler's, some 10 s a selection. The tests that use this
    fixture check what ``targets`` does with a selection, not how well it was tuned (the rules are checked above,
    on a budget of 4): 3 trials a family."""
    import evalstop_gym.bench.tune as tune

    monkeypatch.setattr(tune, "FAMILY_BUDGET", 3)
    return 3


def stops_about_half(pol: LearnedPolicy) -> LearnedPolicy:
    """Shift the stop logit of ``pol`` (in memory) to the median over checkpoints of a realistic episode, so its
    deterministic actions are a mix of stop and continue: an untrained network's are often all one action."""
    import torch

    seen = []
    env = pol.make_env(jobs=40)
    rollout(env, lambda obs: seen.append(obs) or 0, seed=VALIDATION_FIRST)
    with torch.no_grad():
        logits = pol.model.policy.get_distribution(torch.as_tensor(np.array(seen))).distribution.logits
    gap = (logits[:, 1] - logits[:, 0]).numpy()
    pol.model.policy.action_net.bias.data[1] -= float(np.median(gap)) + 1e-6
    return pol


# -- selection never sees a test seed -------------------------------------------------
def test_selection_tunes_every_family_on_validation_seeds_only_and_picks_by_the_rules(tmp_path):
    sel = select(REALISTIC, seeds=3, out=tmp_path, registry=SMALL, budget=4)
    recs = [json.loads(ln) for ln in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert {r["spec"]["workload"]["seed"] for r in recs} == {VALIDATION_FIRST, VALIDATION_FIRST + 1, VALIDATION_FIRST + 2}
    by = {}
    for r in recs:
        key = (r["spec"]["scheduler"], r["spec"]["stopper"], json.dumps(r["spec"]["params"], sort_keys=True))
        by.setdefault(key, {})[r["spec"]["workload"]["seed"]] = r["metrics"]
    runs = {k: [v[s] for s in sorted(v)] for k, v in by.items()}

    def of(t):
        return runs[(t["scheduler"], t["stopper"], json.dumps(t["params"], sort_keys=True))]

    # the JCT rule by hand: mean per-seed ratio to srtf-est alone, + 1 above srtf-est + evalstop k=2's mean regret
    none = runs[("srtf-est", "none", "{}")]
    cap = np.mean([m["delivered_quality_regret"] for m in runs[("srtf-est", "evalstop", '{"k": 2}')]])

    def jct_rule(ms):
        ratio = np.mean([m["avg_jct_h"] / n["avg_jct_h"] for m, n in zip(ms, none)])
        return ratio + (np.mean([m["delivered_quality_regret"] for m in ms]) > cap + 1e-12)

    pair = sel.tuning["pair"]["families"]
    assert set(pair) == {"none", "evalstop", "divergence"}
    for fam, best in pair.items():   # every family got the budget; its row is its best trial by the rule
        assert len(best["every_trial"]) == 4 and {t["stopper"] for t in best["every_trial"]} == {fam}
        assert [t["score"] for t in best["every_trial"]] == pytest.approx([jct_rule(of(t)) for t in best["every_trial"]])
        assert best["score"] == min(t["score"] for t in best["every_trial"])
    assert {t["scheduler"] for b in pair.values() for t in b["every_trial"]} <= set(SMALL.schedulers)
    assert [r["rule_score"] for r in sel.pairs] == sorted(b["score"] for b in pair.values())
    assert sel.best_pair["avg_jct_h"] == pytest.approx(np.mean([m["avg_jct_h"] for m in of(pair[sel.best_pair["stopper"]])]))

    # the F1 rule by hand, over srtf-est only, every stopper but none
    def f1(ms):
        vals = [2 * m["true_positives"] / d for m in ms
                if (d := 2 * m["true_positives"] + m["false_positives"] + m["false_negatives"])]
        return np.mean(vals) if vals else 0.0

    det = sel.tuning["detector"]["families"]
    assert set(det) == {"evalstop", "divergence"}
    for best in det.values():
        assert {t["scheduler"] for t in best["every_trial"]} == {"srtf-est"}
        assert [-t["score"] for t in best["every_trial"]] == pytest.approx([f1(of(t)) for t in best["every_trial"]])
    assert sel.best_detector["f1"] == pytest.approx(max(-b["score"] for b in det.values()))
    assert [r["stopper"] for r in sel.detectors] == sorted(det, key=lambda f: (det[f]["score"], det[f]["tie"]))
    # the chosen arms carry their tuned parameters into the targets
    point = hand_coded_point(sel.best_detector)
    assert dict(point.params) == det[sel.best_detector["stopper"]]["params"]
    # a second call replays the studies on the stored runs: nothing is played
    stored = (tmp_path / "runs.jsonl").read_text()
    again = select(REALISTIC, seeds=3, out=tmp_path, registry=SMALL, budget=4)
    assert (tmp_path / "runs.jsonl").read_text() == stored and again.pairs == sel.pairs


@pytest.mark.parametrize("first, seeds", [(0, 10), (VALIDATION_FIRST - 1, 2), (VALIDATION_END - 1, 2)])
def test_selection_refuses_seeds_outside_validation(tmp_path, first, seeds):
    with pytest.raises(ConfigError, match="validation_seed"):
        select(REALISTIC, seeds=seeds, first_seed=first, out=tmp_path, registry=SMALL)
    assert not (tmp_path / "runs.jsonl").exists()


# -- verdicts on toy numbers ----------------------------------------------------------
def jct(change, p=0.01, p_holm=0.02):
    """A bench comparison (evalstop_gym.bench.score.compare) of average JCT: % change, learned against the pair."""
    return {"unit": "%", "n": 10, "change": change, "ci": [change - 1, change + 1], "p": p, "p_holm": p_holm}


@pytest.mark.parametrize("c, learned_pre, srtf_pre, met, says", [
    (jct(-3.5), 0.0, 195.0, True, "3.5% lower"),
    (jct(-3.0), 5.0, 5.0, True, "3.0% lower"),                      # both bounds are inclusive
    (jct(-2.9), 0.0, 195.0, False, "2.9% lower, the target is >= 3% lower"),
    (jct(4.0), 0.0, 195.0, False, "4.0% higher"),
    (jct(-5.0, p=0.03, p_holm=0.06), 0.0, 195.0, False, "a tie: not significant"),   # significant before Holm only
    (jct(-5.0, p=None, p_holm=None), 0.0, 195.0, False, "not significant"),   # constant differences: no t-test
    (jct(-5.0), 196.0, 195.0, False, "196.0 preemptions per episode, more than SRTF-Est's 195.0"),
])
def test_jct_verdict(c, learned_pre, srtf_pre, met, says):
    v = jct_verdict(c, learned_pre, srtf_pre)
    assert v.met is met and says in v.why


@pytest.mark.parametrize("learned_regret, pair_regret, met", [(0.020, 0.021, True), (0.021, 0.021, True),
                                                             (0.0211, 0.021, False)])
def test_jct_verdict_refuses_gains_bought_with_quality(learned_regret, pair_regret, met):
    v = jct_verdict(jct(-10.0), 0.0, 195.0, learned_regret=learned_regret, pair_regret=pair_regret)
    assert v.met is met
    assert ("worse than the pair's" in v.why) is (not met)


def f1(change, p_holm):
    return {"unit": "abs", "n": 10, "change": change, "ci": [None, None], "p": p_holm, "p_holm": p_holm}


@pytest.mark.parametrize("c, learned_waste, detector_waste, met, says", [
    (f1(0.0, None), 100.0, 100.0, False, "F1 +0.000 against the detector's: a tie"),   # a tie is a tie
    (f1(0.02, 0.2), 90.0, 100.0, False, "a tie"),                    # higher, but not significantly
    (f1(0.02, 0.01), 90.0, 100.0, True, "waste 90 <= 100"),
    (f1(-0.03, 0.01), 90.0, 100.0, False, "F1 -0.030 against the detector's: below"),
    (f1(0.05, 0.01), 101.0, 100.0, False, "waste 101 GPU-h, more than the detector's 100"),
])
def test_f1_verdict(c, learned_waste, detector_waste, met, says):
    v = f1_verdict(c, learned_waste, detector_waste)
    assert v.met is met and says in v.why


def toy(jct, pre, tp, fp, fn, waste, regret=0.02):
    return {"avg_jct_h": jct, "preemptions": pre, "true_positives": tp, "false_positives": fp,
            "false_negatives": fn, "compute_waste_gpu_h": waste, "delivered_quality_regret": regret}


def test_judge_on_toy_runs_by_hand():
    learned, pair, ref, stop, det = "L", "P", "R", "S", "D"
    from evalstop_gym.agents.verdicts import Arms

    runs = {
        pair: [toy(10.0, 0, 0, 0, 0, 0), toy(20.0, 0, 0, 0, 0, 0), toy(10.0, 0, 0, 0, 0, 0)],
        learned: [toy(9.0, 2, 0, 0, 0, 0), toy(19.0, 4, 0, 0, 0, 0), toy(9.7, 0, 0, 0, 0, 0)],
        ref: [toy(11.0, 5, 0, 0, 0, 0), toy(21.0, 1, 0, 0, 0, 0), toy(11.0, 3, 0, 0, 0, 0)],
        # F1 = 2TP / (2TP + FP + FN): detector 18/20, 16/20, 0/2 (stops only healthy runs: 0, not undefined);
        # learned 20/21, 16/18, and a seed with no hacking run and no stop (undefined: the pair is left out)
        det: [toy(0, 0, 9, 1, 1, 100.0), toy(0, 0, 8, 2, 2, 200.0), toy(0, 0, 0, 1, 1, 300.0)],
        stop: [toy(0, 0, 10, 1, 0, 90.0), toy(0, 0, 8, 2, 0, 210.0), toy(0, 0, 0, 0, 0, 330.0)],
    }
    j = judge("toy", runs, Arms(learned, pair, ref, stop, det))
    # per-seed changes -10%, -5%, -3%: mean -6%; means 37.7/3 vs 40/3; preemptions 2 vs 3
    assert j.jct["change"] == pytest.approx(-6.0) and j.jct["unit"] == "%"
    assert (j.learned_jct, j.pair_jct) == (pytest.approx(37.7 / 3), pytest.approx(40 / 3))
    assert (j.learned_preemptions, j.reference_preemptions) == (2.0, 3.0)
    # the t-test is on the per-seed % changes the interval is on, -10, -5, -3: mean -6, sd sqrt(13), t = -2.88
    # on 2 df, p = 0.102 (t(2)'s closed form, p = 1 - |t| / sqrt(t^2 + 2)); Holm over the two claims (JCT, F1)
    d = [-10.0, -5.0, -3.0]
    t = np.mean(d) / (np.std(d, ddof=1) / math.sqrt(3))
    assert j.jct["p"] == pytest.approx(1 - abs(t) / math.sqrt(t * t + 2), rel=1e-6)
    lo, hi = sorted([j.jct["p"], j.f1["p"]])   # Holm on two: the smaller p doubled, the larger at least that
    holm = {lo: min(1.0, 2 * lo), hi: max(min(1.0, 2 * lo), hi)}
    assert (j.jct["p_holm"], j.f1["p_holm"]) == (pytest.approx(holm[j.jct["p"]]), pytest.approx(holm[j.f1["p"]]))
    assert j.a.met is False and "not significant" in j.a.why
    assert f1_counts(runs[stop][2]) is None and f1_counts(runs[det][2]) == 0.0
    assert j.f1["n"] == 2
    assert j.learned_f1 == pytest.approx((20 / 21 + 16 / 18) / 2)
    assert j.detector_f1 == pytest.approx((18 / 20 + 16 / 20) / 2)
    assert (j.learned_waste, j.detector_waste) == (210.0, 200.0)
    assert j.b.met is False and "more than the detector's 200" in j.b.why
    assert "regret" not in j.a.why                               # equal regrets (0.02 each) pass that condition
    runs[learned][0]["delivered_quality_regret"] = 0.05          # mean 0.03 against the pair's 0.02
    j = judge("toy", runs, Arms(learned, pair, ref, stop, det))
    assert "regret 0.0300, worse than the pair's 0.0200" in j.a.why
    # per-seed differences +0.03, 0, 0: mean +0.01, sd 0.0173, standard error 0.01, t(0.975, 2 df) = 4.303 from
    # a printed table: 95% CI +0.01 -/+ 0.0430; shown in the targets table beside the pair's regret
    assert (j.learned_regret, j.pair_regret, j.regret["change"]) == (pytest.approx(0.03), 0.02, pytest.approx(0.01))
    assert "p_holm" not in j.regret   # a condition, not a claim: not in the family Holm corrects over
    points = Arms(*(Point.of(Arm(name, "evalstop"), "fifo") for name in ("L", "P", "R", "S", "D")))
    row = next(line for line in target_table(j, points).splitlines() if "quality regret" in line)
    assert [c.strip() for c in row.split("|")[1:5]] == ["(a) quality regret <= P's", "0.0300", "0.0200", "+0.0100 [-0.0330, +0.0530]"]


# -- paired statistics against an independent computation ------------------------------
T975 = {4: 2.776445, 9: 2.262157}   # Student's t, 0.975 quantile, from printed tables


def t_test_p(d):
    """Two-sided paired t-test p-value: t = mean / (sd / sqrt n), p = I_{n-1/(n-1+t^2)}((n-1)/2, 1/2)."""
    mpmath = pytest.importorskip("mpmath")
    n = len(d)
    t = np.mean(d) / (np.std(d, ddof=1) / math.sqrt(n))
    df = n - 1
    return float(mpmath.betainc(df / 2, 0.5, 0, df / (df + t * t), regularized=True))


def wilcoxon_exact_p(d):
    """Two-sided exact Wilcoxon signed-rank p by enumerating all 2^n signs (distinct |d|, no zeros)."""
    ranks = np.argsort(np.argsort(np.abs(d))) + 1
    w = ranks[np.asarray(d) > 0].sum()
    sums = [sum(r for r, s in zip(ranks, signs) if s) for signs in itertools.product((0, 1), repeat=len(d))]
    le, ge = sum(s <= w for s in sums), sum(s >= w for s in sums)
    return min(1.0, 2 * min(le, ge) / len(sums))


BASELINE = [10.0, 12.0, 9.0, 14.0, 11.0, 13.0, 8.0, 15.0, 10.5, 12.5]
DIFFS = [0.8, 0.1, 0.9, 0.65, 0.7, 0.05, 0.6, 0.5, -0.2, 1.2]   # distinct sizes: the exact Wilcoxon applies
TREATED = [b - d for b, d in zip(BASELINE, DIFFS)]


@pytest.mark.parametrize("stat", ["paired_gain", "paired_relative_change"])
def test_paired_percent_changes_against_hand_formulas(stat):
    # paired_gain: the mean % reduction, tests on the raw differences (the experiment tables');
    # paired_relative_change: the mean % change, tests on those same % changes (the bench's size metrics)
    relative = stat == "paired_relative_change"
    r = (paired_relative_change if relative else paired_gain)(BASELINE, TREATED)
    rel = [100 * ((t - b) if relative else (b - t)) / b for b, t in zip(BASELINE, TREATED)]
    mean, lo, hi = (r.diff, r.ci_lo, r.ci_hi) if relative else (r.gain_pct, r.ci_lo, r.ci_hi)
    half = T975[9] * np.std(rel, ddof=1) / math.sqrt(10)
    assert r.n == 10 and mean == pytest.approx(np.mean(rel))
    assert (lo, hi) == (pytest.approx(np.mean(rel) - half, rel=1e-5), pytest.approx(np.mean(rel) + half, rel=1e-5))
    tested = rel if relative else [b - t for b, t in zip(BASELINE, TREATED)]
    assert r.p_t == pytest.approx(t_test_p(tested), rel=1e-6)
    assert r.p_wilcoxon == pytest.approx(wilcoxon_exact_p(tested), rel=1e-9)


def test_paired_difference_against_hand_formulas():
    base, treated = [0.90, 0.85, 0.88, 0.91, 0.87], [0.93, 0.84, 0.92, 0.96, 0.88]
    d = [t - b for b, t in zip(base, treated)]   # +0.03 -0.01 +0.04 +0.05 +0.01
    r = paired_difference(base, treated)
    assert r.diff == pytest.approx(0.024)
    half = T975[4] * np.std(d, ddof=1) / math.sqrt(5)
    assert (r.ci_lo, r.ci_hi) == (pytest.approx(0.024 - half, rel=1e-5), pytest.approx(0.024 + half, rel=1e-5))
    assert r.p_t == pytest.approx(t_test_p(d), rel=1e-6)
    # ranks of |d|: 0.01, 0.01 tie, so no exact enumeration here; all but one difference positive
    assert r.p_wilcoxon is not None and 0 < r.p_wilcoxon < 1
    assert paired_difference([1.0, 1.0], [1.0, 1.0]) == PairedDifference(2, 0.0, 0.0, 0.0, None, None)


# -- learned models on any workload -----------------------------------------------------
def test_a_learned_stop_policy_as_a_stopper_equals_the_model_in_its_env(models):
    pol = stops_about_half(LearnedPolicy.load(models[0]))
    w = generate(REALISTIC.replace(jobs=40, seed=3))
    via_env = pol.run(scheduler="sjf-est", workload=w)
    direct = run_policy(w, LearnedStop(make_policy("sjf-est"), pol))
    assert 0 < direct["jobs_stopped"] < direct["jobs"]
    assert direct == via_env


class Recording(Policy):
    def __init__(self, inner):
        self.inner, self.stops = inner, 0

    def reset(self):
        self.inner.reset()

    def should_stop(self, job, cluster):
        stop = self.inner.should_stop(job, cluster)
        self.stops += stop
        return stop


def test_a_learned_scheduler_asks_the_given_rule_at_its_checkpoints(models):
    sched = LearnedPolicy.load(models[1])
    w = generate(REALISTIC.replace(seed=4))
    alone = learned_metrics(sched, w)   # its recipe: EvalStop k=2 answers the checkpoints
    env, _ = policy_env(sched, w)
    answer_checkpoints_with(env, make_policy("fifo", "evalstop", k=2), sched)
    assert rollout(env, sched.agent(env), options={"workload": w})["metrics"] == alone
    rule = Recording(LearnedStop(Policy(), stops_about_half(LearnedPolicy.load(models[0]))))
    env, _ = policy_env(sched, w)
    answer_checkpoints_with(env, rule, sched)
    mixed = rollout(env, sched.agent(env), options={"workload": w})["metrics"]
    assert mixed["jobs_stopped"] == rule.stops > 0
    assert learned_metrics(sched, w, stop_model=rule.inner.model) == mixed   # what the targets' arm plays
    with pytest.raises(ConfigError, match="cannot run on it"):
        policy_env(sched, generate(REALISTIC.replace(gpus=128, seed=0)))
    # a scheduler with a stop-policy of its own is not given a second one
    env, _ = policy_env(sched, w)
    hand = env
    while not isinstance(hand, HandCodedStops):
        hand = hand.env
    hand.stop_model = "runs/own-stop"
    with pytest.raises(ConfigError, match="stop-policy of its own"):
        answer_checkpoints_with(env, rule, sched)
    # ... unless it is the same model file (a recipe's scheduler judged with its own stop-policy)
    same = LearnedStop(Policy(), LearnedPolicy.load(models[0]))
    hand.stop_model = str(models[0])
    answer_checkpoints_with(env, same, sched)
    assert hand.rule is same


def test_a_wrapper_given_a_scheduler_as_its_stop_model_says_so(models):
    import gymnasium as gym

    from evalstop_gym.agents.policy import make_env

    with pytest.raises(ConfigError, match=r"stop_model='.*sched' is invalid: is a learned scheduler .*not a stop-policy"):
        make_env("EvalStop-Cluster-v0", {}, {"calibration": "realistic", "jobs": 20},
                 [("HandCodedStops", {"stop_model": str(models[1])})])
    # the wrapper itself loads no model: a stop_model needs its rule, which make_env gives it
    with pytest.raises(ConfigError, match=r"stop_model=.* is invalid: is loaded by the learned layer's env builder"):
        HandCodedStops(gym.make("EvalStop-Cluster-v0", calibration="realistic", jobs=20), stop_model=str(models[0]))


def test_a_network_that_takes_any_cluster_size_is_rebuilt_for_the_world(models, monkeypatch):
    """The contract with the networks module: ``transfer(model, env)`` gives a model for ``env``'s spaces,
    or raises ValueError; a fake stands in for it here."""
    from sb3_contrib import MaskablePPO

    import evalstop_gym.agents.networks as networks

    sched = LearnedPolicy.load(models[1])
    big = generate(REALISTIC.replace(gpus=128, jobs=40, seed=2))
    calls = []

    def rebuilt(model, env):
        calls.append(env.observation_space.shape)
        return MaskablePPO("MlpPolicy", env, policy_kwargs={"net_arch": [8]}, n_steps=64, device="cpu", seed=0)

    monkeypatch.setattr(networks, "transfer", rebuilt, raising=False)
    metrics = learned_metrics(sched, big)
    assert calls == [(sched.model.observation_space.shape[0] + 8,)]   # 8 more nodes
    assert metrics["jobs"] == 40 and metrics["preemptions"] == 0      # the recipe's masks still hold

    def refuses(model, env):
        raise ValueError("transfer needs a set-based network")

    monkeypatch.setattr(networks, "transfer", refuses)
    with pytest.raises(ConfigError, match="cannot run on it .transfer needs a set-based network"):
        learned_metrics(sched, big)


def test_set_based_models_trained_on_64_gpus_are_judged_on_128(tmp_path, few_trials):
    """A set-based stop-policy (its input has the node block, so it grows with the nodes) and a set-based
    scheduler, trained tiny on 8 nodes, are both judged on 128 GPUs (16 nodes): the stop-policy answering the
    scheduler's checkpoints is rebuilt for the world like the scheduler. 100 jobs, not the generalisation row's
    400: what needs the rebuild is the node count (left unrebuilt, the stop-policy fails here as on 400 jobs)."""
    quiet = dict(n_envs=1, calibration="realistic", echo=lambda _: None)
    sets = {"policy_kwargs": {"features_extractor_class": "SlotSetExtractor",
                              "features_extractor_kwargs": {"slots": 1, "hidden": 8}, "net_arch": [8]},
            "env_wrapper": None}
    train("EvalStop-StopControl-v0", "ppo", out=tmp_path / "stop", timesteps=128, overrides={**TINY_STOP, **sets},
          **quiet)
    train("EvalStop-Cluster-v0", "maskable-ppo", out=tmp_path / "sched", timesteps=64,
          overrides={**TINY_SCHEDULER, "policy": "evalstop_gym.agents.networks.SlotScorerPolicy",
                     "policy_kwargs": {"hidden": 8}}, **quiet)
    stop = stops_about_half(LearnedPolicy.load(tmp_path / "stop"))
    sched = LearnedPolicy.load(tmp_path / "sched")
    big = generate(REALISTIC.replace(gpus=128, jobs=100, seed=0))
    # the stop-policy as trained cannot read the world's observations: 8 more node entries
    obs = stop_observation(Simulator(big).cluster, None, True)
    assert obs.shape[0] == stop.model.observation_space.shape[0] + 8
    with pytest.raises(ValueError):
        stop.model.predict(obs, deterministic=True)
    rule = Recording(LearnedStop(Policy(), stop, gpus=big.total_gpus, cluster=big.spec))
    env, moved = policy_env(sched, big)
    answer_checkpoints_with(env, rule, sched)
    pair = rollout(env, moved.agent(env), options={"workload": big})["metrics"]
    assert pair["jobs"] == 100 and pair["jobs_stopped"] == rule.stops > 0 and pair["preemptions"] == 0
    assert learned_metrics(sched, big, stop_model=stop) == pair
    # through the protocol: the world's row judges both targets (it said "cannot run" before)
    world = Setting("128 GPUs, 100 jobs", (("gpus", 128), ("jobs", 100)))
    report = targets(REALISTIC, scheduler_model=str(tmp_path / "sched"), stop_model=str(tmp_path / "stop"),
                     seeds=2, validation_seeds=2, out=tmp_path / "out", settings=[world])
    row, = report.rows
    assert row.a is not None and row.b is not None, (row.a_note, row.b_note)
    assert row.jct["n"] == 2


def make_trace(path: Path, rows: int = 40) -> str:
    rng = np.random.default_rng(0)
    lines = ["timestamp,duration,num_gpus,gpu_time,cluster"]
    for i in range(rows):
        d, g = int(rng.integers(600, 20000)), int(rng.choice([1, 2, 4, 8, 16]))
        lines.append(f"2017-10-01 {i // 6:02d}:{(i % 6) * 10:02d}:00,{d},{g},{d * g},c{i % 3}")
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_generalisation_rows_with_tiny_models(models, tmp_path, few_trials):
    stop, sched = map(str, models)
    worlds = [Setting("reference"), Setting("128 GPUs", (("gpus", 128), ("jobs", 40))),
              Setting("noise 0.05", (("noise", 0.05),)), Setting("trace", trace=make_trace(tmp_path / "t.csv"))]
    report = targets(REALISTIC, scheduler_model=sched, stop_model=stop, seeds=2, validation_seeds=2,
                     out=tmp_path / "out", generalisation=True, settings=worlds)
    ref, big, noisy, trace = report.rows
    assert [r.setting for r in report.rows] == ["reference", "128 GPUs", "noise 0.05", "trace"]
    assert report.main is ref and ref.seeds == 2
    for row in (ref, noisy, trace):
        assert row.a is not None and row.b is not None and row.jct["n"] == 2
    # the scheduler's inputs have one entry per node: 16 nodes instead of 8, so its row says why, not crashes;
    # the stop-policy sees only its job's features and is judged there too
    assert big.a is None and "cannot run on it" in big.a_note and "16 node(s)" in big.a_note
    assert big.b is not None and big.pair_jct is not None
    # the wiring, recomputed another way: the test seeds 0-1, the chosen pair (its tuned parameters included) by
    # `simulate`, the stop-policy through its own env
    pair = report.arms.pair
    assert ref.pair_jct == pytest.approx(np.mean([
        simulate(make_policy(pair.scheduler, pair.stopper, **dict(pair.params)),
                 config=REALISTIC.replace(seed=s))["avg_jct_h"] for s in (0, 1)]))
    pol = LearnedPolicy.load(stop)
    assert ref.learned_waste == pytest.approx(np.mean([
        pol.run(scheduler="srtf-est", workload=generate(REALISTIC.replace(seed=s)))["compute_waste_gpu_h"]
        for s in (0, 1)]))
    text = report.markdown()
    assert "cannot run on it" in text and "## Generalisation" in text
    json.loads(report.as_json())


@pytest.mark.skipif(not PHILLY.exists(), reason="../shared/traces/philly_jobs_pollux.csv is not here")
def test_a_replayed_philly_sample_is_a_world(models, tmp_path, few_trials):
    from evalstop_gym.agents.targets import generalisation_settings

    world = generalisation_settings(REALISTIC, trace=str(PHILLY))[-1]
    assert world.trace == str(PHILLY)
    w0, w1 = world.workload(REALISTIC, 0), world.workload(REALISTIC, 1)
    assert w0.n == w1.n == REALISTIC.jobs and w0.total_gpus == 64
    assert not np.array_equal(w0.submit_h, w1.submit_h)   # a fresh sample per seed
    report = targets(REALISTIC, stop_model=str(models[0]), seeds=2, validation_seeds=2, out=tmp_path,
                     generalisation=True, settings=[world])
    assert report.main.b is not None and report.main.a_note.startswith("no learned scheduler")
    assert [r.setting for r in report.rows] == [world.label]   # given worlds are reported even without the flag
    again = targets(REALISTIC, stop_model=str(models[0]), seeds=2, validation_seeds=2, out=tmp_path,
                    settings=[world])
    assert [r.setting for r in again.rows] == [world.label]
    with pytest.raises(ConfigError, match="settings=.*at least one world"):
        targets(REALISTIC, stop_model=str(models[0]), seeds=2, validation_seeds=2, out=tmp_path, settings=[])


# -- the command line -------------------------------------------------------------------
def test_targets_command_writes_the_report(models, tmp_path, capsys, few_trials):
    from evalstop_gym.cli import main

    out = tmp_path / "out"
    argv = ["targets", "--stop-model", str(models[0]), "--scheduler-model", str(models[1]), "--seeds", "2",
            "--validation-seeds", "2", "--jobs", "20", "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "(a) avg JCT >= 3% lower than" in printed and "(b) F1 > srtf-est + " in printed
    assert (out / "targets.md").read_text().strip() == printed.strip()
    data = json.loads((out / "targets.json").read_text())
    assert data["validation_seeds"][0] == VALIDATION_FIRST and data["seeds"] == [0, 1]
    assert "Best scheduler x stopper pair" in (out / "selection.md").read_text()


@pytest.mark.parametrize("extra, needle", [
    (["--validation-seed", "5"], "validation_seed=5"),
    (["--validation-seeds", "0"], "validation_seeds=0"),
    (["--seeds", "1"], "seeds=1"),
    (["--seed", "899995"], "seed=899995"),
    (["--workers", "0"], "workers=0"),
    (["--calibration", "nope"], "calibration='nope'"),
    (["--trace", "x.csv"], "--trace does nothing without --generalisation"),
    (["--generalisation", "--trace", "/no/such.csv"], "trace='/no/such.csv'"),
    (["--generalisation", "--trace-format", "philly"], "--trace-format does nothing without --trace"),
    (["--noise-levels", "0.1"], "--noise-levels does nothing without --generalisation"),
    (["--generalisation", "--noise-levels", "abc"], "noise_levels='abc'"),
    (["--generalisation", "--noise-levels", "0.02,2"], "noise_levels=2.0"),
])
def test_bad_flags_are_one_line_errors_naming_the_flag(models, tmp_path, capsys, extra, needle):
    argv = ["targets", "--stop-model", str(models[0]), "--jobs", "20", "--out", str(tmp_path / "o"), *extra]
    one_line_error(capsys, argv, needle)


@pytest.mark.parametrize("flag, which, needle", [
    ("--stop-model", "missing", "stop_model="),
    ("--scheduler-model", "missing", "scheduler_model="),
    ("--stop-model", "sched", "is a learned scheduler"),
    ("--scheduler-model", "stop", "is a learned stop-policy (ppo) [stop], not a scheduler"),
])
def test_wrong_models_are_one_line_errors_naming_the_flag(models, tmp_path, capsys, flag, which, needle):
    path = {"missing": str(tmp_path / "nothing"), "stop": str(models[0]), "sched": str(models[1])}[which]
    line = one_line_error(capsys, ["targets", flag, path, "--out", str(tmp_path / "o")], needle)
    assert line.startswith("evalstop-gym targets: error: " + flag[2:].replace("-", "_"))
    assert not (tmp_path / "o" / "runs.jsonl").exists()   # refused before any run


def test_an_interrupted_selection_says_how_to_resume(tmp_path, capsys, monkeypatch):
    from evalstop_gym.agents import targets as module
    from evalstop_gym.cli import main

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(module, "select", interrupted)
    assert main(["targets", "--out", str(tmp_path)]) == 130
    assert "run the same command again to resume" in capsys.readouterr().err


def test_a_selection_at_the_default_budget_says_how_many_trials_each_family_got(tmp_path, few_trials):
    sel = select(REALISTIC, seeds=2, out=tmp_path, registry=SMALL)   # the default: FAMILY_BUDGET, set by the fixture
    trials = {len(best["every_trial"]) for best in sel.tuning["pair"]["families"].values()}
    assert trials == {few_trials} and sel.budget == few_trials
    assert f"Every family tuned with {few_trials} trials" in sel.markdown()
