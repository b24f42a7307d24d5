"""Replay of the real Philly trace: simulated jobs per second and how time grows with the number of jobs.

For each size N (default 10k, 20k, 40k, 80k and the whole file, 82,247 jobs)
the replay takes a seeded uniform sample of N jobs of the whole trace (so
every size spans the same 109 days with the same burstiness) on a cluster
rescaled to its size (``rescale="cluster"``: recorded submit times, cluster
sized for offered load ``--load``), and runs FIFO and SRTF-Est + EvalStop(k=2)
(FIFO if ``srtf-est`` is not registered). It prints, per run, the wall and
CPU time, jobs per CPU second, the growth of CPU time per job against the
smallest size (1.0 = linear total time) beside what n log n growth would
give, preemptions per job, and the mean number of waiting jobs (Little's law:
total queueing hours over the makespan), which is what the scheduling cost
grows with. CPU time is the figure to compare on a shared machine; the load
average is printed before and after.

``--rekeying`` adds SRTF-Est re-keying every running job at every scheduling
point (the allocator without its kept running order), for the speed-up in one
run; its metrics must equal the kept order's (checked, printed).

    python benchmarks/bench_philly.py [--sizes 10000,20000,40000,80000,all] [--load 1.0] [--rekeying]
    python benchmarks/bench_philly.py --sizes all --profile fifo   # where the time goes
    python benchmarks/bench_philly.py --sizes all --topology 8:consolidate   # nodes against the flat pool

``--topology G:PLACEMENT`` adds, after each flat-pool run, the same replay on
nodes of G GPUs (as many as the sized cluster needs) under that placement
policy, with its CPU time over the flat pool's.

The trace is read from ../shared/traces/philly_jobs_pollux.csv (relative to
the repository root) or ``--trace``; it is not part of the repository.
"""

from __future__ import annotations

import argparse
import cProfile
import math
import os
import pstats
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)  # this checkout's code, not an installed copy

from evalstop_gym.baselines import SCHEDULERS, EvalStop, make_policy  # noqa: E402
from evalstop_gym import run_policy  # noqa: E402
from evalstop_gym.cluster import uniform  # noqa: E402
from evalstop_gym.traces import read_trace, replay_trace, trace_config  # noqa: E402

DEFAULT_TRACE = os.path.join(REPO, "..", "shared", "traces", "philly_jobs_pollux.csv")


def policies(rekeying: bool = False) -> dict:
    sched = "srtf-est" if "srtf-est" in SCHEDULERS else "fifo"
    pols = {"fifo": lambda: make_policy("fifo"),
            f"{sched}+evalstop": lambda: make_policy(sched, "evalstop", k=2)}
    if rekeying:
        cls = SCHEDULERS[sched]
        slow = type(cls.__name__ + "Rekeying", (cls,), {"run_invariant_key": False})
        pols[f"{sched}(rekeying)+evalstop"] = lambda: EvalStop(slow(), k=2)
    return pols


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trace", default=DEFAULT_TRACE)
    p.add_argument("--sizes", default="10000,20000,40000,80000,all")
    p.add_argument("--load", type=float, default=1.0, help="offered load the cluster is sized for")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rekeying", action="store_true",
                   help="also run SRTF-Est re-keying every running job (the speed-up in one run)")
    p.add_argument("--topology", default=None, metavar="G:PLACEMENT",
                   help="also replay on nodes of G GPUs under PLACEMENT (e.g. 8:consolidate)")
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
    cfg = trace_config(load=a.load, seed=a.seed)
    cfgs = {"flat": cfg}
    if a.topology:
        per, placement = a.topology.split(":")
        spec = uniform(1, int(per), placement)  # resized to whole nodes by the replay
        cfgs[a.topology] = trace_config(load=a.load, seed=a.seed, gpus=spec.total_gpus, cluster=spec)
    sizes = [table.n if s == "all" else int(s) for s in a.sizes.split(",")]
    pols = policies(a.rekeying)

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

    print(load())
    print(f"{'policy':<28} {'cluster':<14} {'jobs':>6} {'gpus':>5} {'build s':>7} {'wall s':>7} {'cpu s':>7} "
          f"{'jobs/cpu s':>10} {'cpu/job vs first':>16} {'n log n':>7} {'preempt/job':>11} {'mean waiting':>12} "
          f"{'avg JCT h':>9} {'cpu vs flat':>11}")
    results = {}
    for name, make in pols.items():
        first = None
        for n in sizes:
            flat_s = None
            for topo, cfg in cfgs.items():
                t = time.perf_counter()
                w, rep = replay_trace(table, cfg, jobs=n if n < table.n else None, sample=True, rescale="cluster")
                build_s = time.perf_counter() - t
                t, c = time.perf_counter(), time.process_time()
                m = run_policy(w, make())
                wall_s, cpu_s = time.perf_counter() - t, time.process_time() - c
                if topo == "flat":
                    results[name, n] = m
                    flat_s = cpu_s
                    per_job = cpu_s / n
                    first = first or (per_job, n)
                waiting = m["avg_queue_h"] * n / m["makespan_h"]
                print(f"{name:<28} {topo:<14} {n:>6} {rep.total_gpus:>5} {build_s:>7.2f} {wall_s:>7.2f} "
                      f"{cpu_s:>7.2f} {n / cpu_s:>10.0f} {cpu_s / n / first[0]:>16.2f} "
                      f"{math.log(n) / math.log(first[1]):>7.2f} {m['preemptions'] / n:>11.2f} {waiting:>12.0f} "
                      f"{m['avg_jct_h']:>9.2f} {cpu_s / flat_s:>11.2f}", flush=True)
    for (name, n), m in results.items():
        if "(rekeying)" in name:
            same = m == results[name.replace("(rekeying)", ""), n]
            print(f"{name} on {n} jobs: metrics {'identical to' if same else 'DIFFER from'} the kept order's")
    print(load())
    return 0


if __name__ == "__main__":
    sys.exit(main())
