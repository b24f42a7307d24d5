"""EvalStop-StopControl-v0's step plays exactly what its plain version played.

The env packs its observation into a fresh array with one ``struct`` call, copies its mask from a kept
array, credits stops in Python floats and skips the reward bookkeeping of an advance in which no time passed. ``PlainStopControl``
below is the env written the plain way: observations and masks handed to NumPy as Python lists, the
credit in NumPy scalars, the bookkeeping of every advance done in full. Same seed, same actions:
every observation byte, reward, flag and ``info`` entry must be equal, over episodes that cover
stops, completions, preemptions, the node block, weighted hidden-truth terms and a fixed queue load.
The reward is also summed again from the step's own ``reward_terms`` and weights, and each observation
is the one :func:`stop_observation` gives a saved stop-policy at the same checkpoint.
"""

import numpy as np
import pytest

from evalstop_gym.envs.base import HIDDEN_TERMS, TERMS, FreshEvalCredit
from evalstop_gym.envs.features import N_JOB, cluster_row, job_row, topology_row
from evalstop_gym.envs.stop_env import StopControlEnv, stop_observation
from evalstop_gym.simulator import EVAL
from evalstop_gym.view import COMPLETED


class NumpyScalarCredit(FreshEvalCredit):
    def __call__(self, job_id, checkpoint):
        return float(self._gold[job_id, checkpoint] + self._sd[job_id, checkpoint] * self._z[job_id])


class PlainStopControl(StopControlEnv):
    """The same env with its observation, mask, credit and time bookkeeping written the plain way."""

    def reset(self, **kw):
        out = super().reset(**kw)
        self.fresh_eval.__class__ = NumpyScalarCredit  # used only from the first step on (stops)
        return out

    def _observe(self):
        c = self._sim.cluster
        job = self._sim.decision_job if self._kind == EVAL else None
        if job is not None:
            row = job_row(job, c.total_gpus, True) + cluster_row(c, shown_running=1, eval_point=True)
        else:
            row = [0.0] * N_JOB + cluster_row(c)
        if self._topo_spec is not None:
            row += topology_row(c, [job] if job is not None else [], 1)
        return np.array(row, np.float32)

    def action_masks(self):
        return np.array([1, 1] if self._kind == EVAL else [1, 0], np.int8)

    def _advance(self):
        sim = self._sim
        c = sim.cluster
        t0, active, finished = c.now_h, len(c.running) + len(c.waiting), c.finished
        running = list(c.running)
        busy = c.total_gpus - c.free_gpus
        load = len(c.waiting) / c.total_gpus if self.queue_load is None else self.queue_load
        kind = sim.advance()
        dt = c.now_h - t0
        self._terms[0] += active * dt
        self._terms[4] += busy * dt * load
        if c.finished != finished:
            for j in running:
                if sim.views[j].status == COMPLETED:
                    self._job_ended(sim.views[j], stopped=False)
        if kind == EVAL:
            v = sim.decision_job
            if v.eval_scores[-1] > self._best[v.job_id]:
                self._best[v.job_id] = v.eval_scores[-1]
                self._best_idx[v.job_id] = len(v.eval_scores) - 1
                self._best_gpu_h[v.job_id] = v.attained_gpu_h
        self._kind = kind
        return kind


def same(a, b):
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def summed_reward(info, weights):
    """The reward from the step's own per-job terms, in TERMS order then the invalid action's."""
    parts = info["reward_terms"]
    total = 0
    for k in TERMS:
        if parts.get(k):
            total += weights[k] * parts[k]
    if info["invalid_action"]:
        total += weights["invalid"] * 1.0
    return float(total)


CASES = {
    "default": {"jobs": 60},
    "realistic": {"jobs": 40, "calibration": "realistic"},
    "nodes": {"jobs": 40, "cluster": "nodes8"},
    "hidden terms": {"jobs": 40, "reward_weights": {"detect": 1.0, "true_waste_gpu_h": -0.5, "stops": -0.01}},
    "queue load": {"jobs": 40, "queue_load": 1.5, "reward_weights": {"queue_h": -1.0}, "scheduler": "fifo"},
}


@pytest.mark.parametrize("kw", CASES.values(), ids=CASES.keys())
def test_step_equals_the_plain_env(kw):
    env, plain = StopControlEnv(**kw), PlainStopControl(**kw)
    rng = np.random.default_rng(7)
    episodes = steps = stops = 0
    for seed in (3, 11):
        got, want = env.reset(seed=seed), plain.reset(seed=seed)
        assert same(got[0], want[0]) and same(got[1], want[1])
        episodes += 1
        while True:
            a = int(rng.random() < 0.3) if rng.random() < 0.97 else 5  # now and then an invalid action
            got, want = env.step(a), plain.step(a)
            steps, stops = steps + 1, stops + (a == 1)
            for g, w in zip(got, want):
                assert same(g, w), (seed, steps, g, w)
            obs, reward, terminated, truncated, info = got
            assert obs.flags.writeable and obs.dtype == np.float32
            # what a saved stop-policy is shown at the same checkpoint
            alone = stop_observation(env.cluster, env.decision_job, env._topo_spec is not None)
            assert same(alone, obs)
            hidden = [k for k in HIDDEN_TERMS if env.reward_weights[k] == 0.0]
            assert list(info["reward_terms"]) == [k for k in TERMS if k not in hidden] + ["invalid"]
            assert reward == summed_reward(info, env.reward_weights)
            if terminated or truncated:
                assert "metrics" in info
                break
    assert episodes == 2 and steps > 200 and stops > 20


def test_observations_are_fresh_arrays():
    """Each step's observation and mask are new arrays: changing one changes nothing the env returns later."""
    env = StopControlEnv(jobs=10)
    obs, info = env.reset(seed=1)
    obs2, _, _, _, info2 = env.step(0)
    kept, mask = obs2.copy(), info2["action_mask"].copy()
    obs[:] = -1.0
    info["action_mask"][:] = 0
    obs3, _, _, _, info3 = env.step(0)
    assert obs2.tobytes() == kept.tobytes() and info2["action_mask"].tobytes() == mask.tobytes()
    assert not np.shares_memory(obs2, obs3) and not np.shares_memory(info2["action_mask"], info3["action_mask"])
