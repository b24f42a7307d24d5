"""Replayed Philly jobs: the package against the plain integer-second reference simulator.

For the first N recorded jobs (sorted by submit time, duration >= 60 s,
recorded times: ``rescale="none"``) on one pool of ``--gpus`` GPUs, runs FIFO
first-fit and SRTF with exact lengths both through the package and through
``reference`` in ``tests/test_exact_time.py`` (integer seconds, plain lists,
no code shared with the package), and prints both average JCTs, the largest
per-job finish difference and both preemption counts.

    python benchmarks/reference_agreement.py [--sizes 1000,5000,10000] [--gpus 349]
    python benchmarks/reference_agreement.py --sizes 1000,5000,10000,20000   # the larger check
"""

from __future__ import annotations

import argparse
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))
from test_exact_time import PHILLY, package, philly_jobs, reference  # noqa: E402


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # the default finishes in about a minute on 2 shared cores; --sizes 1000,5000,10000,20000 adds 20k
    p.add_argument("--sizes", default="1000,5000,10000")
    p.add_argument("--gpus", type=int, default=349)
    a = p.parse_args(argv)
    if not os.path.exists(PHILLY):
        sys.exit(f"no trace at {PHILLY}")
    print(f"{'policy':>6} {'jobs':>6} {'package avg JCT h':>18} {'reference avg JCT h':>20} "
          f"{'max |finish diff| s':>20} {'preemptions pkg/ref':>20} {'pkg s':>6}")
    for n in map(int, a.sizes.split(",")):
        jobs = philly_jobs(n)
        for policy in ("fifo", "srtf"):
            t = time.perf_counter()
            out = package(jobs, a.gpus, policy, 10)
            pkg_s = time.perf_counter() - t
            finish, pre = reference(jobs, a.gpus, policy)
            pkg_finish = out.finish_ticks / 1000
            diff = max(abs(x - y) for x, y in zip(pkg_finish.tolist(), finish))
            ref_jct = sum(f - s for f, (s, _, _) in zip(finish, jobs)) / n / 3600
            print(f"{policy:>6} {n:>6} {out.jct_h.mean():>18.2f} {ref_jct:>20.2f} {diff:>20.3f} "
                  f"{out.preemptions:>9}/{pre:<10} {pkg_s:>6.2f}")


if __name__ == "__main__":
    main()
