"""The arithmetic of benchmarks/bench_env.py on a fake clock, and smoke runs of its main and of
bench_env_against.py's.

The fake clock moves only when a fake env step advances it, plus a fixed cost each time it is read
(the part of a real clock read that lands inside the span it brackets). Step times are powers of two,
so every expected value below is exact in binary and worked out by hand.
"""

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_env.py"


def load(path):
    """The benchmark script at ``path`` as a module."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench():
    return load(BENCH)


class FakeClock:
    """Seconds that move when a fake step advances them, plus ``per_read`` after each read."""

    def __init__(self, per_read: float = 0.0):
        self.now, self.per_read = 0.0, per_read

    def __call__(self) -> float:
        t = self.now
        self.now += self.per_read
        return t


def fake_stepper(step_s, n=1, log=None, name=None):
    """A stepper whose step takes ``step_s()`` seconds of the clock it is given and counts ``n`` env steps."""
    def stepper(clock):
        if log is not None:
            log.append(name)
        t = clock()
        clock.now += step_s()
        return n, t, clock()
    return stepper


def test_bracket_cost_is_what_two_reads_add(bench):
    assert bench.bracket_cost(FakeClock(per_read=2 ** -20), n=100) == 2 ** -20


def test_timed_call_costs_its_two_reads_to_the_enclosing_span(bench):
    assert bench.timed_cost(FakeClock(per_read=2 ** -20), n=100) == pytest.approx(2 * 2 ** -20)


def test_a_slice_ends_at_the_first_step_past_its_length(bench):
    # steps of 1/64 s, a slice of 1/8 s: the 9th step ends at 9/64 s, the first end past 8/64
    assert bench.run_slice(fake_stepper(lambda: 2 ** -6), 2 ** -3, FakeClock()) == (9, 9, 9 / 64)
    # a vector step counts its 8 envs' steps, one bracket
    assert bench.run_slice(fake_stepper(lambda: 2 ** -6, n=8), 2 ** -3, FakeClock()) == (72, 9, 9 / 64)


def test_rate_takes_the_clock_cost_off_every_bracket(bench):
    assert bench.rate(10, 10, 0.5, 0.01) == pytest.approx(10 / 0.4)
    with pytest.raises(ValueError, match="not above the clock's own cost"):
        bench.rate(10, 10, 0.1, 0.01)


def test_interleaved_slices_take_turns_and_give_cost_free_rates(bench):
    log = []
    clock = FakeClock(per_read=2 ** -12)
    steppers = {"a": fake_stepper(lambda: 2 ** -6, log=log, name="a"),
                "b": fake_stepper(lambda: 2 ** -4, log=log, name="b")}
    per_repeat = bench.interleave(steppers, 2 ** -2, 2, slice_s=2 ** -3, clock=clock, cost=2 ** -12)
    # rates of the steps alone: 64/s and 16/s in both repeats, the reads' cost removed
    assert per_repeat == [{"a": pytest.approx(64), "b": pytest.approx(16)}] * 2
    # 2 rounds a repeat (1/4 s in slices of 1/8 s); a slice ends at the first step to end past 1/8 s after the
    # slice's first read, the reads' cost (2 of 1/4096 s a step) included: step k ends at k/64 + 2k/4096 s
    # (past 1/8 at k = 8, not at 7) and k/16 + 2k/4096 s (past 1/8 at k = 2)
    assert log == (["a"] * 8 + ["b"] * 2) * 4


def test_a_load_that_slows_both_alike_leaves_the_ratio(bench):
    slow = [1]   # the machine's slowdown, changed between repeats
    clock = FakeClock()
    steppers = {"CartPole-v1": fake_stepper(lambda: slow[0] * 2 ** -8),
                "env": fake_stepper(lambda: slow[0] * 2 ** -6)}
    per_repeat = []
    for slowdown in (1, 4, 2):
        slow[0] = slowdown
        per_repeat += bench.interleave(steppers, 2 ** -1, 1, slice_s=2 ** -4, clock=clock, cost=0.0)
    assert [r["CartPole-v1"] for r in per_repeat] == [256, 64, 128]
    s = bench.summarise(per_repeat)
    assert s["env"] == (32, 0.25, 0.25)   # the median rate (64, 16, 32); the ratio 1/4 in every repeat


def test_summary_is_the_median_rate_and_the_min_and_median_ratio(bench):
    per_repeat = [{"CartPole-v1": 100.0, "env": 30.0},
                  {"CartPole-v1": 50.0, "env": 20.0},
                  {"CartPole-v1": 80.0, "env": 20.0}]
    s = bench.summarise(per_repeat)
    # ratios 0.3, 0.4, 0.25
    assert s["env"].rate == 20.0 and s["env"].ratio_min == 0.25 and s["env"].ratio_median == pytest.approx(0.3)
    assert s["CartPole-v1"] == (80.0, 1.0, 1.0)


def test_main_prints_every_row_with_its_ratios(bench, capsys):
    bench.main(["--seconds", "0.02", "--repeat", "1", "--slice", "0.01", "--vector", "2",
                "--cluster", "two-types", "--floor"])
    out = capsys.readouterr().out
    lines = out.splitlines()
    rows = [*bench.ENVS, *bench.LABELLED, *bench.UNMASKED, "EvalStop-Cluster-v0 [two-types]", "EvalStop-StopControl-v0 [two-types]",
            *bench.VECTOR]
    for label in rows:
        row = next(line for line in lines if line.startswith(f"{label} ") and "%" in line)
        rate, median, low = row[len(label):].split()
        assert float(rate) > 0 and median.endswith("%") and low.endswith("%"), row
    for text in ("observation + mask building min", "us per step alone",
                 "With the observation reduced to one copy", "load average"):
        assert text in out


@pytest.mark.parametrize("flags, message", [(["--seconds", "0"], "--seconds 0.0: CPU seconds, above 0"),
                                            (["--slice", "-1"], "--slice -1.0: CPU seconds, above 0"),
                                            (["--repeat", "0"], "--repeat 0: a count, at least 1")])
def test_bad_flags_are_named(bench, capsys, flags, message):
    with pytest.raises(SystemExit):
        bench.main(flags)
    assert message in capsys.readouterr().err


AGAINST = BENCH.parent / "bench_env_against.py"


@pytest.fixture(scope="module")
def against():
    return load(AGAINST)


def test_against_an_earlier_commit_prints_both_versions_beside_cartpole(against, capsys):
    against.main(["--rev", "HEAD", "--seconds", "0.02", "--repeat", "1", "--slice", "0.01"])
    lines = capsys.readouterr().out.splitlines()
    for label in ("CartPole-v1", "EvalStop-StopControl-v0 at HEAD", "EvalStop-StopControl-v0 now"):
        row = next(line for line in lines if line.startswith(f"{label} "))
        rate, median, low = row[len(label):].split()
        assert float(rate) > 0 and median.endswith("%") and low.endswith("%"), row
    assert any(m.startswith(against.RENAMED) for m in against.sys.modules)


@pytest.mark.parametrize("flags, message", [(["--rev", "HEAD", "--env", "CartPole-v1"], "--env CartPole-v1: one of"),
                                            (["--rev", "no-such-rev"], "--rev no-such-rev: git archive failed"),
                                            (["--rev", "HEAD", "--repeat", "0"], "--repeat 0: a count, at least 1")])
def test_against_bad_flags_are_named(against, capsys, flags, message):
    with pytest.raises(SystemExit) as e:
        against.main(flags)
    assert message in capsys.readouterr().err + str(e.value)


def test_an_unmasked_draw_that_the_mask_forbids_becomes_the_first_valid_action(bench):
    import gymnasium as gym
    import numpy as np

    class OnlyLast(gym.Env):
        """Three actions, only the last valid; records what it is given."""
        action_space, observation_space = gym.spaces.Discrete(3), gym.spaces.Discrete(1)

        def __init__(self):
            self.actions = []

        def reset(self, *, seed=None, options=None):
            return 0, {"action_mask": np.array([0, 0, 1], np.int8)}

        def step(self, action):
            self.actions.append(int(action))
            return 0, 0.0, False, False, {"action_mask": np.array([0, 0, 1], np.int8)}

    env = OnlyLast()
    stepper = bench.EnvStepper(env, masked=False)
    for _ in range(20):
        stepper(bench.CLOCK)
    assert env.actions == [2] * 20
