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
speeds and costs the old shared stream drew after them. Any change to an observation, a reward, a flag,
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
    'stop default': '53a72d37f166923bb8b7bd77dfe703d38484d7f178a31b0a1143f933d46cac2c',
    'stop jobs=40 realistic': '9c1ec721dc8108d0d0485f6ff56bbebe0992b104c39d39b44c1c4abaa29afdc4',
    'stop nodes8': '9d42f3d220348cabf4a54154e29167b06b461732064e665c20b0de29404738e6',
    'stop hidden terms': '5534cc37d32c4f5d4ff7065c81bc2aabc900c8db98cdaba3286b7872985647e4',
    'stop detect only': 'e80252dee0f14baf135a4f8b18857ef6a0b7df8e3a29bfff6b7793bc759c43cb',
    'stop queue load, fifo': 'ad1b7cf90dbf3164258c30cc96cbbca60b4c6f116deaacd7a39a35f1c94ed61d',
    'stop lean': '2e1891229ebf496a4fabe2bc1d072d65bfdd813fc2cd60a2bfdc6bb365380505',
    'stop none, max_steps': '7c1bec008b4b46b8d09f755a97b2b6d9fc05303ff37f39d96887c7ce090fde4c',
    'stop max_steps, full': 'f5ede325880d666876e24c25f1ca0309c24186ca71c56c9deaf6ae1d40068e6c',
    'cluster default': 'b4c5ba34f4804888ba49924ddf37fbcd7b5cfa85e6822102eeeaf397f838ec2e',
    'cluster lean, nodes8': 'e7a1009f1ade0c25d34b151e23d6bafe7e1932fa29d6e6a1f26f371a37d22caf',
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
