"""Replay of the real Philly trace: simulated jobs per second and how time grows with the number of jobs.

For each size N (default 10k, 20k, 40k, 80k and the whole file, 82,247 jobs)
the replay takes a seeded uniform sample of N jobs of the whole trace (so
every size spans the same 109 days with the same burstiness) on a cluster
rescaled to its size (``rescale="cluster"``: recorded submit times, cluster
sized for offered load ``--load``), and runs FIFO and SRTF-Est + EvalStop(k=2)
(FIFO if ``srtf-est`` is not registered). It prints, per run, the wall time,
jobs/s, the growth of time per job against the smallest size (1.0 = linear
total time), and the mean number of waiting jobs (Little's law: total queueing
hours over the makespan), which is what the scheduling cost grows with.

    python benchmarks/bench_philly.py [--sizes 10000,20000,40000,80000,all] [--load 1.0]
    python benchmarks/bench_philly.py --sizes all --profile fifo   # where the time goes
    python benchmarks/bench_philly.py --sizes all --topology flat,8:consolidate   # nodes against the flat pool

``--topology``: one or more of ``flat`` (one pool) and ``G:PLACEMENT``
(nodes of G GPUs, as many as the sized cluster needs, under that placement
policy); each policy runs on each, and the last column gives its sim time
over the flat pool's (when ``flat`` is listed first).

The trace is read from ../shared/traces/philly_jobs_pollux.csv (relative to
the repository root) or ``--trace``; it is not part of the repository.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time

from baselines import SCHEDULERS, make_policy
from evalstop_gym import run_policy
from evalstop_gym.cluster import uniform
from evalstop_gym.traces import read_trace, replay_trace, trace_config

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_TRACE = os.path.join(REPO, "..", "shared", "traces", "philly_jobs_pollux.csv")


def policies() -> dict:
    sched = "srtf-est" if "srtf-est" in SCHEDULERS else "fifo"
    return {"fifo": lambda: make_policy("fifo"),
            f"{sched}+evalstop": lambda: make_policy(sched, "evalstop", k=2)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trace", default=DEFAULT_TRACE)
    p.add_argument("--sizes", default="10000,20000,40000,80000,all")
    p.add_argument("--load", type=float, default=1.0, help="offered load the cluster is sized for")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--topology", default="flat", help="flat and/or G:PLACEMENT, comma-separated")
    p.add_argument("--profile", metavar="POLICY", default=None,
                   help="profile this policy (fifo or the second one) on the largest size and print the top calls")
    a = p.parse_args(argv)
    if not os.path.exists(a.trace):
        print(f"Philly trace not found at {a.trace}; pass --trace", file=sys.stderr)
        return 2

    t = time.perf_counter()
    table = read_trace(a.trace, "philly")
    read_s = time.perf_counter() - t
    print(f"read {table.n} jobs in {read_s:.2f} s ({table.n / read_s:.0f} rows/s)")
    cfgs = {}
    for topo in a.topology.split(","):
        if topo == "flat":
            cfgs[topo] = trace_config(load=a.load, seed=a.seed)
        else:
            per, placement = topo.split(":")
            spec = uniform(1, int(per), placement)  # resized to whole nodes by the replay
            cfgs[topo] = trace_config(load=a.load, seed=a.seed, gpus=spec.total_gpus, cluster=spec)
    cfg = next(iter(cfgs.values()))
    sizes = [table.n if s == "all" else int(s) for s in a.sizes.split(",")]
    pols = policies()

    if a.profile:
        name = next((k for k in pols if k.startswith(a.profile)), None)
        if name is None:
            print(f"--profile must be one of {', '.join(pols)}", file=sys.stderr)
            return 2
        n = max(sizes)
        w, rep = replay_trace(table, cfg, jobs=n if n < table.n else None, sample=True, rescale="cluster")
        prof = cProfile.Profile()
        prof.runcall(run_policy, w, pols[name]())
        print(f"{name} on {n} jobs, {rep.total_gpus} GPUs:")
        pstats.Stats(prof).sort_stats("cumulative").print_stats(12)
        return 0

    print(f"{'policy':<20} {'topology':<14} {'jobs':>7} {'gpus':>5} {'build s':>8} {'sim s':>8} {'jobs/s':>8} "
          f"{'time/job vs first':>18} {'mean waiting jobs':>18} {'avg JCT h':>10} {'vs flat':>8}")
    for name, make in pols.items():
        first = None
        for n in sizes:
            flat_s = None
            for topo, cfg in cfgs.items():
                t = time.perf_counter()
                w, rep = replay_trace(table, cfg, jobs=n if n < table.n else None, sample=True, rescale="cluster")
                build_s = time.perf_counter() - t
                t = time.perf_counter()
                m = run_policy(w, make())
                sim_s = time.perf_counter() - t
                flat_s = sim_s if topo == "flat" else flat_s
                per_job = sim_s / n
                first = first or per_job
                waiting = m["avg_queue_h"] * n / m["makespan_h"]
                ratio = f"{sim_s / flat_s:.2f}" if flat_s else "-"
                print(f"{name:<20} {topo:<14} {n:>7} {rep.total_gpus:>5} {build_s:>8.2f} {sim_s:>8.2f} "
                      f"{n / sim_s:>8.0f} {per_job / first:>18.2f} {waiting:>18.0f} {m['avg_jct_h']:>10.2f} "
                      f"{ratio:>8}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
