"""benchmarks/profile_env.py: py-spy's raw stacks grouped into parts, on hand-made stacks; a short play."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "profile_env.py"


@pytest.fixture(scope="module")
def prof():
    spec = importlib.util.spec_from_file_location(SCRIPT.stem, SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stack(*frames, n):
    """One line of py-spy's raw output: ``frame;frame;... count``, frames as ``name (file:line)``."""
    return ";".join(["<module> (profile_env.py:1)", "main (profile_env.py:2)", "play (profile_env.py:3)",
                     *(f"{f} (x.py:{i})" for i, f in enumerate(frames))]) + f" {n}"


def test_samples_go_to_the_innermost_named_part(prof):
    lines = [
        stack("OrderEnforcing.step", "StopControlEnv.step", "StopControlEnv._run_to_eval", "SimEnv._advance",
              "Simulator.advance", "Simulator._checkpoint", n=6),               # simulator
        stack("OrderEnforcing.step", "StopControlEnv.step", "SimEnv._finish_step", "SimEnv._info",
              "compute_metrics", n=2),                                          # end of an episode
        stack("OrderEnforcing.step", "StopControlEnv.step", "SimEnv._finish_step", n=3),   # reward terms, info
        stack("OrderEnforcing.step", "StopControlEnv.step", n=1),                           # the step's own code
        stack("OrderEnforcing.reset", "SimEnv.reset", "StopControlEnv._run_to_eval", "Simulator.advance",
              n=4),                                                             # reset, whatever runs in it
        stack("Discrete.sample", n=16),                                         # the agent's draw: outside
        "<module> (other.py:1);elsewhere (other.py:2) 99",                      # not under play: ignored
    ]
    parts, outside = prof.summary(lines)
    assert parts == {prof.PARTS["Simulator.advance"]: 6 / 16, prof.START: 4 / 16,
                     prof.PARTS["SimEnv._finish_step"]: 3 / 16, prof.PARTS["compute_metrics"]: 2 / 16,
                     prof.OWN: 1 / 16}
    assert outside == 16 / 32


def test_a_file_without_the_loop_is_refused(prof):
    with pytest.raises(SystemExit, match="no sample inside play"):
        prof.summary(["<module> (other.py:1);elsewhere (other.py:2) 3"])


def test_play_runs_episodes_to_their_end(prof):
    # 10 jobs of at most 10 eval checkpoints each: an episode takes at most 100 stop decisions
    assert prof.play("EvalStop-StopControl-v0", 200, seed=1, jobs=10) >= 2
    with pytest.raises(SystemExit):
        prof.main(["--steps", "0"])
