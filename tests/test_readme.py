"""The README is the front door: short, its Python blocks run as written, its shell commands name real
commands and flags, its links lead somewhere, and docs/index.md reaches every docs page."""

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
REPRODUCE = "./install.sh && evalstop-gym reproduce"
TEST = "./install.sh && python3 -m pytest"


def blocks(lang):
    return re.findall(rf"^```{lang}\n(.*?)^```", README, re.S | re.M)


def test_short_with_the_two_commands_and_ci_runs_the_test_one():
    assert len(README) <= 8000, len(README)
    assert blocks("bash") == [REPRODUCE + "\n", TEST + "\n"]
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert TEST in ci


# what each Python block prints, in order: the quick start 2 numbers, simulate 4, the live stopper 2 (its best
# eval: index 2, score 0.66), the added policy 2
PRINTS = [2, 4, 2, 2]


@pytest.mark.parametrize("number", range(len(PRINTS)))
def test_every_python_block_runs_alone(tmp_path, number):
    """Each block pasted alone into a fresh interpreter, from an empty folder: it brings its own imports."""
    code = blocks("python")[number]
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    printed = r.stdout.split()
    assert len(printed) == PRINTS[number] and all(float(x) == float(x) for x in printed)   # numbers, not NaN
    if "live_stopper" in code:
        assert printed == ["2", "0.66"]
    assert not list(tmp_path.iterdir())                                     # nothing written


def test_the_blocks_are_the_ones_counted():
    code = blocks("python")
    assert len(code) == len(PRINTS) and "gym.make(" in code[0] and "class LargestFirst(Scheduler)" in code[-1]


def commands():
    """Every command the README names: its shell blocks and inline code that starts with a command."""
    found = [line for b in blocks("bash") for line in b.splitlines() if line.strip()]
    found += re.findall(r"`((?:evalstop-gym|python3 -m pytest|\./install\.sh)[^`]*)`", README)
    out = []
    for text in found:
        out += [part.strip() for part in text.split("&&")]
    return sorted(set(out))


@pytest.mark.parametrize("command", commands())
def test_every_shell_command_names_a_real_command_and_flags(command):
    from evalstop_gym.cli import build_parser

    argv = shlex.split(command)
    while "=" in argv[0]:          # an environment assignment before the command
        argv.pop(0)
    if argv[0] == "./install.sh":
        assert (ROOT / "install.sh").is_file() and len(argv) == 1
    elif argv[:3] == ["python3", "-m", "pytest"]:
        assert set(argv[3:]) <= {"-m", "slow"}
    else:
        assert argv[0] == "evalstop-gym"
        args = build_parser(argv[1]).parse_args(argv[1:])     # unknown commands or flags exit 2 here
        assert args.command == argv[1]


def test_every_link_leads_to_a_file_or_heading():
    links = re.findall(r"\]\(([^)#]+)(?:#([^)]+))?\)", README)
    assert links
    for path, anchor in links:
        target = ROOT / path
        assert target.exists(), path
        if anchor:
            headings = re.findall(r"^#+ (.+)$", target.read_text(encoding="utf-8"), re.M)
            slugs = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-") for h in headings}
            assert anchor in slugs, (path, anchor)


def test_the_docs_index_reaches_every_docs_page():
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(([a-z_]+\.md)\)", index))
    pages = {p.name for p in (ROOT / "docs").glob("*.md")} - {"index.md"}
    assert pages <= linked, pages - linked


def test_the_index_names_the_current_bench_suite():
    from evalstop_gym.bench.suite import DEFAULT_SUITE, SUITES

    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    named = set(re.findall(r"suite (v\d+)", index))
    assert named == {DEFAULT_SUITE}, named
    assert DEFAULT_SUITE == list(SUITES)[-1]           # the newest suite is the default the pages describe


def test_bench_help_names_the_current_default_suite():
    from evalstop_gym.bench.suite import DEFAULT_SUITE

    out = subprocess.run([sys.executable, "-m", "evalstop_gym.cli", "bench", "--help"], capture_output=True,
                         text=True, check=True).stdout
    assert f"(default: the newest, {DEFAULT_SUITE})" in " ".join(out.split())
