"""Progress on stderr (done / total, rate, ETA): shown on a terminal, off with --quiet and when stderr is not a
terminal, and never a change to what a command prints on stdout."""

import sys

import pytest

from evalstop_gym.cli import main
from evalstop_gym.experiments.progress import _NoBar, progress_bar

pytest.importorskip("tqdm")

AUDIT = ["audit", "--seeds", "700-702", "--jobs", "60", "--no-classifier"]


def test_audit_shows_both_stages_on_a_terminal_only(capsys, monkeypatch):
    assert main(AUDIT) == 0
    plain = capsys.readouterr()
    assert plain.err == ""                                   # stderr is not a terminal here
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert main(AUDIT) == 0
    shown = capsys.readouterr()
    assert shown.out == plain.out
    assert "audit: workloads: 100%" in shown.err and "3/3" in shown.err
    assert "audit: classifiers: 100%" in shown.err and "9/9" in shown.err   # 3 job types x evals 1-3
    assert main([*AUDIT, "--quiet"]) == 0
    quiet = capsys.readouterr()
    assert quiet.err == "" and quiet.out == plain.out


def test_without_tqdm_there_is_no_bar_and_the_same_iteration(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)             # import tqdm fails as if not installed
    bar = progress_bar(3, "x", iterable=range(3))
    assert isinstance(bar, _NoBar) and list(bar) == [0, 1, 2]
    with progress_bar(5, "y") as counted:
        counted.update(2)                                     # nothing to show, nothing raised
