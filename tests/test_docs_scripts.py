"""The scripts behind docs/mdp.md's and docs/multiagent.md's tables play what their docstrings say: a rule's
summed reward terms are the simulator's own metrics of the same policy and seed, the return the script
re-weights is the one the env paid, episode lengths count what the envs define as a step, the credit-bias
script credits a stop what the env credits it, and bad flags end in one line."""

import importlib.util
import sys
from pathlib import Path

import gymnasium as gym
import pytest

from evalstop_gym import WorkloadConfig, simulate
from evalstop_gym.baselines import make_policy
from evalstop_gym.envs.adapter import CLUSTER_ID, STOP_CONTROL_ID, PolicyAgent
from evalstop_gym.policy import drive
from evalstop_gym.simulator import Simulator
from evalstop_gym.workload import generate

DOCS = Path(__file__).resolve().parent.parent / "docs"
JOBS = 30


def paid(policy, seed, **kwargs):
    """The return a StopControl-v0 episode of ``policy`` paid, and its reward terms, each summed over its steps."""
    env = gym.make(STOP_CONTROL_ID, jobs=JOBS, **kwargs)
    agent = PolicyAgent(policy, env)
    obs, _ = env.reset(seed=seed)
    agent.reset()
    total, terms, done = 0.0, {}, False
    while not done:
        obs, r, done, _, info = env.step(agent(obs))
        total += r
        for k, v in info["reward_terms"].items():
            terms[k] = terms.get(k, 0.0) + v
    return total, terms


def load(name):
    spec = importlib.util.spec_from_file_location(name, DOCS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def reward_weights():
    return load("reward_weights")


@pytest.fixture(scope="module")
def tenant_weights():
    pytest.importorskip("pettingzoo")   # the multiagent extra
    return load("tenant_weights")


@pytest.mark.parametrize("stopper", ["none", "evalstop"])
def test_a_stop_control_episode_sums_to_the_simulators_metrics(reward_weights, stopper):
    terms, metrics = reward_weights.episode(make_policy("fifo", stopper), "fifo", JOBS, seed=1)
    direct = simulate("fifo", stopper, jobs=JOBS, seed=1)
    assert terms["jct_h"] == pytest.approx(direct["avg_jct_h"], rel=1e-9)   # the jct_h term sums to mean JCT
    assert metrics == direct


def test_the_weight_100_column_is_the_return_the_env_paid(reward_weights):
    total, _ = paid(make_policy("fifo", "evalstop"), 2, scheduler="fifo")
    terms, _ = reward_weights.episode(make_policy("fifo", "evalstop"), "fifo", JOBS, seed=2)
    assert reward_weights.reweighted(terms, 100.0) == pytest.approx(total, rel=1e-9)
    # weight 50 takes off half the quality credit and nothing else
    assert reward_weights.reweighted(terms, 50.0) == pytest.approx(total - 50.0 * terms["quality"], rel=1e-9)


def test_stop_everything_stops_every_job(reward_weights):
    _, metrics = reward_weights.episode(reward_weights.StopEverything(make_policy("fifo")), "fifo", JOBS, seed=1)
    assert metrics["jobs_stopped"] == JOBS


def test_gaps_by_hand(reward_weights):
    # means 0.51 against 0.50: 2%; the episodes 1.02 against 1.00 (2%) and 0 against 0 (no gap)
    assert reward_weights.gaps([1.02, 0.0], [1.0, 0.0]) == ("2.00%", "2.00%")
    assert reward_weights.gaps([0.0, 0.0], [0.0, 0.0]) == ("-", "-")
    assert reward_weights.gaps([0.1, 1.0], [0.0, 1.0])[1] == "inf%"


@pytest.mark.parametrize("stopper", ["none", "evalstop"])
def test_a_tenants_episode_sums_to_the_simulators_metrics(tenant_weights, stopper):
    rule = tenant_weights.never_stop if stopper == "none" else tenant_weights.EvalStopRule(2)
    terms, total = tenant_weights.episode(rule, "srtf-est", JOBS, seed=3)
    direct = simulate("srtf-est", stopper, jobs=JOBS, seed=3)
    assert terms["jct_h"] == pytest.approx(direct["avg_jct_h"], rel=1e-9)
    assert terms["gpu_h"] == pytest.approx(direct["gpu_hours"] / JOBS, rel=1e-9)
    weights = {"jct_h": -1.0, "quality": 100.0, "gpu_h": -0.05}   # the page's default weights
    assert total == pytest.approx(sum(w * terms[k] for k, w in weights.items()), rel=1e-9)


@pytest.mark.parametrize("script, argv, says", [
    ("reward_weights", ["--weights", "100,x"], "--weights='100,x' must be numbers"),
    ("reward_weights", ["--seeds", "100-101"], "were tuned on seeds 100-110"),
    ("tenant_weights", ["--seeds", "900000"], "are not test seeds"),
])
def test_bad_flags_end_in_one_line(request, monkeypatch, script, argv, says):
    module = request.getfixturevalue(script)
    monkeypatch.setattr(sys, "argv", [script, *argv])
    with pytest.raises(SystemExit) as e:
        module.main()
    assert says in str(e.value) and "\n" not in str(e.value)


@pytest.fixture(scope="module")
def episode_lengths():
    return load("episode_lengths")


def test_stop_control_steps_once_per_checkpoint_but_the_last(episode_lengths):
    # no stopper: each of the 20 jobs reaches its 10 evals, the tenth being its completion (no decision)
    run = episode_lengths.hand_coded(STOP_CONTROL_ID, "fifo", "none", 1, jobs=20)
    assert run["steps"] == 20 * (10 - 1)


def test_the_window_counts_and_the_random_agents(episode_lengths):
    small = episode_lengths.hand_coded(CLUSTER_ID, "fifo", "none", 1, jobs=20, slots=2)
    large = episode_lengths.hand_coded(CLUSTER_ID, "fifo", "none", 1, jobs=20, slots=20)
    assert small["most_active"] == large["most_active"] > 2   # the window's size changes nothing simulated
    assert small["shown"] <= 2 < large["shown"]
    masked = episode_lengths.random_agent(1, 0, True, jobs=20)
    unmasked = episode_lengths.random_agent(1, 0, False, jobs=20)
    assert masked["invalid"] == 0 < unmasked["invalid"]


def test_the_credit_bias_script_credits_what_the_env_credits():
    bias = load("credit_bias")
    config = WorkloadConfig(jobs=JOBS, noise=0.05, seed=4)
    best, fresh = bias.stop_errors(config)
    stops = simulate("srtf-est", "evalstop", jobs=JOBS, noise=0.05, seed=4)["jobs_stopped"]
    assert len(best) == len(fresh) == stops > 0
    # the env's quality term is the stopped jobs' credits plus the completed jobs' final observed scores, / n:
    # the stops' true scores plus the script's fresh errors, plus the completed jobs' scores, give the same sum
    w = generate(config)
    out = drive(Simulator(w), make_policy("srtf-est", "evalstop"))
    true = sum(w.curves.gold[j, out.delivered_ckpt[j]] for j in out.stopped.nonzero()[0])
    completed = sum(w.observed[j, -1] for j in (~out.stopped).nonzero()[0])
    _, terms = paid(make_policy("srtf-est", "evalstop"), 4, noise=0.05)
    assert terms["quality"] * JOBS == pytest.approx(true + sum(fresh) + completed, rel=1e-9)


@pytest.fixture(scope="module")
def regime_shapes():
    return load("regime_shapes")


def test_regimes_sort_the_library_and_a_world_by_one_rule(regime_shapes):
    from evalstop_gym import fit
    from evalstop_gym.data import TRL_LIBRARY_VARIED, trl_library

    library = trl_library(TRL_LIBRARY_VARIED)
    split = regime_shapes.regimes(library)
    fitted = [f for n, r in library.items() if fit.job_type_of(n) == "rlhf" for f in [fit.fit_run(r)] if f is not None]
    assert len(split["held"]) + len(split["free"]) == len(fitted) and split["held"] and split["free"]
    # the library against itself: the same runs on both sides, every row identical, every KS p 1
    rows = regime_shapes.rows(library, library)
    assert {r["regime"] for r in rows} == {"held", "free"}
    assert all(r["library"] == r["world"] and r["runs"][0] == r["runs"][1] > 0 for r in rows)
    assert all(r["ks_p"] == pytest.approx(1.0) for r in rows if not r["statistic"].startswith("peaked"))
    shares = [r for r in rows if r["statistic"].startswith("peaked")]
    assert all(list(r["library"]) == sorted(r["library"]) for r in shares)   # cumulative shares never fall
    assert "| held | peak index |" in regime_shapes.table(rows)


@pytest.mark.parametrize("argv, says", [(["--runs", "5"], "runs"), (["--seed", "0"], "seed")])
def test_regime_shapes_bad_flags_end_in_one_line(regime_shapes, monkeypatch, argv, says):
    monkeypatch.setattr(sys, "argv", ["regime_shapes", *argv])
    with pytest.raises(SystemExit) as e:
        regime_shapes.main()
    assert "regime_shapes.py: error:" in str(e.value) and says in str(e.value) and "\n" not in str(e.value)
