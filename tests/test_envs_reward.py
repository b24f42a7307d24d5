"""The reward: public terms that sum to the episode's JCT and track the hidden metrics,
weighted so that the platform's preferences come out in the right order."""

import gymnasium as gym
import numpy as np
import pytest

from evalstop_gym.baselines import FIFO, make_policy
from evalstop_gym.envs.adapter import STOP_CONTROL_ID, PolicyAgent
from evalstop_gym.policy import Stopper


class StopEverything(Stopper):
    rule_name = "stop-everything"

    def rule(self, job, cluster):
        return True


def episode(policy, seed):
    env = gym.make(STOP_CONTROL_ID, scheduler="fifo")
    agent = PolicyAgent(policy, env)
    obs, _ = env.reset(seed=seed)
    agent.reset()
    ret, terms = 0.0, dict.fromkeys(("jct_h", "waste_gpu_h", "quality", "preempt_gpu_h", "queue_h", "stops", "invalid"), 0.0)
    while True:
        obs, r, term, trunc, info = env.step(agent(obs))
        ret += r
        for k, v in info["reward_terms"].items():
            terms[k] += v
        if term:
            return ret, terms, info["metrics"]


@pytest.mark.parametrize("stopper", ["none", "evalstop"])
def test_terms_sum_to_the_episode_metrics(stopper):
    ret, terms, m = episode(make_policy("fifo", stopper), seed=0)
    assert terms["jct_h"] == pytest.approx(m["avg_jct_h"], rel=1e-9)         # exact by construction
    assert terms["quality"] == pytest.approx(m["delivered_quality"], abs=0.02)  # observed vs true scores
    per_job_waste = m["compute_waste_gpu_h"] / m["jobs"]
    assert terms["waste_gpu_h"] == pytest.approx(per_job_waste, rel=0.1)
    assert ret == pytest.approx(-terms["jct_h"] + 100.0 * terms["quality"])


def test_default_weights_rank_stopping_rules_as_a_platform_would():
    seeds = range(3)

    def mean_return(make):
        return np.mean([episode(make(), s)[0] for s in seeds])

    stop_all = mean_return(lambda: StopEverything(FIFO()))
    never = mean_return(lambda: make_policy("fifo", "none"))
    evalstop = mean_return(lambda: make_policy("fifo", "evalstop"))
    assert stop_all < never < evalstop
