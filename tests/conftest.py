"""Test-suite wiring.

Tests in modules that use torch (directly, or through stable-baselines3, the
learned-policy layer or the curve generator) get the ``torch`` marker, so CI
can run them a second time under ``ATEN_CPU_CAPABILITY=default`` (plain,
non-vectorised CPU kernels): an assertion that holds only for one CPU's
rounding then fails on every machine, not just on someone else's.

Under CI (``$CI`` set, as every CI service sets it) a default test (not marked ``slow``) that takes more
than ``$EVALSTOP_GYM_TEST_LIMIT_S`` seconds (default 60), its setup and teardown included, fails: a test
that grew slow fails where it grew, instead of turning the whole run red on a busier machine later.

The compiled kernel is loaded once before the first test (``pytest_collection_finish``): from an empty numba
cache (a fresh clone) that compiles it, about 45 CPU s, which would otherwise be charged to whichever compiled
test happens to run first.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

CI_TEST_LIMIT_S = 60.0
_spent = pytest.StashKey[float]()

_TORCH_USERS = re.compile(r"\b(torch|stable_baselines3|sb3_contrib|agents|overopt)\b")
_seen: dict[Path, bool] = {}


def _uses_torch(path: Path) -> bool:
    if path not in _seen:
        _seen[path] = bool(_TORCH_USERS.search(path.read_text(encoding="utf-8")))
    return _seen[path]


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _uses_torch(Path(str(item.fspath))):
            item.add_marker(pytest.mark.torch)


def _limit_s() -> float | None:
    if not os.environ.get("CI"):
        return None
    text = os.environ.get("EVALSTOP_GYM_TEST_LIMIT_S", "")
    try:
        return float(text) if text else CI_TEST_LIMIT_S
    except ValueError:
        raise pytest.UsageError(f"EVALSTOP_GYM_TEST_LIMIT_S={text!r} is invalid: must be a number of seconds")


def pytest_collection_finish(session):
    if session.config.option.collectonly or not session.items:
        return
    from evalstop_gym import compiled

    if compiled.mode() != "off" and compiled.numba_available():
        compiled.preload()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    limit = _limit_s()
    if limit is None or item.get_closest_marker("slow") is not None:
        return
    before = item.stash.get(_spent, 0.0)
    spent = item.stash[_spent] = before + report.duration
    if report.passed and spent > limit >= before:   # once per test, in the phase that crossed the limit
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} took {spent:.1f} s (setup, run and teardown so far), over the "
                           f"{limit:g} s a default test may take in CI: make it cheaper, or mark it slow "
                           "(docs/testing.md)")


@pytest.fixture(autouse=True, scope="session")
def _private_trace_cache(tmp_path_factory):
    """Parsed traces are cached under a temporary directory, never the user's cache."""
    mp = pytest.MonkeyPatch()
    mp.setenv("EVALSTOP_GYM_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    yield
    mp.undo()


@pytest.fixture(autouse=True, scope="session")
def _sb3_logs_in_the_test_tmp(tmp_path_factory):
    """Models that tests build and train directly (not through ``train``, which gives SB3 a logger with no
    folder) would leave an empty ``/tmp/SB3-<date>`` folder per ``learn()``: SB3 puts it in
    ``$SB3_LOGDIR`` when set, here the tests' own temporary directory."""
    mp = pytest.MonkeyPatch()
    mp.setenv("SB3_LOGDIR", str(tmp_path_factory.mktemp("sb3-logs")))
    yield
    mp.undo()


@pytest.fixture
def cli_error(capsys):
    """``cli_error(argv)``: run the CLI, expect exit code 2 and one line on stderr without a traceback; return it."""
    from evalstop_gym.cli import main

    def run(argv):
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "Traceback" not in err, err
        return err

    return run


@pytest.fixture
def quick_held_lag(request, monkeypatch):
    """The held runs' lag solved on 100 runs a type at 4 scales instead of calibrate's 400 at 7
    (`fit.solve_held_lag` costs about 25 CPU s at full size), for the modules that fit worlds in default tests and
    assert nothing about that lag's value; a test marked slow (the grounded round trip, the byte-for-byte
    regeneration of grounded.yaml) keeps the full solve."""
    if request.node.get_closest_marker("slow") is None:
        import numpy as np

        from evalstop_gym import fit

        monkeypatch.setattr(fit, "HELD_SAMPLE", 100)
        monkeypatch.setattr(fit, "HELD_SCALES", np.linspace(0.0, 1.5, 4))
