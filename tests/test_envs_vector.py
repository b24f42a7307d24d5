"""The native vector env (``gym.make_vec("EvalStop-Cluster-v0", N)``) returns what SyncVectorEnv returns.

Byte for byte: observations, rewards, terminations, truncations and every info entry with its ``_key``
mask, through autoresets, in both step_info modes it serves fast or in full, on the flat pool and on nodes.
"""

import gymnasium as gym
import numpy as np
import pytest

import evalstop_gym  # noqa: F401
from evalstop_gym.envs.features import JobTable
from evalstop_gym.envs.vector import ClusterVectorEnv


def same(x, y, where=""):
    """Equal structure, dtypes, shapes and bytes."""
    if isinstance(x, tuple):
        assert isinstance(y, tuple) and len(x) == len(y), where
        for i, (a, b) in enumerate(zip(x, y)):
            same(a, b, f"{where}[{i}]")
        return
    if isinstance(x, dict):
        assert isinstance(y, dict) and set(x) == set(y), (where, set(x) ^ set(y))
        for k in x:
            same(x[k], y[k], f"{where}/{k}")
        return
    x, y = np.asarray(x), np.asarray(y)
    assert (x.dtype, x.shape) == (y.dtype, y.shape), where
    if x.dtype == object:
        assert x.tolist() == y.tolist(), where
    else:
        assert x.tobytes() == y.tobytes(), where


@pytest.mark.parametrize("kw", [{"step_info": "lean"}, {},
                                {"step_info": "lean", "cluster": "nodes8", "slots": 6}])
def test_native_vector_env_equals_sync_vector_env_through_autoresets(kw):
    kw = {"jobs": 25, **kw}
    native = gym.make_vec("EvalStop-Cluster-v0", num_envs=3, **kw)
    assert isinstance(native, ClusterVectorEnv)
    sync = gym.make_vec("EvalStop-Cluster-v0", num_envs=3, vectorization_mode="sync", **kw)
    assert isinstance(sync, gym.vector.SyncVectorEnv)
    assert native.observation_space == sync.observation_space and native.action_space == sync.action_space
    obs, info = native.reset(seed=7)
    same((obs, info), sync.reset(seed=7))
    rng, ends = np.random.default_rng(1), 0
    for t in range(1500):
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in info["action_mask"]])
        if t % 97 == 0:
            actions[0] = native.single_action_space.n - 1   # now and then an invalid action: a penalized no-op
        out = native.step(actions)
        same(out, sync.step(actions), f"step {t}")
        info = out[4]
        ends += int(out[2].sum() + out[3].sum())
        assert native.observation_space.contains(out[0])
    assert ends >= 3   # autoresets were played
    # seeds as a list, and reset options, as SyncVectorEnv takes them
    same(native.reset(seed=[3, None, 5], options={"jobs": 10})[0][[0, 2]],
         sync.reset(seed=[3, None, 5], options={"jobs": 10})[0][[0, 2]])
    native.close()
    sync.close()


def test_copies_by_default_and_hands_out_its_buffers_with_copy_false():
    envs = ClusterVectorEnv(2, jobs=10, step_info="lean")
    a, info = envs.reset(seed=0)
    b = envs.step(np.zeros(2, np.int64))[0]
    assert a is not b and not np.shares_memory(a, b)
    info["action_mask"][:] = 0      # the caller's own copy
    assert envs.action_masks().any()
    shared = ClusterVectorEnv(2, jobs=10, step_info="lean", copy=False)
    a, _ = shared.reset(seed=0)
    assert shared.step(np.zeros(2, np.int64))[0] is a   # the batch itself, rewritten in place


def test_bad_seeds_and_options_are_clear_errors():
    envs = ClusterVectorEnv(2, jobs=10)
    with pytest.raises(ValueError, match="one per env, num_envs=2; got 3"):
        envs.reset(seed=[1, 2, 3])
    with pytest.raises(ValueError, match="reset_mask"):
        envs.reset(seed=0, options={"reset_mask": np.array([True, False])})
    with pytest.raises(ValueError, match="num_envs=0 is invalid"):
        ClusterVectorEnv(0)
    with pytest.raises(ValueError, match="step_info='short' is invalid"):
        ClusterVectorEnv(2, step_info="short")


def test_a_table_writes_only_into_a_buffer_of_its_shape():
    table = JobTable(4, 8)
    with pytest.raises(ValueError, match="C-contiguous float32 array of shape"):
        table.write_into(np.zeros(10, np.float32))
    with pytest.raises(ValueError, match="float64"):
        table.write_into(np.zeros(table._buf.shape, np.float64))
