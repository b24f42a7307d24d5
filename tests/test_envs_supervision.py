"""Simulation-only supervision: the hidden-truth reward terms ``detect`` and ``true_waste_gpu_h``
(evalstop_gym/envs/supervision.py). Checked by hand on a toy, against the hidden metrics on generated
episodes of both envs, and for what they must not change: the default reward, the public terms and
every observation."""

import gymnasium as gym
import numpy as np
import pytest

from evalstop_gym.baselines import make_policy
from evalstop_gym.config import ConfigError
from evalstop_gym.envs.adapter import CLUSTER_ID, STOP_CONTROL_ID, PolicyAgent
from evalstop_gym.envs.supervision import HIDDEN_TERMS, detect_term
from evalstop_gym.workload import workload_from_jobs

ONLY_HIDDEN = {"jct_h": 0.0, "quality": 0.0, "preempt_gpu_h": 0.0, "invalid": 0.0}


def toy():
    """Five 4 h jobs with checkpoints at 1, 2, 3 and 4 h (the last is the completion), all running from t = 0
    on 6 GPUs. Job 0 (2 GPUs) hacks, true peak at 2 h; job 1 is healthy, peak at its end; job 2 hacks, peak
    at 2 h; job 3 is healthy, peak at its end; job 4 is healthy, peak at its first checkpoint (1 h)."""
    rising, hack = [0.5, 0.6, 0.7, 0.8], [0.5, 0.8, 0.6, 0.4]
    jobs = [dict(gpus=2, hacking=True, gold=hack), dict(hacking=False, gold=rising),
            dict(hacking=True, gold=hack), dict(hacking=False, gold=rising),
            dict(hacking=False, gold=[0.9, 0.5, 0.6, 0.7])]
    return workload_from_jobs([dict(submit_h=0.0, length_h=4.0, **j) for j in jobs], total_gpus=6)


# job -> the checkpoint (1-based) at which the toy's driver stops it: job 0 after its peak, job 1 at once
TOY_STOPS = {0: 3, 1: 1}


def play_toy(weights):
    env = gym.make(STOP_CONTROL_ID, scheduler="fifo", reward_weights=weights)
    obs, info = env.reset(options={"workload": toy()})
    seen = dict.fromkeys(range(5), 0)
    steps = []
    while True:
        j = info["decision_job"]
        seen[j] += 1
        action = int(TOY_STOPS.get(j) == seen[j])
        obs, r, term, trunc, info = env.step(action)
        steps.append((j, action, r, info["reward_terms"]))
        if term:
            return steps, info["metrics"]


def test_hand_computed_toy():
    steps, m = play_toy({**ONLY_HIDDEN, "detect": 1.0, "true_waste_gpu_h": -0.5})
    # by hand: job 0 stopped hacking (TP, +1), ran 3 h - 2 h = 1 h past its peak on 2 GPUs (2 GPU-h);
    # job 1 stopped healthy (FP, -1), never reached its peak (0); job 2 completed hacking (FN, -1),
    # 4 h - 2 h on 1 GPU (2 GPU-h); job 3 completed healthy (0, 0); job 4 completed healthy, 4 h - 1 h (3 GPU-h)
    n = 5
    detect = sum(t["detect"] for *_, t in steps) * n
    waste = sum(t["true_waste_gpu_h"] for *_, t in steps) * n
    assert detect == pytest.approx(1 - 1 - 1 + 0 + 0)
    assert waste == pytest.approx(2 + 0 + 2 + 0 + 3)
    assert sum(r for _, _, r, _ in steps) == pytest.approx((-1 - 0.5 * 7) / n)
    # each job's terms arrive in the step in which it ends: the stops' own steps
    stop_steps = {j: t for j, a, _, t in steps if a == 1}
    assert stop_steps[1]["detect"] == pytest.approx(-1 / n) and stop_steps[1]["true_waste_gpu_h"] == 0.0
    assert stop_steps[0]["detect"] == pytest.approx(1 / n)
    assert stop_steps[0]["true_waste_gpu_h"] == pytest.approx(2 / n)
    # the hidden metrics agree: TP - FP - FN and the compute waste
    assert (m["true_positives"], m["false_positives"], m["false_negatives"]) == (1, 1, 1)
    assert m["compute_waste_gpu_h"] == pytest.approx(7)


def test_detect_term_by_outcome():
    assert [detect_term(h, s) for h, s in ((True, True), (False, True), (True, False), (False, False))] \
        == [1.0, -1.0, -1.0, 0.0]


def episode(env_id, weights, seed=2, jobs=40, **kwargs):
    """One realistic-world episode under srtf-est + droptest: (observations, rewards, reward terms, metrics)."""
    env = gym.make(env_id, calibration="realistic", jobs=jobs, reward_weights=weights, **kwargs)
    agent = PolicyAgent(make_policy("srtf-est", "droptest"), env)
    obs, _ = env.reset(seed=seed)
    agent.reset()
    observations, rewards, terms = [obs.tobytes()], [], []
    while True:
        obs, r, term, trunc, info = env.step(agent(obs))
        observations.append(obs.tobytes())
        rewards.append(r)
        terms.append(info["reward_terms"])
        if term:
            return observations, rewards, terms, info["metrics"]


@pytest.mark.parametrize("env_id", [STOP_CONTROL_ID, CLUSTER_ID])
def test_terms_sum_to_the_hidden_metrics(env_id):
    _, _, terms, m = episode(env_id, {"detect": 1.0, "true_waste_gpu_h": -0.01})
    n = m["jobs"]
    assert m["true_positives"] > 0 and m["false_negatives"] + m["false_positives"] > 0  # every outcome counts
    assert sum(t["detect"] for t in terms) * n == pytest.approx(
        m["true_positives"] - m["false_positives"] - m["false_negatives"])
    assert sum(t["true_waste_gpu_h"] for t in terms) * n == pytest.approx(m["compute_waste_gpu_h"], rel=1e-9)


@pytest.mark.parametrize("env_id", [STOP_CONTROL_ID, CLUSTER_ID])
def test_off_by_default_and_nothing_else_changes(env_id):
    obs0, rew0, terms0, m0 = episode(env_id, None)
    weights = {"detect": 2.0, "true_waste_gpu_h": -0.03}
    obs1, rew1, terms1, m1 = episode(env_id, weights)
    # the boundary: the observations are byte-identical with and without the hidden terms
    assert obs1 == obs0
    assert m1 == m0
    # off by default: not computed, not reported; the public terms are the same numbers either way
    assert all(set(t).isdisjoint(HIDDEN_TERMS) for t in terms0)
    assert [{k: v for k, v in t.items() if k not in HIDDEN_TERMS} for t in terms1] == terms0
    # and the reward moves by exactly the weighted hidden terms, step by step
    for r0, r1, t in zip(rew0, rew1, terms1):
        assert r1 - r0 == pytest.approx(sum(w * t[k] for k, w in weights.items()), abs=1e-9)
    assert any(t["detect"] != 0 for t in terms1)


def test_a_hidden_weight_is_checked_like_any_other():
    with pytest.raises(ConfigError, match="reward_weights.detect"):
        gym.make(STOP_CONTROL_ID, reward_weights={"detect": float("nan")})
    np.testing.assert_equal(gym.make(STOP_CONTROL_ID, reward_weights={"true_waste_gpu_h": -1}).unwrapped
                            .reward_weights["true_waste_gpu_h"], -1.0)


def test_only_weighted_hidden_terms_show_and_a_weight_set_on_the_env_counts():
    """Weighting true waste alone does not report the hacking label; a hidden weight set on the env after
    gym.make is used from the next step, like a public weight (the toy: job 0 stopped past its peak is +1)."""
    steps, _ = play_toy({"true_waste_gpu_h": -1.0})
    assert all("detect" not in t and "true_waste_gpu_h" in t for _, _, _, t in steps)
    env = gym.make(STOP_CONTROL_ID, scheduler="fifo")
    obs, info = env.reset(options={"workload": toy()})
    env.unwrapped.reward_weights.update(ONLY_HIDDEN, detect=1.0)
    seen = dict.fromkeys(range(5), 0)
    total, reported = 0.0, set()
    while True:
        j = info["decision_job"]
        seen[j] += 1
        obs, r, term, trunc, info = env.step(int(TOY_STOPS.get(j) == seen[j]))
        total += r
        reported |= set(info["reward_terms"])
        if term:
            break
    # by hand: job 0 TP +1, job 1 FP -1, job 2 FN -1, jobs 3 and 4 completed healthy 0; per job of 5
    assert "detect" in reported and "true_waste_gpu_h" not in reported
    assert total == pytest.approx(-1 / 5)
