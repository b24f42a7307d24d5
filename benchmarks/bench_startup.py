"""Start-up time of the command line: wall and CPU seconds of short commands, runs interleaved.

Each command runs ``--runs`` times, the commands taking turns, so a change in
the machine's load hits all of them alike; CPU time (user + system of the
child, from ``os.wait4``) is the steadier figure on a shared machine. The
default commands are the floor (``python -c pass``, then what ``import
evalstop_gym`` cannot avoid: numpy; Gymnasium is imported only by the
environments, shown beside it for scale), ``import evalstop_gym`` and
``simulate --json`` on the default episode, run from this checkout.

    python benchmarks/bench_startup.py [--runs 12] [COMMAND ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable
DEFAULT = [f"{PY} -c pass", f"{PY} -c 'import numpy'", f"{PY} -c 'import numpy, gymnasium'",
           f"{PY} -c 'import evalstop_gym'", f"{PY} -m evalstop_gym.cli simulate --json"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=12)
    p.add_argument("commands", nargs="*", default=DEFAULT, help="shell commands, run from the repository root")
    a = p.parse_args(argv)
    wall = {c: [] for c in a.commands}
    cpu = {c: [] for c in a.commands}
    for _ in range(a.runs):
        for c in a.commands:
            t = time.perf_counter()
            child = subprocess.Popen(c, shell=True, cwd=REPO, stdout=subprocess.DEVNULL)
            _, _, usage = os.wait4(child.pid, 0)
            wall[c].append(time.perf_counter() - t)
            cpu[c].append(usage.ru_utime + usage.ru_stime)
    print("load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()) + f"; {a.runs} runs each")
    print(f"{'CPU s median':>12} {'wall s median':>13} {'wall s min':>10}  command")
    for c in a.commands:
        print(f"{statistics.median(cpu[c]):>12.3f} {statistics.median(wall[c]):>13.3f} {min(wall[c]):>10.3f}  {c}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
