"""Replay of the real Philly trace: simulated jobs per second and how time grows with the number of jobs.

Two series of sizes N (default 10k and 20k; ``--sizes 10000,20000,40000,80000,all`` adds 40k, 80k
and the whole file):

* ``sample`` (the bar's figure): a seeded uniform sample of N jobs of the
  whole trace (so every size spans the same 109 days with the same
  burstiness) on a cluster rescaled to its size (``rescale="cluster"``:
  recorded submit times, cluster sized for offered load ``--load``). The
  cluster is never smaller than the sample's largest demand, and on Philly
  that floor binds at the small sizes (10k: a 64-GPU job on a cluster that
  would need 46 GPUs), so they run at a lower offered load (0.71 at 10k,
  0.74 at 20k, 1.00 from 40k): the work per job (preemptions, starts)
  grows with N whatever the simulator does.
* ``matched``: the same, from the trace's jobs of at most ``cap`` GPUs,
  ``cap`` the largest recorded demand that fits the cluster the smallest
  size needs at ``--load`` (Philly at load 1: 32 GPUs, dropping the 9 jobs
  of 64 and 128 GPUs). No size's cluster is then floored, so every size runs
  at the same offered load with the same job mix, and the cost per job
  against N is the code's scaling, not the samples' contention.

Each run is FIFO and SRTF-Est + EvalStop(k=2) (FIFO alone if ``srtf-est`` is
not registered). The first table gives, per run, the offered load (GPU-hours
over span x GPUs), the wall and CPU time, jobs per CPU second, the growth of
CPU time per job against the series' smallest size (1.0 = linear total time)
beside what n log n growth would give, preemptions per job, and the mean
number of waiting jobs (Little's law: total queueing hours over the
makespan). CPU time is the figure to compare on a shared machine; the load
average is printed before and after.

A second table splits the cost, from a second, instrumented run of each
size: events per job (arrivals, checkpoints, the checkpoints voided by
preemptions and stops, wake-ups), scheduling points per job, changes per job
(starts and preemptions the plans ask for), CPU microseconds per scheduling
point (in the policy's ``schedule``), per change in ``schedule`` and in
applying the plans (the simulator's ``start`` and ``preempt``), per
scheduling point that changed nothing (and the share of such points), per
event (everything else, over the events), and the garbage collector's CPU
time per job (``gc.callbacks``; kept out of the other figures), each beside
its ratio to the series' smallest size. When the samples grow more
contended, events and changes per job grow with them; the per-event and
per-change costs say whether the work per unit grew too.

``--rekeying`` adds SRTF-Est re-keying every running job at every scheduling
point (the allocator without its kept running order), for the speed-up in one
run; its metrics must equal the kept order's (checked, printed).

    python benchmarks/bench_philly.py [--sizes 10000,20000,40000,80000,all] [--load 1.0] [--rekeying]

CPU times are also given in units of 1,000 CartPole-v1 steps timed in the same
run (:mod:`benchmarks.reference`), the figure that travels between machines.
    python benchmarks/bench_philly.py --series sample --no-split   # the first table of the bar's series only
    python benchmarks/bench_philly.py --sizes all --profile fifo   # where the time goes
    python benchmarks/bench_philly.py --sizes all --topology 8:consolidate   # nodes against the flat pool

``--topology G:PLACEMENT`` adds, after each flat-pool run of the ``sample``
series, the same replay on nodes of G GPUs (as many as the sized cluster
needs) under that placement policy, with its CPU time over the flat pool's.

The trace is read from ../shared/traces/philly_jobs_pollux.csv (relative to
the repository root) or ``--trace``; it is not part of the repository.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import math
import os
import pstats
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)  # this checkout's code, not an installed copy

import evalstop_gym.policy as policy_module  # noqa: E402
from evalstop_gym.baselines import SCHEDULERS, EvalStop, make_policy  # noqa: E402
from evalstop_gym import Simulator, compute_metrics, drive, run_policy  # noqa: E402
from evalstop_gym.cluster import uniform  # noqa: E402
from evalstop_gym.traces import read_trace, replay_trace, trace_config  # noqa: E402
from benchmarks.reference import cartpole_steps_per_cpu_s, reference_line  # noqa: E402

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


def matched_table(table, sizes: list[int], load: float):
    """The trace's jobs of at most ``cap`` GPUs, ``cap`` the largest recorded demand that fits the cluster
    the smallest size needs at ``load`` (GPU-hours over the span, scaled to that size): no size's cluster
    is floored by a demand above what its load needs. Returns the table, ``cap`` and the share of jobs
    and of GPU-hours dropped."""
    gpu_h = table.gpus * table.duration_s / 3600.0
    span_h = (table.submit_s[-1] - table.submit_s[0]) / 3600.0
    need = float(gpu_h.sum()) / (span_h * load) * min(sizes) / table.n
    demands = np.unique(table.gpus)
    cap = int(demands[demands <= need].max()) if (demands <= need).any() else int(demands.min())
    keep = table.gpus <= cap
    return table.subset(np.flatnonzero(keep)), cap, 1 - keep.mean(), float(gpu_h[~keep].sum() / gpu_h.sum())


def offered_load(w, gpus: int) -> float:
    """GPU-hours asked over the span of the submits times the GPUs."""
    return float(np.sum(w.gpus * w.length_h)) / (float(w.submit_h[-1]) * gpus)


def run_plain(workload, policy) -> tuple[dict, float, float]:
    """Metrics of one run, its CPU seconds, and the garbage collector's CPU seconds within them."""
    gc_s = [0.0, 0.0]  # start of the current collection; CPU s of all collections

    def collecting(phase, info):
        if phase == "start":
            gc_s[0] = time.process_time()
        else:
            gc_s[1] += time.process_time() - gc_s[0]

    gc.collect()  # earlier runs' garbage is not this run's cost
    gc.callbacks.append(collecting)
    try:
        c = time.process_time()
        m = compute_metrics(drive(Simulator(workload), policy))
        c = time.process_time() - c
    finally:
        gc.callbacks.remove(collecting)
    return m, c, gc_s[1]


def run_counted(workload, policy) -> tuple[float, dict]:
    """CPU seconds of one instrumented run, and its counts: events, scheduling points, changes, CPU s in
    ``schedule`` and in applying its plans (less the cost of reading the CPU clock, :func:`clock_cost`),
    and in the garbage collector (kept out of the other two)."""
    counts = {"points": 0, "changes": 0, "schedule_s": 0.0, "apply_s": 0.0, "idle": 0, "idle_s": 0.0, "gc_s": 0.0}
    schedule, apply_plan, clock = policy.schedule, policy_module.apply_plan, CLOCK_IN
    gc_s = [0.0, 0.0]  # start of the current collection; CPU s of all collections

    def counted(cluster):
        g, c = gc_s[1], time.process_time()
        plan = schedule(cluster)
        c = time.process_time() - c - clock - (gc_s[1] - g)  # the collector's passes are counted apart
        changes = len(plan.preempt) + len(plan.start)
        counts["schedule_s"] += c
        counts["points"] += 1
        counts["changes"] += changes
        if not changes:  # a point where nothing changed
            counts["idle"] += 1
            counts["idle_s"] += c
        return plan

    def applying(sim, plan):
        g, c = gc_s[1], time.process_time()
        apply_plan(sim, plan)
        counts["apply_s"] += time.process_time() - c - clock - (gc_s[1] - g)

    def collecting(phase, info):
        if phase == "start":
            gc_s[0] = time.process_time()
        else:
            gc_s[1] += time.process_time() - gc_s[0]

    policy.schedule = counted  # drive() reads the bound method once, at its start
    policy_module.apply_plan = applying  # and this module global at every scheduling point
    gc.collect()
    gc.callbacks.append(collecting)
    try:
        sim = Simulator(workload)
        c = time.process_time()
        drive(sim, policy)
        c = time.process_time() - c - counts["points"] * 2 * CLOCK_PAIR
    finally:
        gc.callbacks.remove(collecting)
        policy_module.apply_plan = apply_plan
    counts["events"], counts["gc_s"] = sim.events, gc_s[1]
    return c, counts


def clock_cost(reps: int = 20000) -> tuple[float, float]:
    """CPU seconds of reading the CPU clock: what falls between two ``process_time()`` calls in a row
    (inside every timed interval), and the whole cost of a timed pair (about 1 us: subtracted from the
    instrumented run's CPU time, per pair)."""
    inside, c = 0.0, time.process_time()
    for _ in range(reps):
        d = time.process_time()
        inside += time.process_time() - d
    return inside / reps, (time.process_time() - c) / reps


CLOCK_IN, CLOCK_PAIR = clock_cost()


def print_split(split: list) -> None:
    """Per job: events, scheduling points, changes; CPU us per scheduling point, per change (in
    ``schedule``, and in applying the plans), per scheduling point that changed nothing (idle), and per
    event; x: against the series' first size."""
    cols = (("events/job", 2), ("points/job", 2), ("changes/job", 2), ("us/point", 1), ("us/change", 1),
            ("apply/chg", 1), ("idle share", 2), ("us/idle pt", 1), ("us/event", 2), ("GC us/job", 1))
    print("\n" + f"{'policy':<28} {'series':<8} {'jobs':>6} " + " ".join(f"{c:>11} {'x':>5}" for c, _ in cols)
          + f" {'sched share':>11} {'n log n':>7}")
    first = {}
    for name, series, n, cpu_s, k in split:
        row = (k["events"] / n, k["points"] / n, k["changes"] / n,
               k["schedule_s"] / max(k["points"], 1) * 1e6, k["schedule_s"] / max(k["changes"], 1) * 1e6,
               k["apply_s"] / max(k["changes"], 1) * 1e6,
               k["idle"] / max(k["points"], 1), k["idle_s"] / max(k["idle"], 1) * 1e6,
               (cpu_s - k["schedule_s"] - k["apply_s"] - k["gc_s"]) / k["events"] * 1e6, k["gc_s"] / n * 1e6)
        f = first.setdefault((name, series), (row, n))
        cells = " ".join(f"{v:>11.{dp}f} {v / f[0][i] if f[0][i] else 1:>5.2f}"
                         for i, (v, (_, dp)) in enumerate(zip(row, cols)))
        print(f"{name:<28} {series:<8} {n:>6} {cells} {k['schedule_s'] / cpu_s:>11.2f} "
              f"{math.log(n) / math.log(f[1]):>7.2f}")


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trace", default=DEFAULT_TRACE)
    # the default finishes in about two minutes on 2 shared cores; the full curve:
    # --sizes 10000,20000,40000,80000,all (about ten minutes)
    p.add_argument("--sizes", default="10000,20000")
    p.add_argument("--load", type=float, default=1.0, help="offered load the cluster is sized for")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--series", default="sample,matched",
                   help="sample (uniform samples of the whole trace), matched (the load held: see the docstring)")
    p.add_argument("--no-split", action="store_true", help="skip the instrumented runs (the second table)")
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
    wanted = a.series.split(",")
    if not wanted or set(wanted) - {"sample", "matched"}:
        print(f"--series must be sample, matched or both (comma-separated), not {a.series!r}", file=sys.stderr)
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

    tables = {}
    if "sample" in wanted:
        tables["sample"] = (table, sizes)
    if "matched" in wanted:
        sub, cap, jobs_out, gpu_h_out = matched_table(table, sizes, a.load)
        tables["matched"] = (sub, [sub.n if s == "all" else min(n, sub.n) for s, n in zip(a.sizes.split(","), sizes)])
        print(f"matched series: jobs of at most {cap} GPUs, {sub.n} of {table.n} ({jobs_out:.3%} of the jobs, "
              f"{gpu_h_out:.2%} of the GPU-hours left out)")

    print(load())
    cartpole = cartpole_steps_per_cpu_s()
    print(reference_line(cartpole))
    print(f"{'policy':<28} {'series':<8} {'cluster':<14} {'jobs':>6} {'gpus':>5} {'offered':>7} {'build s':>7} "
          f"{'wall s':>7} {'cpu s':>7} {'x CartPole':>10} {'jobs/cpu s':>10} {'cpu/job vs first':>16} {'n log n':>7} "
          f"{'preempt/job':>11} {'mean waiting':>12} {'avg JCT h':>9} {'GC us/job':>9} {'cpu vs flat':>11}")
    results, split = {}, []
    for name, make in pols.items():
        for series, (tab, ns) in tables.items():
            first = None
            for n in ns:
                flat_s = None
                for topo, c in cfgs.items():
                    if topo != "flat" and series != "sample":
                        continue
                    t = time.perf_counter()
                    w, rep = replay_trace(tab, c, jobs=n if n < tab.n else None, sample=True, rescale="cluster")
                    build_s = time.perf_counter() - t
                    t = time.perf_counter()
                    m, cpu_s, gc_s = run_plain(w, make())
                    wall_s = time.perf_counter() - t
                    if topo == "flat":
                        results[name, series, n] = m
                        flat_s = cpu_s
                        first = first or (cpu_s / n, n)
                        if not a.no_split:
                            split.append((name, series, n, *run_counted(w, make())))
                    waiting = m["avg_queue_h"] * n / m["makespan_h"]
                    print(f"{name:<28} {series:<8} {topo:<14} {n:>6} {rep.total_gpus:>5} "
                          f"{offered_load(w, rep.total_gpus):>7.2f} {build_s:>7.2f} {wall_s:>7.2f} {cpu_s:>7.2f} "
                          f"{cpu_s * cartpole / 1000:>10.1f} {n / cpu_s:>10.0f} {cpu_s / n / first[0]:>16.2f} {math.log(n) / math.log(first[1]):>7.2f} "
                          f"{m['preemptions'] / n:>11.2f} {waiting:>12.0f} {m['avg_jct_h']:>9.2f} "
                          f"{gc_s / n * 1e6:>9.1f} {cpu_s / flat_s:>11.2f}", flush=True)
    if split:
        print_split(split)
    for (name, series, n), m in results.items():
        if "(rekeying)" in name:
            same = m == results[name.replace("(rekeying)", ""), series, n]
            print(f"{name} {series} on {n} jobs: metrics {'identical to' if same else 'DIFFER from'} the kept order's")
    print(load())
    return 0


if __name__ == "__main__":
    sys.exit(main())
