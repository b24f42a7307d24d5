"""A core install (no pygame) passes Gymnasium's env checker: the envs advertise only the render modes
that can run, frames have one size whatever is installed, and nothing prints on import or render."""

import subprocess
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from evalstop_gym.envs.adapter import CLUSTER_ID, STOP_CONTROL_ID
from evalstop_gym.envs.render import CHART_LEFT, CHART_TOP, FRAME_HEIGHT, FRAME_WIDTH, HEIGHT, WIDTH
from evalstop_gym.extras import MissingExtra

ENV_IDS = [CLUSTER_ID, STOP_CONTROL_ID]


@pytest.fixture
def no_pygame(monkeypatch):
    """As if pygame were not installed: ``import pygame`` raises ModuleNotFoundError."""
    monkeypatch.setitem(sys.modules, "pygame", None)


def frame(env_id, steps=60):
    env = gym.make(env_id, jobs=20, render_mode="rgb_array")
    env.reset(seed=0)
    for _ in range(steps):
        first_valid = int(np.flatnonzero(env.unwrapped.action_masks())[0])
        if any(env.step(first_valid)[2:4]):
            break
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")    # the no-pygame frame warns that it has no text
        return env.render()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_without_pygame_the_env_checker_passes_and_human_is_not_advertised(no_pygame, env_id):
    env = gym.make(env_id, jobs=20)
    assert env.unwrapped.metadata["render_modes"] == ["ansi", "rgb_array"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)             # renders every advertised mode: raised on 'human' before
    others = [str(w.message) for w in caught if "without pygame" not in str(w.message)]
    assert others == [], others
    with pytest.raises(MissingExtra, match=r"render_mode='human' needs the 'render' extra"):
        gym.make(env_id, jobs=20, render_mode="human")


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_frames_have_one_size_and_the_same_chart_with_or_without_pygame(monkeypatch, env_id):
    pytest.importorskip("pygame")
    full = frame(env_id)
    monkeypatch.setitem(sys.modules, "pygame", None)
    bare = frame(env_id)
    assert full.shape == bare.shape == (FRAME_HEIGHT, FRAME_WIDTH, 3) and bare.dtype == np.uint8
    chart = (slice(CHART_TOP, CHART_TOP + HEIGHT), slice(CHART_LEFT, CHART_LEFT + WIDTH))
    assert np.array_equal(full[chart], bare[chart])          # the same chart at the same place
    assert len(np.unique(bare[chart].reshape(-1, 3), axis=0)) >= 4   # the background and some jobs
    axis = np.array([150, 150, 160], np.uint8)
    assert (bare[CHART_TOP + HEIGHT, CHART_LEFT:CHART_LEFT + WIDTH] == axis).all()   # the time axis line


def test_import_and_rendering_print_nothing():
    pytest.importorskip("pygame")
    code = ("import gymnasium as gym, evalstop_gym\n"
            "env = gym.make('EvalStop-Cluster-v0', jobs=10, render_mode='rgb_array')\n"
            "env.reset(seed=0); env.step(0); assert env.render().shape == (360, 640, 3)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "" and r.stderr == ""
