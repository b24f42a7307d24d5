"""Both single envs play byte for byte what they played before their step was made faster.

Each case rolls an env out for a fixed number of steps (episode resets included) under seeded random
actions that follow the action mask, and hashes everything the env returned: every observation's dtype,
shape and bytes, every reward's float64 bits, the flags, and every ``info`` entry in its order (arrays
by bytes, floats by their bits, the end-of-episode metrics included). The expected digests were recorded by
running this same file's :func:`rollout_digest` on the code before the speed-up of StopControl-v0's step,
commit bdbbbfe (``git archive bdbbbfe | tar x -C /tmp/before``, then ``PYTHONPATH=/tmp/before python3
tests/test_envs_rollout_digest.py``, which prints the table below); they are not this code's own output
pasted back. The realistic case was recorded again on that same commit with one change, the simulator's rule
that a resume cut short by a preemption is charged only the part it ran (``evalstop_gym/simulator.py``'s diff
applied with ``patch``): its episodes preempt jobs mid-resume; and again with a second one, a latent world's
binomial eval errors drawn from their own stream (``evalstop_gym/workload.py``'s diff), which moves the jobs'
speeds and costs the old shared stream drew after them. Every case was then recorded again on that commit with
those two changes and a third, the fresh-eval credit's own stream (``CREDIT_STREAM`` 2 -> 4 in
``evalstop_gym/envs/base.py``): with the first two alone it gives back every digest recorded before. Any change to an observation, a reward, a flag,
an ``info`` value or a metric changes a digest.
"""

import hashlib
import struct
import sys

import numpy as np
import pytest

from evalstop_gym.envs.cluster_env import ClusterEnv
from evalstop_gym.envs.stop_env import StopControlEnv

STEPS = 4000
CASES = {
    "stop default": (StopControlEnv, {}),
    "stop jobs=40 realistic": (StopControlEnv, {"jobs": 40, "calibration": "realistic"}),
    "stop nodes8": (StopControlEnv, {"jobs": 40, "cluster": "nodes8"}),
    "stop hidden terms": (StopControlEnv, {"jobs": 40, "reward_weights": {"detect": 1.0, "true_waste_gpu_h": -0.5,
                                                                          "stops": -0.01}}),
    "stop detect only": (StopControlEnv, {"jobs": 40, "reward_weights": {"detect": 2.0}}),
    "stop queue load, fifo": (StopControlEnv, {"jobs": 40, "queue_load": 1.5, "reward_weights": {"queue_h": -1.0},
                                               "scheduler": "fifo"}),
    "stop lean": (StopControlEnv, {"jobs": 60, "step_info": "lean"}),
    "stop none, max_steps": (StopControlEnv, {"jobs": 60, "step_info": "none", "max_steps": 70}),
    "stop max_steps, full": (StopControlEnv, {"jobs": 30, "max_steps": 45}),
    "cluster default": (ClusterEnv, {}),
    "cluster lean, nodes8": (ClusterEnv, {"jobs": 40, "cluster": "nodes8", "step_info": "lean"}),
}
# recorded on the code before the speed-up (module docstring)
EXPECTED = {
    'stop default': 'd100549d37a3d69d98c00ca836f7f8869c53d75c4b6495214c76d0b5bdc5c00c',
    'stop jobs=40 realistic': 'e26d8b2b3898a18e83724208bc5e4b9056246bb056d21f6af23ba8d0c199ca6e',
    'stop nodes8': '160161b4cac847857c3e7ed332653ca25233ca200ece945af955d5f24f3e4a98',
    'stop hidden terms': 'a7aec3c4be7a396c37debda99f625e651fc60e0816dca22b458fa53de7c2fdb0',
    'stop detect only': 'a56b56730c94d307b891478a204f9ab528ca0a689f2f7b645447ae7de0a9f6b6',
    'stop queue load, fifo': 'aab6c6b012a4196073e67bd82bf10042ab2dc4857558667f483426e270e94918',
    'stop lean': 'e463fa0737c37ef148b19e6df7f50afbeaa71481f258809bf3a6527e9b173251',
    'stop none, max_steps': '1e3d1456a36211482ca19253003be451324c4f388453099dc1908041e651e21d',
    'stop max_steps, full': '2c2a25eec2ad23fa80297e57ea6111c03d1a98b7ed7f3f3d98f614caa0a4090e',
    'cluster default': 'aa09c993bebbc8be645bd9a01ad1ddc0ddf16d94dd79619db7c7d809c1e5f3c3',
    'cluster lean, nodes8': 'a4a7b23758abd1c301487a072d1f7ec9094d0cf3abb9554ff4e87cdcddc96268',
}


def _feed(h, x) -> None:
    """Hash ``x`` with its type: arrays by dtype, shape and bytes; floats by their bits; containers in order."""
    if isinstance(x, np.ndarray):
        h.update(f"nd{x.dtype.str}{x.shape}".encode())
        h.update(x.tobytes())
    elif isinstance(x, float):
        h.update(b"f" + struct.pack("<d", x))
    elif isinstance(x, dict):
        h.update(f"d{len(x)}".encode())
        for k, v in x.items():
            _feed(h, k)
            _feed(h, v)
    elif isinstance(x, (list, tuple)):
        h.update(f"l{len(x)}".encode())
        for v in x:
            _feed(h, v)
    else:  # str, int, bool, None: the type name keeps 1, 1.0 and True apart
        h.update(f"{type(x).__name__}:{x!r}".encode())


def rollout_digest(cls, kw: dict, steps: int = STEPS, seed: int = 5) -> str:
    """sha256 of ``steps`` steps of ``cls(**kw)`` (resets included) under random masked actions, one in
    about 50 replaced by an invalid one."""
    env = cls(**kw)
    rng = np.random.default_rng(seed)
    h = hashlib.sha256()
    obs, info = env.reset(seed=seed)
    _feed(h, (obs, info))
    for _ in range(steps):
        mask = env.action_masks() if kw.get("step_info") == "none" else info["action_mask"]
        # now and then an invalid action (played as a penalised no-op)
        action = int(rng.choice(np.flatnonzero(mask))) if rng.random() > 0.02 else int(env.action_space.n)
        obs, reward, terminated, truncated, info = env.step(action)
        _feed(h, (obs, reward, terminated, truncated, info))
        if terminated or truncated:
            obs, info = env.reset()
            _feed(h, (obs, info))
    return h.hexdigest()


@pytest.mark.parametrize("name", CASES)
def test_rollout_is_byte_identical_to_the_recorded_one(name):
    cls, kw = CASES[name]
    assert rollout_digest(cls, kw) == EXPECTED[name]


if __name__ == "__main__":  # print the table of EXPECTED for the code on sys.path
    for name, (cls, kw) in CASES.items():
        print(f"    {name!r}: {rollout_digest(cls, kw)!r},", file=sys.stdout)
