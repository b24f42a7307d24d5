"""benchmarks/profile_reproduce.py: its parts' arithmetic on a fake clock, and the patching of a function
wherever the package imported it by name."""

import sys
import types
from pathlib import Path

import pytest
from test_bench_env import load

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "profile_reproduce.py"


@pytest.fixture(scope="module")
def prof():
    return load(SCRIPT)


class FakeTime:
    """``process_time`` reads ``now``, which only the fake work below moves."""

    def __init__(self):
        self.now = 0.0

    def process_time(self):
        return self.now


@pytest.fixture
def timed(prof, monkeypatch):
    """``(a fresh Clock, the fake time it reads)``."""
    fake = FakeTime()
    monkeypatch.setattr(prof, "time", fake)
    return prof.Clock(), fake


def test_a_nested_part_is_charged_to_itself_only(timed):
    clock, fake = timed

    def inner():
        fake.now += 2.0

    inner = clock.timed("inner", inner)

    def outer():
        fake.now += 1.0
        inner()
        fake.now += 4.0
        inner()
        return "done"

    outer = clock.timed("outer", outer)
    assert outer() == "done"
    # outer ran 1 + 2 + 4 + 2 = 9 s, 4 of them inside inner
    assert clock.spent == {"outer": 5.0, "inner": 4.0}
    outer()
    assert clock.spent == {"outer": 10.0, "inner": 8.0}


def test_a_part_that_raises_is_still_charged(timed):
    clock, fake = timed

    def fails():
        fake.now += 3.0
        raise ValueError("bad")

    with pytest.raises(ValueError):
        clock.timed("part", fails)()
    assert clock.spent == {"part": 3.0} and clock.stack == []


def test_patch_wraps_a_function_in_every_package_module_that_holds_it(prof, monkeypatch):
    import evalstop_gym.experiments.suite as suite
    import evalstop_gym.experiments.tables as tables

    original = tables.aggregate
    assert suite.aggregate is original
    home = types.ModuleType("evalstop_gym._fake_home")
    home.aggregate = original
    monkeypatch.setitem(sys.modules, home.__name__, home)
    monkeypatch.setattr(prof, "TIMED", (("aggregate", "evalstop_gym.experiments.tables", "aggregate"),))
    for mod in (tables, suite, home):
        monkeypatch.setattr(mod, "aggregate", original)
    prof.patch(prof.Clock())
    assert tables.aggregate is not original and tables.aggregate.__wrapped__ is original
    assert suite.aggregate is tables.aggregate and home.aggregate is tables.aggregate
