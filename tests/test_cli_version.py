"""``evalstop-gym --version`` prints the package's version, the one pyproject.toml declares."""

import re
from pathlib import Path

import pytest

from evalstop_gym.cli import main


def test_version_flag_prints_the_declared_version(capsys):
    declared = re.search(r'^version = "([^"]+)"', (Path(__file__).resolve().parents[1] / "pyproject.toml")
                         .read_text(), re.M).group(1)
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"evalstop-gym {declared}\n"
