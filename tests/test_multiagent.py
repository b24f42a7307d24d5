"""The multi-tenant PettingZoo env (evalstop_tenants_v0): PettingZoo's own checkers,
seeding, the equivalence with platform-level EvalStop and with the simulator, batching of
same-instant checkpoints, the per-tenant information boundary, rewards, pickling and
vectorization (SuperSuit + SB3: tests/test_multiagent_examples.py)."""

import dataclasses
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest
from gymnasium.utils.env_checker import data_equivalence

from evalstop_gym.baselines import SCHEDULERS, STOPPERS, make_policy
from evalstop_gym import ConfigError, WorkloadConfig, generate, simulate
from evalstop_gym.api import run_policy
from evalstop_gym.multiagent import tenants_v0
from evalstop_gym.multiagent.rules import EvalStopRule, never_stop, play
from evalstop_gym.multiagent.tenants import tenant_feature_names
from evalstop_gym.workload import workload_from_jobs

pettingzoo_test = pytest.importorskip("pettingzoo.test")

# PettingZoo's checkers reset with options={"options": 1}; the env ignores unknown option keys with this warning.
ALLOWED_WARNINGS = ("are not workload fields nor 'workload'; ignored",)
SMALL = {"jobs": 24}


def assert_no_unexpected_warnings(caught):
    bad = [str(w.message) for w in caught if not any(a in str(w.message) for a in ALLOWED_WARNINGS)]
    assert not bad, bad


def test_parallel_api_test_without_warnings():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pettingzoo_test.parallel_api_test(tenants_v0.parallel_env(**SMALL), num_cycles=2000)
    assert_no_unexpected_warnings(caught)


def test_parallel_seed_test():
    pettingzoo_test.parallel_seed_test(lambda: tenants_v0.parallel_env(**SMALL), num_cycles=500)


def test_api_test_and_seed_test_on_the_aec_conversion_without_warnings():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pettingzoo_test.api_test(tenants_v0.env(**SMALL), num_cycles=2000)
        pettingzoo_test.seed_test(lambda: tenants_v0.env(**SMALL), num_cycles=500)
    assert_no_unexpected_warnings(caught)


def test_conventions():
    env = tenants_v0.parallel_env(tenants=3)
    assert env.metadata["is_parallelizable"] is True
    assert env.metadata["name"] == "evalstop_tenants_v0"
    assert env.possible_agents == ["tenant_0", "tenant_1", "tenant_2"]
    a0, a1 = env.possible_agents[:2]
    assert env.observation_space(a0) is env.observation_space(a0)
    assert env.action_space(a0) is env.action_space(a0)
    assert env.observation_space(a0) == env.observation_space(a1)
    assert env.action_space(a0) == env.action_space(a1)
    assert env.observation_space(a0).shape == (len(tenant_feature_names(env.slots)),)
    from pettingzoo import AECEnv

    assert isinstance(tenants_v0.raw_env(), AECEnv) and isinstance(tenants_v0.env(), AECEnv)
    assert isinstance(tenants_v0.env().unwrapped, tenants_v0.TenantsEnv)


def random_rollout(env, seed, steps):
    """Random masked actions over several episodes; every return value of every step."""
    out = [env.reset(seed=seed)]
    for a in env.possible_agents:
        env.action_space(a).seed(seed)
    for _ in range(steps):
        infos = out[-1][-1]
        step = env.step({a: env.action_space(a).sample(infos[a]["action_mask"]) for a in env.agents})
        out.append(step)
        if not env.agents:
            out.append(env.reset())
    return out


def test_same_seed_same_everything():
    a = random_rollout(tenants_v0.parallel_env(jobs=12), seed=4, steps=300)
    b = random_rollout(tenants_v0.parallel_env(jobs=12), seed=4, steps=300)
    assert sum("metrics" in r[-1]["tenant_0"] for r in a if len(r) == 5) >= 2  # episodes ended and restarted
    assert data_equivalence(a, b, exact=True)
    c = random_rollout(tenants_v0.parallel_env(jobs=12), seed=5, steps=50)
    assert not data_equivalence(a[:51], c, exact=True)


@pytest.mark.parametrize("scheduler", sorted(SCHEDULERS))
def test_every_tenant_running_evalstop_equals_platform_evalstop_and_the_simulator(scheduler):
    for seed in (0, 7):
        own = play(tenants_v0.parallel_env(jobs=40, scheduler=scheduler), EvalStopRule(2), seed=seed)
        platform = play(tenants_v0.parallel_env(jobs=40, scheduler=scheduler, platform_stopper="evalstop"),
                        never_stop, seed=seed)
        direct = simulate(scheduler, "evalstop", jobs=40, seed=seed)
        assert own["metrics"] == platform["metrics"] == direct
        assert own["tenant_metrics"] == platform["tenant_metrics"]
        # the same rewards, split into steps differently (the platform's stops take no tenant step)
        assert own["returns"] == pytest.approx(platform["returns"], rel=1e-12)


@pytest.mark.parametrize("stopper", sorted(STOPPERS))
def test_platform_stoppers_with_passive_tenants_equal_the_simulator(stopper):
    env = tenants_v0.parallel_env(jobs=30, scheduler="srtf-est", platform_stopper=stopper)
    assert play(env, never_stop, seed=3)["metrics"] == simulate("srtf-est", stopper, jobs=30, seed=3)


@pytest.mark.parametrize("stopper", ["evalstop", "divergence"])
def test_the_realistic_world_through_the_tenants_env_equals_the_simulator(stopper):
    env = tenants_v0.parallel_env(jobs=30, scheduler="srtf-est", platform_stopper=stopper, calibration="realistic")
    assert play(env, never_stop, seed=3)["metrics"] == simulate("srtf-est", stopper, jobs=30, seed=3,
                                                                calibration="realistic")


DECLINING = [0.1, 0.3, 0.5, 0.4, 0.3, 0.2]
RISING = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]


def toy_workload():
    """Three 6-h jobs started together (checkpoints every hour at the same instants) and a 2-GPU job."""
    return workload_from_jobs([
        {"submit_h": 0.0, "gpus": 1, "length_h": 6.0, "tenant": 0, "gold": DECLINING},
        {"submit_h": 0.0, "gpus": 1, "length_h": 6.0, "tenant": 1, "gold": RISING},
        {"submit_h": 0.0, "gpus": 1, "length_h": 6.0, "tenant": 1, "gold": DECLINING},
        {"submit_h": 0.0, "gpus": 2, "length_h": 3.0, "tenant": 2, "gold": DECLINING},
    ], total_gpus=4)


def test_same_instant_checkpoints_are_decided_in_one_step_one_per_tenant():
    env = tenants_v0.parallel_env(tenants=3, scheduler="fifo")
    obs, infos = env.reset(options={"workload": toy_workload()})
    # t = 1 h: jobs 0 (tenant 0), 1 and 2 (tenant 1) reach checkpoints together; job 3 waits for GPUs.
    assert env.time_h == 1.0
    assert {a: i["decision_job"] for a, i in infos.items()} == {"tenant_0": 0, "tenant_1": 1, "tenant_2": -1}
    assert infos["tenant_2"]["action_mask"].tolist() == [1, 0]
    obs, _, _, _, infos = env.step({"tenant_0": 0, "tenant_1": 0, "tenant_2": 1})  # tenant_2's 1 is a no-op
    # tenant 1's second job is decided next, still at t = 1 h
    assert env.time_h == 1.0
    assert {a: i["decision_job"] for a, i in infos.items()} == {"tenant_0": -1, "tenant_1": 2, "tenant_2": -1}
    assert obs["tenant_1"][list(tenant_feature_names(env.slots)).index("slot0.decision")] == 1.0
    rule = EvalStopRule(2)
    times = [env.time_h]
    while env.agents:
        obs, _, _, _, infos = env.step({a: rule(obs[a]) for a in env.agents})
        times.append(env.time_h)
    # EvalStop stops jobs 0 and 2 at t = 5 h (declines at 4 h and 5 h); job 3 then runs 5 h -> 7.5 h
    m = infos["tenant_0"]["tenant_metrics"]
    assert m["jobs_stopped"] == 1 and m["avg_jct_h"] == 5.0
    assert infos["tenant_2"]["tenant_metrics"]["avg_jct_h"] == 7.5
    assert times == sorted(times)
    assert infos["tenant_0"]["metrics"] == run_policy(toy_workload(), make_policy("fifo", "evalstop"))


def test_missing_or_invalid_actions_raise():
    env = tenants_v0.parallel_env(tenants=3, scheduler="fifo")
    env.reset(options={"workload": toy_workload()})
    with pytest.raises(ValueError, match="tenant_1 has job 1 at an eval checkpoint"):
        env.step({"tenant_0": 0})
    with pytest.raises(ValueError, match="invalid action 2 for tenant_2"):
        env.step({"tenant_0": 0, "tenant_1": 0, "tenant_2": 2})
    with pytest.raises(ValueError, match="unknown agent"):
        env.step({"tenant_0": 0, "tenant_1": 0, "tenant_9": 0})
    env.step({"tenant_0": np.int64(1), "tenant_1": np.array(0)})  # numpy ints are fine; idle tenants may be left out


def rollout_obs(env, workload):
    """Observations, rewards and infos of every step under passive tenants."""
    obs, infos = env.reset(options={"workload": workload})
    out = [(obs, infos)]
    while env.agents:
        obs, rew, _, _, infos = env.step(dict.fromkeys(env.agents, 0))
        out.append((obs, rew, infos))
    return out


def with_curves(w, **changes):
    return dataclasses.replace(w, curves=dataclasses.replace(w.curves, **changes))


def test_a_tenant_sees_nothing_of_another_tenants_jobs():
    w = generate(WorkloadConfig(jobs=30, seed=11))
    other = w.tenant == 1
    rng = np.random.default_rng(0)
    # tenant 1's jobs get other observed eval scores, losses and proxy rewards (placement does not read them)
    w2 = with_curves(w, eval_z=np.where(other[:, None], rng.standard_normal(w.curves.eval_z.shape), w.curves.eval_z),
                     loss=np.where(other[:, None], w.curves.loss * 1.7, w.curves.loss),
                     proxy=np.where(other[:, None], -w.curves.proxy, w.curves.proxy))
    env = tenants_v0.parallel_env(scheduler="srtf-est")
    a, b = rollout_obs(env, w), rollout_obs(env, w2)
    assert len(a) == len(b)
    for t in ("tenant_0", "tenant_2", "tenant_3"):
        assert all(np.array_equal(x[0][t], y[0][t]) for x, y in zip(a, b)), t
        assert all(x[1][t] == y[1][t] for x, y in zip(a[1:], b[1:])), t
    assert not all(np.array_equal(x[0]["tenant_1"], y[0]["tenant_1"]) for x, y in zip(a, b))


def test_hidden_fields_never_reach_observations_rewards_or_step_infos():
    w = generate(WorkloadConfig(jobs=30, seed=12, noise=0.05))
    # another hidden world with the same observed scores: true scores = observed, no noise, labels flipped
    w2 = dataclasses.replace(with_curves(w, gold=w.observed, eval_z=np.zeros_like(w.curves.eval_z),
                                         start=w.curves.start + 0.3,
                                         peak_progress=np.full(w.n, 0.5)), hacking=~w.hacking)
    assert np.array_equal(w2.observed, w.observed)
    env = tenants_v0.parallel_env()
    a, b = rollout_obs(env, w), rollout_obs(env, w2)
    assert data_equivalence(a[:-1], b[:-1], exact=True)
    final_a, final_b = a[-1][2]["tenant_0"], b[-1][2]["tenant_0"]
    assert final_a["metrics"] != final_b["metrics"]  # the hidden truth shows only in the final metrics
    for step in a[:-1]:
        for info in step[-1].values():
            assert set(info) <= {"time_h", "decision_job", "action_mask", "reward_terms"}


def test_reward_terms_add_up_to_the_episode_metrics():
    env = tenants_v0.parallel_env(jobs=40)
    obs, infos = env.reset(seed=2)
    rule = EvalStopRule(2)
    sums = {}
    while env.agents:
        obs, rew, _, _, infos = env.step({a: rule(obs[a]) for a in env.agents})
        for a, i in infos.items():
            for k, v in i["reward_terms"].items():
                sums[k] = sums.get(k, 0.0) + v
            w = env.reward_weights
            assert rew[a] == pytest.approx(sum(w[k] * v for k, v in i["reward_terms"].items()))
    m = infos["tenant_0"]["metrics"]
    assert sums["jct_h"] == pytest.approx(m["avg_jct_h"], rel=1e-9)
    assert sums["gpu_h"] == pytest.approx(m["gpu_hours"] / m["jobs"], rel=1e-9)
    # quality is the credited score (fresh evals for stops, final observed scores): close to the hidden
    # delivered quality at noise 0.02
    assert sums["quality"] == pytest.approx(m["delivered_quality"], abs=0.02)
    parts = [i["tenant_metrics"] for i in infos.values() if i["tenant_metrics"] is not None]
    assert sum(p["jobs"] for p in parts) == m["jobs"]
    assert sum(p["avg_jct_h"] * p["jobs"] for p in parts) / m["jobs"] == pytest.approx(m["avg_jct_h"])
    assert sum(p["compute_waste_gpu_h"] for p in parts) == pytest.approx(m["compute_waste_gpu_h"])


def test_pickled_mid_episode_env_continues_identically():
    env = tenants_v0.parallel_env(jobs=20, platform_stopper="evalstop")
    obs, infos = env.reset(seed=9)
    for _ in range(10):
        obs, *_, infos = env.step(dict.fromkeys(env.agents, 1))
    twin = pickle.loads(pickle.dumps(env))
    for e in (env, twin):
        for x in e.possible_agents:
            e.action_space(x).seed(1)
    a = [env.step({x: env.action_space(x).sample() for x in env.agents}) for _ in range(20)]
    b = [twin.step({x: twin.action_space(x).sample() for x in twin.agents}) for _ in range(20)]
    assert data_equivalence(a, b, exact=True)
    aec = tenants_v0.env(jobs=10)
    aec.reset(seed=0)
    assert pickle.loads(pickle.dumps(aec)).agent_selection == aec.agent_selection


def test_configuration_errors_name_the_field():
    with pytest.raises(ConfigError, match="bogus"):
        tenants_v0.parallel_env(bogus=1)
    with pytest.raises(ConfigError, match="scheduler"):
        tenants_v0.parallel_env(scheduler="nope")
    with pytest.raises(ConfigError, match="stopper"):
        tenants_v0.parallel_env(platform_stopper="nope")
    with pytest.raises(ConfigError, match="reward_weights.speed"):
        tenants_v0.parallel_env(reward_weights={"speed": 1.0})
    env = tenants_v0.parallel_env(tenants=2)
    with pytest.raises(ConfigError, match="options.tenants"):
        env.reset(options={"tenants": 3})
    with pytest.raises(ConfigError, match="job 3.tenant"):
        env.reset(options={"workload": toy_workload()})  # job 3 belongs to tenant 2 of 0..1
    with pytest.raises(RuntimeError, match="reset"):
        tenants_v0.parallel_env().step({})


def test_truncation_and_rendering():
    env = tenants_v0.parallel_env(jobs=20, max_steps=3, render_mode="ansi")
    env.reset(seed=0)
    assert "decision=eval" in env.render()
    for _ in range(3):
        _, _, term, trunc, infos = env.step(dict.fromkeys(env.agents, 0))
    assert all(trunc.values()) and not any(term.values()) and env.agents == []
    assert "metrics" not in infos["tenant_0"]  # an unfinished episode has no metrics


def test_options_override_workload_fields_for_one_episode():
    env = tenants_v0.parallel_env(jobs=10)
    env.reset(seed=1, options={"jobs": 5})
    assert play(env, never_stop, seed=1, options={"jobs": 5})["metrics"]["jobs"] == 5
    assert play(env, never_stop, seed=1)["metrics"]["jobs"] == 10


def test_rllib_parallel_pettingzoo_env_plays_the_same_episode():
    """Through RLlib's wrapper, tenants running EvalStop(k=2) get the platform metrics and returns of the
    same episode played on the env directly."""
    wrappers = pytest.importorskip("ray.rllib.env.wrappers.pettingzoo_env")
    from evalstop_gym.multiagent.rules import STOP

    rule = EvalStopRule(k=2)
    env = wrappers.ParallelPettingZooEnv(tenants_v0.parallel_env(jobs=24))
    obs, infos = env.reset(seed=0)
    assert set(obs) == set(env.get_agent_ids())
    returns = dict.fromkeys(env.get_agent_ids(), 0.0)
    done = False
    while not done:
        obs, rew, term, trunc, infos = env.step({a: rule(o) if infos[a]["action_mask"][STOP] else 0
                                                 for a, o in obs.items()})
        for a, r in rew.items():
            returns[a] += r
        done = term["__all__"] or trunc["__all__"]
    direct = play(tenants_v0.parallel_env(jobs=24), rule, seed=0)
    assert direct["metrics"]["jobs_stopped"] > 0        # the stop actions went through
    assert infos["tenant_0"]["metrics"] == direct["metrics"]
    assert returns == pytest.approx(direct["returns"])


def test_importing_the_package_does_not_import_pettingzoo():
    code = "import sys, evalstop_gym; assert 'pettingzoo' not in sys.modules; print('ok')"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "ok"


def test_rules_doctest():
    import doctest

    from evalstop_gym.multiagent import rules

    assert doctest.testmod(rules).failed == 0
