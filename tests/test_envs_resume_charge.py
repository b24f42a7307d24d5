"""A preemption is charged the expected resume of the episode's own world: the world its workload was
generated in, which ``reset(options=...)`` may change, not the world the env was made with."""

import math
from pathlib import Path

import gymnasium as gym
import pytest

from evalstop_gym import WorkloadConfig
from evalstop_gym.baselines import make_policy
from evalstop_gym.config import CALIBRATIONS, JOB_TYPES, WorldModel
from evalstop_gym.envs.adapter import CLUSTER_ID, STOP_CONTROL_ID, PolicyAgent
from evalstop_gym.envs.cluster_env import SLOT0
from evalstop_gym.view import RUNNING
from evalstop_gym.workload import generate, workload_from_jobs

PHILLY = Path(__file__).resolve().parents[1] / ".." / "shared" / "traces" / "philly_jobs_pollux.csv"
JOBS = 60
REALISTIC = CALIBRATIONS["realistic"].world
TO_REALISTIC = {"calibration": "realistic", "cluster": "flat"}  # the flat pool: the env's observation shape


def by_hand(world: WorldModel, job_type: str, gpus: int) -> float:
    """GPU-hours of a resume: ``gpus x (2 x state / bandwidth + warm-up)`` seconds, in expectation over a
    log-uniform bandwidth on [lo, hi] (density 1 / (b ln(hi / lo)), so E[1 / b] = (1/lo - 1/hi) / ln(hi / lo))
    and a uniform warm-up (its midpoint)."""
    lo, hi = world.storage_gbps
    inv_bw = (1 / lo - 1 / hi) / math.log(hi / lo)
    size = world.checkpoint_gb[JOB_TYPES.index(job_type)]
    return gpus * (2 * size * inv_bw + (world.warmup_s[0] + world.warmup_s[1]) / 2) / 3600


def charges(env_id, options=None, *, scheduler="srtf-est", **kwargs):
    """Play srtf-est + EvalStop through the env on seed 0 with ``options``. Returns (each step's charge in
    GPU-hours, the resumes each step caused as (job type, GPUs), the simulator's outcome)."""
    own = {"scheduler": scheduler} if env_id == STOP_CONTROL_ID else {"slots": 64}  # a window for every job
    env = gym.make(env_id, jobs=JOBS, **own, **kwargs)
    u = env.unwrapped
    agent = PolicyAgent(make_policy(scheduler, "evalstop"), env)
    obs, _ = env.reset(seed=0, options=options)
    agent.reset()
    resumes = []
    if env_id == STOP_CONTROL_ID:  # the base scheduler preempts: record its plans' preemptions
        schedule = u._scheduler.schedule

        def recording(cluster):
            plan = schedule(cluster)
            resumes[-1] += [(cluster.running[j].job_type, cluster.running[j].gpus) for j in plan.preempt]
            return plan

        u._scheduler.schedule = recording
    steps = []
    while True:
        a = agent(obs)
        resumes.append([])
        if env_id == CLUSTER_ID and u.decision == "schedule" and a >= SLOT0 and u.window[a - SLOT0].status == RUNNING:
            v = u.window[a - SLOT0]
            resumes[-1].append((v.job_type, v.gpus))
        obs, _, term, trunc, info = env.step(a)
        steps.append(info["reward_terms"]["preempt_gpu_h"] * JOBS)
        assert not trunc
        if term:
            return steps, resumes, u._sim.outcome()


@pytest.mark.parametrize("env_id", [CLUSTER_ID, STOP_CONTROL_ID])
def test_a_realistic_env_reset_into_the_papers_world_charges_nothing(env_id):
    steps, resumes, out = charges(env_id, {"calibration": "paper"}, calibration="realistic", cluster="flat")
    assert out.preemptions == sum(map(len, resumes)) > 0
    assert sum(steps) == 0.0  # the paper's resumes are free in the simulator, so they are in the reward
    steps, _, out = charges(env_id, calibration="realistic", cluster="flat")
    assert out.preemptions > 0 and sum(steps) > 0  # the env's own world does charge them


@pytest.mark.parametrize("env_id", [CLUSTER_ID, STOP_CONTROL_ID])
def test_a_paper_env_reset_into_the_realistic_world_charges_each_resume_at_realistic_prices(env_id):
    steps, resumes, out = charges(env_id, TO_REALISTIC)
    assert out.preemptions == sum(map(len, resumes)) > 0
    assert len({r for rs in resumes for r in rs}) > 1  # several (type, GPUs) demands priced
    for charged, rs in zip(steps, resumes):  # step by step, each preemption of that step
        assert charged == pytest.approx(sum(by_hand(REALISTIC, t, g) for t, g in rs), rel=1e-12, abs=0)


def test_a_reset_with_another_world_model_is_charged_in_that_model():
    # round numbers: bandwidth fixed at 2 GB/s (lo == hi), warm-up 10 s; an RLHF job saves and restores
    # 100 GB: 2 x 100 / 2 + 10 = 110 s per GPU, a LoRA job 10 s, a DPO job 2 x 40 / 2 + 10 = 50 s
    world = WorldModel(checkpoint_gb=(0.0, 40.0, 100.0), storage_gbps=(2.0, 2.0), warmup_s=(10.0, 10.0))
    per_gpu_s = {"lora": 10.0, "dpo": 50.0, "rlhf": 110.0}
    steps, resumes, out = charges(CLUSTER_ID, {"world": world})
    assert out.preemptions > 0
    for charged, rs in zip(steps, resumes):
        assert charged == pytest.approx(sum(g * per_gpu_s[t] / 3600 for t, g in rs), rel=1e-12, abs=0)


def test_ready_workloads_are_charged_as_their_simulator_charges_resumes():
    # generated in the paper's world (no resume costs), played on a realistic env: free
    paper = generate(WorkloadConfig(jobs=JOBS, seed=3))
    steps, resumes, out = charges(CLUSTER_ID, {"workload": paper}, calibration="realistic", cluster="flat")
    assert out.preemptions > 0 and sum(steps) == 0.0
    # a hand-written workload has no resume costs either; SRTF preempts the 4 h job for the 1 h one
    jobs = [dict(submit_h=0.0, gpus=8, length_h=4.0), dict(submit_h=1.0, gpus=8, length_h=1.0)]
    steps, resumes, out = charges(CLUSTER_ID, {"workload": workload_from_jobs(jobs, total_gpus=8)},
                                  calibration="realistic", cluster="flat")
    assert out.preemptions > 0 and sum(steps) == 0.0
    # one with resume costs is priced in the env's world
    real = generate(WorkloadConfig(jobs=JOBS, seed=3, calibration="realistic", cluster="flat"))
    steps, resumes, out = charges(CLUSTER_ID, {"workload": real}, calibration="realistic", cluster="flat")
    assert out.preemptions > 0
    for charged, rs in zip(steps, resumes):
        assert charged == pytest.approx(sum(by_hand(REALISTIC, t, g) for t, g in rs), rel=1e-12, abs=0)


@pytest.mark.skipif(not PHILLY.exists(), reason="../shared/traces/philly_jobs_pollux.csv is not here")
def test_trace_replays_are_charged_in_the_episodes_world():
    trace = dict(trace=str(PHILLY), trace_options={"jobs": JOBS, "gpu_scale": "fit"})
    steps, resumes, out = charges(CLUSTER_ID, {"calibration": "paper"}, calibration="realistic", cluster="flat",
                                  **trace)
    assert out.preemptions > 0 and sum(steps) == 0.0
    steps, resumes, out = charges(CLUSTER_ID, TO_REALISTIC, **trace)
    assert out.preemptions > 0
    for charged, rs in zip(steps, resumes):
        assert charged == pytest.approx(sum(by_hand(REALISTIC, t, g) for t, g in rs), rel=1e-12, abs=0)
