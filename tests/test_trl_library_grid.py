"""The varied TRL library's recipe (tools/trl_library.py --grid varied): its grid covers two tasks, two
widths, runs with and without a KL penalty, with distinct names; its pilot takes one run of each task,
width and penalty; the CPU projection is its own arithmetic; SFT models are built once, before the
runs, with their CPU seconds recorded; and a run of the grid's addition task at a
width other than the default regenerates byte for byte from its seed."""

import importlib.util
import os

import pytest

pytest.importorskip("trl", reason="the TRL backend needs the live extra")
pytest.importorskip("torch")

from evalstop_gym.overopt import generate_library  # noqa: E402
from evalstop_gym.overopt.library import library_settings  # noqa: E402
from evalstop_gym.overopt.trl_backend import GRIDS, VARIED_GRID, TRLRunSettings, pilot_points  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _tool():
    spec = importlib.util.spec_from_file_location("trl_library_tool", os.path.join(ROOT, "tools", "trl_library.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_varied_grid_has_two_tasks_two_widths_and_both_regimes():
    settings = library_settings(len(VARIED_GRID), 0, VARIED_GRID, "trl")
    assert len(settings) >= 96 and len({s.name for s in settings}) == len(settings)
    assert {s.task for s in settings} == {"copy", "add"} and len({s.dim for s in settings}) == 2
    for s in settings:
        s.validate()   # steps a multiple of evals, every field in range
    for name in ("copy", "add"):
        for dim in {s.dim for s in settings}:
            rlhf = [s for s in settings if (s.task, s.dim) == (name, dim) and s.method != "dpo"]
            # the cliff's runs (no KL penalty) and the plateau's (a penalty), as many of each
            assert sum(s.kl_coef == 0 for s in rlhf) == sum(s.kl_coef > 0 for s in rlhf) > 0
    assert GRIDS["shipped"] != VARIED_GRID


def test_the_pilot_is_one_grpo_run_per_task_width_and_penalty():
    pilot = pilot_points(VARIED_GRID)
    keys = [(p["task"], p["dim"], p["kl_coef"] > 0) for p in pilot]
    assert len(keys) == len(set(keys)) == 2 * 2 * 2
    assert all(p["method"] == "grpo" and p in VARIED_GRID for p in pilot)


def test_the_projection_is_pilot_cost_times_runs_plus_the_sft_models():
    tool = _tool()
    library = [TRLRunSettings(task=t, dim=d, seed=i % 2) for t, d, n in (("copy", 80, 3), ("add", 160, 2))
               for i in range(n)]
    pilot = [{"task": "copy", "dim": 80, "cpu_s": 10.0}, {"task": "copy", "dim": 80, "cpu_s": 20.0},
             {"task": "add", "dim": 160, "cpu_s": 40.0}]
    sft = [{"task": "copy", "dim": 80, "cpu_s": 5.0}, {"task": "add", "dim": 160, "cpu_s": 7.0}]
    text = tool.projection(pilot, sft, library)
    # hand: copy 3 runs x 15 s + 2 seeds' SFT x 5 s = 55; add 2 runs x 40 s + 2 SFT x 7 s = 94; 149 s in all
    assert "projected: 5 runs, 149 CPU s = 0.04 CPU-hours" in text
    assert "no projection" in tool.projection(pilot[:2], sft, library)   # no pilot run of the addition task
    assert "no projection" in tool.projection(pilot, sft[:1], library)   # nor its SFT model


def test_a_varied_grid_run_of_the_addition_task_repeats_byte_for_byte(tmp_path):
    point = next(p for p in VARIED_GRID if p["task"] == "add" and p["method"] == "grpo" and p["kl_coef"] == 0)
    tiny = dict(steps=12, evals=4, eval_items=20, gold_items=100, sft_steps=50, rm_steps=20, dim=24, rm_dim=16)
    for folder in ("a", "b"):
        index = generate_library(tmp_path / folder, runs=1, grid=(point,), backend_name="trl", **tiny)
    name = index["runs"][0]["name"]
    assert name.startswith("trl-add-grpo-d24-")
    a, b = ((tmp_path / f / "curves.csv").read_bytes() for f in ("a", "b"))
    assert a == b and a.count(b"\n") == 1 + 4 + 1   # header, step 0 and four evals


def test_sft_models_are_built_before_the_runs_and_their_cpu_recorded(tmp_path):
    tool = _tool()
    tiny = dict(steps=4, evals=2, eval_items=10, gold_items=20, sft_steps=10, rm_steps=5, dim=16, rm_dim=16)
    grid = tuple(p for p in VARIED_GRID if p["task"] == "copy" and p["dim"] == 80 and p["method"] == "dpo")[:2]
    generate_library(tmp_path, runs=2, grid=grid, backend_name="trl", workers=1, **tiny)
    [model] = tool.sft_models(str(tmp_path))   # two runs, one shared SFT model
    assert (model["task"], model["dim"], model["steps"]) == ("copy", 16, 10) and model["cpu_s"] > 0
