"""Test-suite wiring.

Tests in modules that use torch (directly, or through stable-baselines3, the
learned-policy layer or the curve generator) get the ``torch`` marker, so CI
can run them a second time under ``ATEN_CPU_CAPABILITY=default`` (plain,
non-vectorised CPU kernels): an assertion that holds only for one CPU's
rounding then fails on every machine, not just on someone else's.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

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
