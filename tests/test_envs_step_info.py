"""The kept observation rows and the lean per-step info change nothing an agent can see.

EvalStop-Cluster-v0 keeps each job's row and writes it again only where it
changed (``features.JobTable``); every observation must equal, byte for byte,
the one :func:`~evalstop_gym.envs.features.observation` builds from scratch
from the same window, and every mask the one built by hand.
``step_info="lean"`` drops the per-step extras but plays the same episode:
same observations, rewards, masks and final metrics.
"""

import gymnasium as gym
import numpy as np
import pytest

import evalstop_gym  # noqa: F401
from evalstop_gym.config import ConfigError
from evalstop_gym.envs.features import TIME_SCALE_H, _clock_part, cluster_row, observation, topology_row
from evalstop_gym.view import RUNNING


def play(env, steps, seed=4):
    obs, info = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    out = [(obs, 0.0, info)]
    for _ in range(steps):
        mask = info["action_mask"]
        obs, reward, terminated, truncated, info = env.step(int(rng.choice(np.flatnonzero(mask))))
        out.append((obs, reward, info))
        if terminated or truncated:
            break
    return out


def reference_mask(inner):
    """The action mask built by hand from the public views (docs/mdp.md)."""
    c, win, n = inner.cluster, inner.window, inner.action_space.n
    if inner.decision == "eval":
        return np.array([1, 1] + [0] * (n - 2), np.int8)
    if inner.decision == "done":
        return np.array([1] + [0] * (n - 1), np.int8)
    commit = bool(c.running) or not c.waiting or inner._wakeup_h > c.now_h
    slots = [inner._started_at[v.job_id] != c.now_ticks if v.status == RUNNING else v.gpus <= c.largest_fit()
             for v in win]
    return np.array([commit, 0, *slots] + [0] * (n - 2 - len(win)), np.int8)


@pytest.mark.parametrize("kw", [{}, {"cluster": "two-types"}, {"slots": 6}])
def test_kept_rows_equal_the_observation_built_from_scratch(kw):
    """Over a long random episode every observation is byte for byte the one features.observation builds
    from scratch from the same window (job_row per job), and every mask the one built by hand."""
    env = gym.make("EvalStop-Cluster-v0", jobs=150, load=2.0, **kw)
    inner = env.unwrapped
    obs, info = env.reset(seed=2)
    rng = np.random.default_rng(2)
    for steps in range(20000):
        c, win = inner.cluster, inner.window
        shown = sum(v.status == RUNNING for v in win)
        row = cluster_row(c, shown_running=shown, shown_waiting=len(win) - shown,
                          eval_point=inner.decision == "eval", schedule_point=inner.decision == "schedule")
        if c.node_free is not None:
            row += topology_row(c, win, inner.slots)
        want = observation(win, inner.slots, c.total_gpus, row,
                           inner.decision_job.job_id if inner.decision == "eval" else None)
        assert obs.dtype == want.dtype and obs.tobytes() == want.tobytes()
        assert info["action_mask"].tobytes() == reference_mask(inner).tobytes()
        info["action_mask"][:] = 0  # each mask handed out is the caller's own copy
        mask = inner.action_masks()
        assert mask.tobytes() == reference_mask(inner).tobytes()
        obs, _, terminated, truncated, info = env.step(int(rng.choice(np.flatnonzero(mask))))
        if terminated or truncated:
            break
    assert terminated and steps > 1000


def clock_columns_from_properties(v):
    """A row's clock columns from the view's public properties (attained_h, waiting_h), in float64."""
    est, att, wait = v.est_length_h, v.attained_h, max(v.waiting_h, 0.0)
    rem = est - att if est > att else 0.0
    return tuple(x / (x + TIME_SCALE_H) for x in (att, rem, wait))


def test_clock_columns_read_from_the_views_fields_equal_the_properties():
    """_clock_part reads a view's tick fields in one pass; every shown job at every step of a long episode
    (running, waiting, resumed after preemption) gets the values the public properties give."""
    env = gym.make("EvalStop-Cluster-v0", jobs=150, load=2.0)
    inner = env.unwrapped
    obs, info = env.reset(seed=5)
    rng = np.random.default_rng(5)
    checked = set()
    for _ in range(20000):
        for v in inner.window:
            assert _clock_part(v) == clock_columns_from_properties(v)
            checked.add((v.status, v.attained_ticks > 0))
        obs, _, terminated, truncated, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
        if terminated or truncated:
            break
    assert checked == {("running", True), ("waiting", True), ("waiting", False), ("running", False)}


def test_lean_step_info_plays_the_same_episode():
    full = play(gym.make("EvalStop-Cluster-v0", jobs=20), 5000)
    lean = play(gym.make("EvalStop-Cluster-v0", jobs=20, step_info="lean"), 5000)
    assert len(full) == len(lean)
    for (o1, r1, i1), (o2, r2, i2) in zip(full, lean):
        assert np.array_equal(o1, o2) and r1 == r2 and np.array_equal(i1["action_mask"], i2["action_mask"])
    assert set(lean[-2][2]) == {"action_mask"}
    assert lean[-1][2]["metrics"] == full[-1][2]["metrics"]
    assert "reward_terms" in full[-2][2]


def test_no_step_info_plays_the_same_episode_with_masks_from_the_method():
    full = play(gym.make("EvalStop-Cluster-v0", jobs=20), 5000)
    env = gym.make("EvalStop-Cluster-v0", jobs=20, step_info="none")
    obs, info = env.reset(seed=4)
    assert "action_mask" in info          # reset's info is the full one in every mode
    rng = np.random.default_rng(4)        # the same draws as play()
    for t, (o, r, i) in enumerate(full):
        assert np.array_equal(obs, o)
        mask = env.unwrapped.action_masks()
        assert np.array_equal(mask, i["action_mask"])
        if t == len(full) - 1:
            break
        obs, reward, terminated, truncated, info = env.step(int(rng.choice(np.flatnonzero(mask))))
        assert reward == full[t + 1][1]
        if terminated or truncated:
            assert set(info) == {"metrics"} and info["metrics"] == full[-1][2]["metrics"]
        else:
            assert info == {}
    assert terminated


def test_step_info_is_checked():
    with pytest.raises(ConfigError, match="step_info='short' is invalid: must be one of full, lean, none"):
        gym.make("EvalStop-Cluster-v0", step_info="short")
