"""CPU seconds of a whole ``evalstop-gym`` command on two or more checkouts, worker processes included.

Each checkout (``--tree DIR``, repeated; a git worktree of the revision to measure) runs the command as
``python -m evalstop_gym.cli ARGS --out TMP`` in a fresh process with ``PYTHONPATH=DIR``, in a fresh
temporary output folder. Its CPU is read from ``resource.getrusage(RUSAGE_CHILDREN)`` before and after:
user + system seconds of the command and of every worker it forked and waited for (a process pool's
workers included), which reads the same under load where wall time does not. The trees take turns
within each repeat, so they see the same load; the min and the median over ``--repeat`` are printed,
and the ratio of each tree's to the first's.

Before any timing each tree runs ``--warmup`` once (default: ``bench --tune --budget 1`` on one policy),
so a checkout whose numba cache is empty pays its compile there, not in a measured run.

A command's own arguments follow ``--``; ``{budget}`` in them is replaced by each tree's ``--budget``
(the budget each revision ships as its default, say). After each run the output folder's tables
(``*.md``, ``*.csv``) are compared with the first tree's of the same repeat: the script prints which
files are byte-identical and which differ.

    python benchmarks/bench_cli_cpu.py --tree /tmp/old --tree . [--budget 16 --budget 100] [--repeat 2] \\
        -- bench --tune --budget {budget} --policy srtf-est+evalstop --workers 2 --quiet
    python benchmarks/bench_cli_cpu.py --tree /tmp/old --tree . -- reproduce --seeds 3 --workers 1 --quiet
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

WARMUP = "bench --tune --budget 1 --policy srtf-est+evalstop --workers 1 --quiet"
TABLES = ("*.md", "*.csv")


def children_cpu() -> float:
    """User + system CPU seconds of every child process this one has waited for so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(tree: str, args: list[str], out: Path) -> float:
    """CPU seconds of ``python -m evalstop_gym.cli ARGS --out OUT`` run on ``tree``'s code."""
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    before = children_cpu()
    done = subprocess.run([sys.executable, "-m", "evalstop_gym.cli", *args, "--out", str(out)], cwd=out,
                          env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    cpu = children_cpu() - before
    if done.returncode != 0:
        sys.exit(f"{tree}: `evalstop-gym {' '.join(args)}` exited {done.returncode}: "
                 f"{done.stderr.strip().splitlines()[-1] if done.stderr.strip() else '(no message)'}")
    return cpu


def tables(out: Path) -> dict[str, bytes]:
    """The tables a command wrote under ``out``, by path relative to it."""
    return {str(p.relative_to(out)): p.read_bytes() for pattern in TABLES for p in sorted(out.rglob(pattern))}


def compare(first: dict[str, bytes], other: dict[str, bytes]) -> tuple[int, list[str]]:
    """``(number of byte-identical tables, names of those that differ or only one tree wrote)``."""
    same = sum(1 for k in first if other.get(k) == first[k])
    return same, sorted(k for k in set(first) | set(other) if first.get(k) != other.get(k))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", required=True, help="a checkout to run (repeat; first is the base)")
    ap.add_argument("--budget", action="append", default=None,
                    help="what {budget} in the command becomes, one per --tree in the same order")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--warmup", default=WARMUP, help="a command each tree runs once, untimed ('' for none)")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- then the evalstop-gym command's arguments")
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("command: give the evalstop-gym command's arguments after --")
    budgets = args.budget or [""] * len(args.tree)
    if len(budgets) != len(args.tree):
        ap.error(f"--budget: given {len(budgets)} times for {len(args.tree)} --tree; give one per tree")
    if args.repeat < 1:
        ap.error(f"--repeat: {args.repeat}; must be at least 1")
    per_tree = [[a.replace("{budget}", b) for a in command] for b in budgets]
    for tree in args.tree:
        if args.warmup:
            with tempfile.TemporaryDirectory() as tmp:
                run(tree, args.warmup.split(), Path(tmp))
    cpu: list[list[float]] = [[] for _ in args.tree]
    diffs: list[set[str]] = [set() for _ in args.tree]
    counts = [0] * len(args.tree)
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            first = None
            for i, (tree, cmd) in enumerate(zip(args.tree, per_tree)):
                out = Path(tmp) / str(i)
                out.mkdir()
                cpu[i].append(run(tree, cmd, out))
                written = tables(out)
                first = written if first is None else first
                counts[i], differ = compare(first, written)
                diffs[i].update(differ)
    print(f"`evalstop-gym {' '.join(command)}`: CPU s of the command and its workers, min / median of "
          f"{args.repeat}, trees interleaved; load average {os.getloadavg()[0]:.1f} at the end")
    base = min(cpu[0])
    for i, tree in enumerate(args.tree):
        label = f"{tree}" + (f" (budget {budgets[i]})" if budgets[i] else "")
        line = f"  {label}: {min(cpu[i]):.2f} / {statistics.median(cpu[i]):.2f}   ratio to the first {min(cpu[i]) / base:.3f}"
        if i:
            line += (f"; tables: {counts[i]} byte-identical" +
                     (f", differ: {', '.join(sorted(diffs[i]))}" if diffs[i] else ", none differs"))
        print(line)


if __name__ == "__main__":
    main()
