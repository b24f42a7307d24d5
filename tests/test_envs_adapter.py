"""Hand-coded policies through the Gymnasium envs give exactly the direct simulator's metrics,
and nothing hidden leaks into observations or per-step info."""

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import data_equivalence

import evalstop_gym
from evalstop_gym.baselines import SCHEDULERS, STOPPERS, make_policy
from evalstop_gym import WorkloadConfig, generate, run_policy, simulate
from evalstop_gym.cluster import two_types, uniform
from evalstop_gym.envs.adapter import CLUSTER_ID, STOP_CONTROL_ID, PolicyAgent, rollout, run_through_env
from evalstop_gym.policy import Scheduler
from evalstop_gym.workload import workload_from_jobs

COMBOS = [(s, t) for s in SCHEDULERS for t in STOPPERS]


@pytest.mark.parametrize("env_id", [CLUSTER_ID, STOP_CONTROL_ID])
@pytest.mark.parametrize("scheduler,stopper", COMBOS)
def test_every_combination_matches_the_direct_simulator(env_id, scheduler, stopper):
    direct = simulate(scheduler, stopper, jobs=40, seed=3)
    assert run_through_env(scheduler, stopper, env_id=env_id, jobs=40, seed=3) == direct


class TimeSliced(Scheduler):
    """Preemptive least-attained-service with a 0.5 h time slice: exercises preemption and wake-ups
    whatever baselines are registered."""

    name = "time-sliced"
    preemptive = True

    def key(self, job, cluster):
        return job.attained_h, job.submit_h

    def wakeup(self, cluster, plan):
        return cluster.now_h + 0.5 if cluster.waiting else None


def test_preemptions_and_wakeups_match_too():
    from evalstop_gym.baselines import EvalStop

    w = generate(WorkloadConfig(jobs=30, load=2.0, seed=5))
    direct = run_policy(w, EvalStop(TimeSliced()))
    assert direct["preemptions"] > 10
    env = gym.make(CLUSTER_ID, slots=30)
    out = rollout(env, PolicyAgent(EvalStop(TimeSliced()), env), options={"workload": w})
    assert out["metrics"] == direct


def test_default_window_reproduces_a_default_size_episode():
    kw = dict(jobs=200, seed=3)
    assert run_through_env("fifo", "evalstop", slots=32, **kw) == simulate("fifo", "evalstop", **kw)


def test_a_job_outside_the_window_is_a_clear_error():
    # SJF-like: the shortest estimate is deep in the queue, beyond a one-slot window
    class Shortest(Scheduler):
        def key(self, job, cluster):
            return job.est_length_h

    env = gym.make(CLUSTER_ID, slots=1, jobs=30, load=3.0)
    with pytest.raises(ValueError, match="not in the observation window of 1 slots"):
        rollout(env, PolicyAgent(Shortest(), env), seed=0)


def toy():
    # 4 GPUs. J0 (2 GPUs, 4 h) and J1 (4 GPUs, 2 h) arrive at t=0, J2 (2 GPUs, 1 h) at t=1; 4 evals each.
    return workload_from_jobs([dict(submit_h=0.0, gpus=2, length_h=4.0),
                               dict(submit_h=0.0, gpus=4, length_h=2.0),
                               dict(submit_h=1.0, gpus=2, length_h=1.0)], total_gpus=4)


def test_cluster_env_step_by_step_on_the_toy_workload():
    env = gym.make(CLUSTER_ID, slots=4)
    obs, info = env.reset(seed=0, options={"workload": toy()})
    u = env.unwrapped
    assert info["decision"] == "schedule" and info["time_h"] == 0.0
    assert [v.job_id for v in u.window] == [0, 1]
    # idle cluster with a queue: commit is masked, both jobs may start
    assert info["action_mask"].tolist() == [0, 0, 1, 1, 0, 0]
    obs, r, term, trunc, info = env.step(2)            # start J0 (slot 0)
    assert r == 0.0 and u.cluster.free_gpus == 2
    # J0 started at this instant (no preempt); J1 needs 4 GPUs, 2 are free
    assert info["action_mask"].tolist() == [1, 0, 0, 0, 0, 0]
    obs, r, term, trunc, info = env.step(0)            # commit: time runs to t=1
    # J2 arrives and J0 reaches its first checkpoint at t=1: the checkpoint is the decision
    assert info["decision"] == "eval" and info["decision_job"] == 0 and info["time_h"] == 1.0
    assert info["reward_terms"]["jct_h"] == pytest.approx(2 * 1.0 / 3)   # 2 jobs in system for 1 h
    assert r == pytest.approx(-2 / 3)
    assert info["action_mask"].tolist() == [1, 1, 0, 0, 0, 0]
    obs, r, term, trunc, info = env.step(0)            # continue
    assert info["decision"] == "schedule" and [v.job_id for v in u.window] == [0, 1, 2]
    assert info["action_mask"].tolist() == [1, 0, 1, 0, 1, 0]  # preempt J0 or start J2 (J1 does not fit)
    obs, r, term, trunc, info = env.step(4)            # start J2
    obs, r, term, trunc, info = env.step(0)
    assert info["decision"] == "eval" and info["time_h"] == pytest.approx(1.25)  # J2: 1 h over 4 evals


def test_hidden_state_changes_nothing_before_the_end():
    # Same public story (submit times, lengths, observed scores, losses), different hidden truth:
    # true scores and hacking labels. Values are multiples of 1/64 so observed = gold + z is exact.
    obs_scores = [[8, 16, 12, 10], [4, 8, 16, 20], [8, 12, 10, 14]]
    gold_a = [[8, 16, 16, 16], [4, 8, 16, 20], [8, 12, 12, 14]]
    gold_b = [[8, 8, 8, 8], [2, 2, 2, 2], [16, 16, 16, 16]]

    def workload(gold, hacking):
        return workload_from_jobs([dict(submit_h=s, gpus=g, length_h=ln, hacking=h,
                                        gold=[x / 64 for x in gr], observed=[x / 64 for x in o])
                                   for s, g, ln, h, gr, o in zip((0.0, 0.0, 0.5), (2, 2, 1), (4.0, 2.0, 1.0),
                                                                 hacking, gold, obs_scores)], total_gpus=4)

    runs = []
    for w in (workload(gold_a, (True, False, False)), workload(gold_b, (False, True, False))):
        env = gym.make(CLUSTER_ID, slots=4)
        agent = PolicyAgent(make_policy("fifo", "evalstop", k=1), env)
        first = env.reset(seed=0, options={"workload": w})
        agent.reset()
        steps = [first]
        while True:
            step = env.step(agent(steps[-1][0]))
            steps.append(step)
            if step[2]:
                break
        runs.append(steps)
    a, b = runs
    assert len(a) == len(b)
    final_a, final_b = a[-1][-1].pop("metrics"), b[-1][-1].pop("metrics")
    # a stopped job is credited a fresh eval of its delivered checkpoint: a new public draw around its
    # true score, the one signal that may differ; every observation, flag and other info is the same
    def public(steps):
        out = []
        for s in steps:
            if len(s) == 5:  # (obs, reward, terminated, truncated, info): drop the credited score
                terms = {k: v for k, v in s[4]["reward_terms"].items() if k != "quality"}
                s = (s[0], s[2], s[3], {**s[4], "reward_terms": terms})
            out.append(s)
        return out

    assert data_equivalence(public(a), public(b), exact=True)
    assert final_a["jobs_stopped"] == final_b["jobs_stopped"] > 0
    assert final_a["true_positives"] != final_b["true_positives"]
    assert final_a["delivered_quality"] != final_b["delivered_quality"]


STEP_INFO_KEYS = {"decision", "time_h", "decision_job", "action_mask", "reward_terms", "invalid_action"}


@pytest.mark.parametrize("env_id", [CLUSTER_ID, STOP_CONTROL_ID])
def test_metrics_only_in_the_final_info(env_id):
    # StopControl's base scheduler is its own (default srtf-est): set to the one simulate is asked for
    env = gym.make(env_id, jobs=20, slots=20) if env_id == CLUSTER_ID else gym.make(env_id, jobs=20, scheduler="fifo")
    agent = PolicyAgent(make_policy("fifo", "evalstop"), env)
    obs, info = env.reset(seed=1)
    agent.reset()
    assert set(info) == STEP_INFO_KEYS - {"reward_terms", "invalid_action"}
    while True:
        obs, r, term, trunc, info = env.step(agent(obs))
        if term:
            break
        assert set(info) == STEP_INFO_KEYS
        assert set(info["reward_terms"]) == {"jct_h", "waste_gpu_h", "quality", "preempt_gpu_h", "queue_h", "stops", "invalid"}
    assert set(info) == STEP_INFO_KEYS | {"metrics"}
    assert info["metrics"] == simulate("fifo", "evalstop", jobs=20, seed=1)


def test_features_read_only_public_views():
    import inspect

    from evalstop_gym.envs import features

    src = inspect.getsource(features)
    for hidden in ("length_h", "hacking", "gold", "eval_z", "peak_progress", "_w", "workload", "_sim"):
        assert f".{hidden}" not in src.replace(".est_length_h", ""), hidden


def test_registration_is_idempotent_and_namespaced():
    before = dict(gym.registry)
    evalstop_gym.envs.register_envs()
    evalstop_gym.envs.register_envs()
    assert dict(gym.registry) == before
    for env_id in evalstop_gym.envs.ENVS:
        assert gym.spec(env_id).entry_point.startswith("evalstop_gym.envs.")
        env = gym.make(f"evalstop_gym:{env_id}", jobs=5)
        assert env.unwrapped.spec.id == env_id
        env.close()


def test_reset_seed_plays_the_same_workload_as_simulate():
    env = gym.make(STOP_CONTROL_ID, scheduler="fifo", jobs=25, seed=9)
    agent = PolicyAgent(make_policy("fifo", "evalstop"), env)
    # the first unseeded reset plays the configured seed, reset(seed=s) plays seed s
    assert rollout(env, agent)["metrics"] == simulate("fifo", "evalstop", jobs=25, seed=9)
    assert rollout(env, agent, seed=11)["metrics"] == simulate("fifo", "evalstop", jobs=25, seed=11)
    # later unseeded resets draw workload seeds from env.np_random: a new, reproducible episode
    third = rollout(env, agent)["metrics"]
    assert third != simulate("fifo", "evalstop", jobs=25, seed=11)
    rollout(env, agent, seed=11)
    assert rollout(env, agent)["metrics"] == third


@pytest.mark.parametrize("env_id", [CLUSTER_ID, STOP_CONTROL_ID])
@pytest.mark.parametrize("scheduler", list(SCHEDULERS))
@pytest.mark.parametrize("stopper", ["none", "evalstop", "divergence"])
def test_the_realistic_world_matches_the_direct_simulator(env_id, scheduler, stopper):
    """Costs, speed jitter and per-job eval noise are workload data: the envs replay them exactly."""
    direct = simulate(scheduler, stopper, jobs=40, seed=3, calibration="realistic")
    assert run_through_env(scheduler, stopper, env_id=env_id, jobs=40, seed=3, calibration="realistic") == direct


# clusters of nodes: the env's placement policy places the jobs a plan starts on the nodes the plan chose
NODE_CLUSTERS = {
    "consolidate": uniform(4, 8, "consolidate"),
    "first-fit": uniform(4, 8, "first-fit"),
    "spread": uniform(4, 8, "spread"),
    "two-types": two_types(4, 8, "consolidate"),
}


@pytest.mark.parametrize("env_id", [CLUSTER_ID, STOP_CONTROL_ID])
@pytest.mark.parametrize("cluster", NODE_CLUSTERS)
@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_every_scheduler_on_nodes_matches_the_direct_simulator(env_id, cluster, scheduler):
    spec = NODE_CLUSTERS[cluster]
    kw = dict(jobs=40, seed=3, load=1.5, gpus=spec.total_gpus, cluster=spec)
    direct = simulate(scheduler, "evalstop", **kw)
    assert run_through_env(scheduler, "evalstop", env_id=env_id, **kw) == direct


@pytest.mark.parametrize("scheduler,stopper", COMBOS)
def test_every_combination_on_spread_nodes_matches_the_direct_simulator(scheduler, stopper):
    spec = NODE_CLUSTERS["spread"]
    kw = dict(jobs=30, seed=4, gpus=spec.total_gpus, cluster=spec)
    assert run_through_env(scheduler, stopper, **kw) == simulate(scheduler, stopper, **kw)


def test_preemptive_plans_on_nodes_keep_their_placements_through_the_env():
    # SRTF-Est plans from an empty cluster; its starts must land where the plan put them
    spec = NODE_CLUSTERS["consolidate"]
    kw = dict(jobs=40, seed=5, load=2.0, gpus=spec.total_gpus, cluster=spec)
    direct = simulate("srtf-est", **kw)
    assert direct["preemptions"] > 0
    assert run_through_env("srtf-est", **kw) == direct


@pytest.mark.parametrize("scheduler", ["fifo", "srtf-est", "tiresias"])
def test_the_realistic_world_on_nodes_matches_the_direct_simulator(scheduler):
    """Costs and speed jitter combine with placement speeds: still exactly the simulator's results."""
    spec = NODE_CLUSTERS["spread"]
    kw = dict(jobs=40, seed=3, calibration="realistic", gpus=spec.total_gpus, cluster=spec)
    assert run_through_env(scheduler, "evalstop", **kw) == simulate(scheduler, "evalstop", **kw)
