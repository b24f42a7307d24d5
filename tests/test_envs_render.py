"""Rendering: rgb_array frames carry axes, a legend and the clock; human mode opens a pygame window
(headless here: SDL's dummy video driver); RecordVideo keeps one frame per simulated instant."""

import time

import gymnasium as gym
import numpy as np
import pytest

from evalstop_gym.envs.adapter import CLUSTER_ID, STOP_CONTROL_ID, PolicyAgent
from evalstop_gym.envs.render import (CHART_LEFT, CHART_TOP, FRAME_HEIGHT, FRAME_WIDTH, HEIGHT, WIDTH,
                                      AllocationRecorder, _ticks, gantt_rgb)

pygame = pytest.importorskip("pygame")


def _agent(env):
    from evalstop_gym.baselines import make_policy

    return PolicyAgent(make_policy("srtf-est", "evalstop", k=1), env)


def _light(region):
    """Pixels of text and axes: light grey, unlike the dark background and the job colours' mix."""
    r = region.astype(int)
    return ((r.min(axis=-1) > 120) & (r.max(axis=-1) - r.min(axis=-1) < 30)).sum()


def play(env, steps):
    agent = _agent(env)
    obs, _ = env.reset(seed=0)
    for _ in range(steps):
        obs, _, terminated, truncated, _ = env.step(agent(obs))
        if terminated or truncated:
            break
    return env


def test_rgb_array_frame_has_title_axes_and_legend_around_the_chart():
    env = play(gym.make(CLUSTER_ID, jobs=20, render_mode="rgb_array"), 150)
    img = env.render()
    assert img.shape == (FRAME_HEIGHT, FRAME_WIDTH, 3) and img.dtype == np.uint8
    chart_bottom = CHART_TOP + HEIGHT
    assert _light(img[:CHART_TOP - 8]) > 200                      # the title line: clock and cluster state
    assert _light(img[chart_bottom + 1:chart_bottom + 30]) > 100  # time axis, tick labels, "time (h)"
    assert _light(img[CHART_TOP:chart_bottom, :CHART_LEFT]) > 50  # GPU axis and its labels
    assert _light(img[-24:]) > 200                               # the legend line
    chart = img[CHART_TOP:chart_bottom, CHART_LEFT:CHART_LEFT + WIDTH]
    assert len(np.unique(chart.reshape(-1, 3), axis=0)) > 5       # jobs have colours
    later = play(gym.make(CLUSTER_ID, jobs=20, render_mode="rgb_array"), 300).render()
    assert not np.array_equal(img[:CHART_TOP - 8], later[:CHART_TOP - 8])   # the clock moved


def test_tick_values_are_round_and_cover_the_span():
    assert _ticks(160.6) == [0, 50, 100, 150]   # 160.6 / 5 = 32.1 -> steps of 50
    assert _ticks(64, 4) == [0, 20, 40, 60]     # 64 / 4 = 16 -> steps of 20
    assert _ticks(0.9) == pytest.approx([0, 0.2, 0.4, 0.6, 0.8])


def test_gantt_chart_places_a_job_on_the_lowest_rows_over_its_run():
    class View:   # the two fields the recorder reads
        def __init__(self, gpus):
            self.gpus = gpus

    class Cluster:
        def __init__(self, now_h, running):
            self.now_h, self.running = now_h, running

    rec = AllocationRecorder(4)
    rec.update(Cluster(0.0, {7: View(2)}))   # job 7 on GPUs 0-1 from t=0
    rec.update(Cluster(1.0, {}))             # ... until t=1
    img = gantt_rgb(rec, 2.0, width=4, height=4)
    busy = (img != img[0, -1]).any(axis=-1)  # the top-right pixel is an idle GPU
    # columns are 0.5 h wide: t in [0, 1) is the first two; rows bottom-up are GPUs 0..3
    assert busy.tolist() == [[False] * 4, [False] * 4, [True, True, False, False], [True, True, False, False]]


def test_human_mode_opens_a_window(monkeypatch):
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    env = gym.make(STOP_CONTROL_ID, jobs=10, render_mode="human")
    env.unwrapped.metadata = {**env.unwrapped.metadata, "render_fps": 1000}   # do not wait between frames
    play(env, 5)
    surface = pygame.display.get_surface()
    assert surface is not None and surface.get_size() == (FRAME_WIDTH, FRAME_HEIGHT)
    assert env.render() is None
    env.close()
    assert not pygame.display.get_init()


@pytest.mark.parametrize("env_id, jobs", [(CLUSTER_ID, 30), pytest.param(CLUSTER_ID, 200, marks=pytest.mark.slow)])
def test_record_video_keeps_one_frame_per_instant(tmp_path, env_id, jobs):
    pytest.importorskip("moviepy")
    from evalstop_gym.envs.render import RecordVideo

    t0 = time.time()
    env = RecordVideo(gym.make(env_id, jobs=jobs, render_mode="rgb_array"), str(tmp_path),
                      episode_trigger=lambda e: e == 0, disable_logger=True)
    agent = _agent(env)
    obs, info = env.reset(seed=0)
    instants, steps = [info["time_h"]], 0
    while True:
        obs, _, terminated, truncated, info = env.step(agent(obs))
        steps += 1
        if info["time_h"] != instants[-1]:
            instants.append(info["time_h"])
        if terminated or truncated:
            break
    frames = len(env.recorded_frames)
    env.close()
    assert steps > len(instants) and frames == len(instants)   # sub-steps added no frames
    assert list(tmp_path.glob("*.mp4"))
    if jobs == 200:
        assert time.time() - t0 < 60   # the default episode in under a minute
