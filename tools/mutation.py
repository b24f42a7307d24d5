"""Mutation testing of the simulator core with mutmut, one module at a time (see docs/testing.md).

    python tools/mutation.py                       # every core module, one after another
    python tools/mutation.py metrics simulator     # just these
    python tools/mutation.py --survivors metrics   # re-test only the survivors (after adding tests)
    python tools/mutation.py --report              # only summarize the last runs

mutmut copies the code to ``mutants/``, plants one small change at a time
(``<`` for ``<=``, ``+ 1`` for ``+ 2``, a dropped argument, ...) and runs the
tests that reach the changed function: the fast subset in ``[tool.mutmut]`` of
pyproject.toml. A mutant is *killed* when a test fails. The summary prints,
per module, killed / survived / other (timeouts, no test reaches it) and the
kill rate, then the surviving mutants by name: ``python -m mutmut show NAME``
prints one's diff. Not part of CI (a full run takes CPU-hours); needs the
``mutation`` extra (``pip install mutmut``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULES = {   # name on the command line -> (mutant name prefix, file)
    "simulator": ("evalstop_gym.simulator.", "evalstop_gym/simulator.py"),
    "metrics": ("evalstop_gym.metrics.", "evalstop_gym/metrics.py"),
    "policy": ("evalstop_gym.policy.", "evalstop_gym/policy.py"),
    "view": ("evalstop_gym.view.", "evalstop_gym/view.py"),
    "workload": ("evalstop_gym.workload.", "evalstop_gym/workload.py"),
    "curves": ("evalstop_gym.curves.", "evalstop_gym/curves.py"),
    "traces": ("evalstop_gym.traces.", "evalstop_gym/traces.py"),
    "baselines": ("evalstop_gym.baselines.", "evalstop_gym/baselines/*.py"),
}
# mutmut's exit-code meanings (mutmut.stats.status_by_exit_code), folded into three outcomes
KILLED, SURVIVED = {1, 3, 37}, {0}
NO_TESTS = {5, 33}   # no test of the subset reaches the mutant ("other" in the summary)


def statuses(module: str) -> dict[str, int | None]:
    """Exit code of every mutant of ``module`` recorded in mutants/*.meta (None: not run yet)."""
    prefix, pattern = MODULES[module]
    out: dict[str, int | None] = {}
    for meta in sorted((ROOT / "mutants").glob(pattern + ".meta")):
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        out.update({k: v for k, v in codes.items() if k.startswith(prefix)})
    return out


def summarize(modules: list[str]) -> int:
    total = Counter()
    survivors = []
    print(f"{'module':<10} {'mutants':>8} {'killed':>7} {'survived':>9} {'other':>6} {'kill rate':>10}")
    for m in modules:
        codes = statuses(m)
        c = Counter("killed" if v in KILLED else "survived" if v in SURVIVED else "other" for v in codes.values())
        total.update(c)
        done = c["killed"] + c["survived"]
        rate = f"{c['killed'] / done:.1%}" if done else "-"
        print(f"{m:<10} {len(codes):>8} {c['killed']:>7} {c['survived']:>9} {c['other']:>6} {rate:>10}")
        survivors += sorted(k for k, v in codes.items() if v in SURVIVED)
    done = total["killed"] + total["survived"]
    if done:
        print(f"{'all':<10} {sum(total.values()):>8} {total['killed']:>7} {total['survived']:>9} "
              f"{total['other']:>6} {total['killed'] / done:>10.1%}")
    if survivors:
        print("\nsurvivors (python -m mutmut show NAME):")
        print("\n".join(f"  {s}" for s in survivors))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("modules", nargs="*", metavar="MODULE",
                   help=f"core modules to mutate: {', '.join(MODULES)} (default: all)")
    p.add_argument("--report", action="store_true", help="only print the summary of earlier runs")
    p.add_argument("--survivors", action="store_true",
                   help="re-test only the mutants that survived (or that no test reached) last time")
    p.add_argument("--jobs", type=int, default=1, help="mutants tested at once (default 1)")
    p.add_argument("--timeout", type=float, default=3 * 3600, help="seconds per module (default 3 h)")
    args = p.parse_args(argv)
    modules = args.modules or list(MODULES)
    unknown = [m for m in modules if m not in MODULES]
    if unknown:
        p.error(f"unknown module {unknown[0]!r}: choose from {', '.join(MODULES)}")
    if not args.report:
        for m in modules:
            t0 = time.monotonic()
            names = ([k for k, v in statuses(m).items() if v in SURVIVED | NO_TESTS] if args.survivors
                     else [MODULES[m][0] + "*"])
            if not names:
                continue
            cmd = [sys.executable, "-m", "mutmut", "run", "--max-children", str(args.jobs), *names]
            try:
                subprocess.run(cmd, cwd=ROOT, timeout=args.timeout, check=False,
                               env={**os.environ, "PYTHONHASHSEED": "0"})
            except subprocess.TimeoutExpired:
                print(f"{m}: stopped after {args.timeout:.0f} s; run it again to go on", file=sys.stderr)
            print(f"{m}: {time.monotonic() - t0:.0f} s", file=sys.stderr)
    return summarize(modules)


if __name__ == "__main__":
    sys.exit(main())
