"""The conftest guard: under CI a default test over the time limit fails, naming its time and the limit; a
test marked slow, or any test outside CI, is left alone."""

import os
import subprocess
import sys
from pathlib import Path

CONFTEST = Path(__file__).with_name("conftest.py")

TESTS = '''
import time
import pytest

@pytest.fixture(scope="module")
def slow_setup():
    time.sleep(0.6)

def test_quick():
    pass

def test_slow_run():
    time.sleep(0.6)

def test_slow_setup(slow_setup):
    pass

@pytest.mark.slow
def test_marked_slow():
    time.sleep(0.6)
'''


def run(tmp_path, **env):
    (tmp_path / "conftest.py").write_text(CONFTEST.read_text())
    (tmp_path / "test_timed.py").write_text(TESTS)
    environ = {k: v for k, v in os.environ.items() if k not in ("CI", "EVALSTOP_GYM_TEST_LIMIT_S")}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", "-o", "addopts=",
                           "-W", "ignore::pytest.PytestUnknownMarkWarning", str(tmp_path)],
                          cwd=tmp_path, env={**environ, **env}, capture_output=True, text=True, timeout=120)


def test_under_ci_a_default_test_over_the_limit_fails(tmp_path):
    out = run(tmp_path, CI="true", EVALSTOP_GYM_TEST_LIMIT_S="0.4").stdout
    assert "2 passed" in out and "1 failed" in out and "1 error" in out, out
    assert "test_slow_run took 0.6 s" in out and "over the 0.4 s a default test may take in CI" in out
    assert "ERROR" in out and "test_slow_setup" in out           # a module fixture's setup counts too
    assert "test_quick" not in out and "test_marked_slow" not in out


def test_outside_ci_or_under_the_limit_nothing_fails(tmp_path):
    assert "4 passed" in run(tmp_path).stdout
    assert "4 passed" in run(tmp_path, CI="true").stdout          # the default limit, 60 s


def test_a_bad_limit_is_one_line(tmp_path):
    out = run(tmp_path, CI="1", EVALSTOP_GYM_TEST_LIMIT_S="soon")
    assert out.returncode != 0 and "EVALSTOP_GYM_TEST_LIMIT_S='soon' is invalid" in out.stdout + out.stderr
