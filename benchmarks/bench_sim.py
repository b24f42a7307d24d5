"""Simulator throughput: simulated jobs per second, and how cost grows with size.

Runs the default episode (200 jobs, 64 GPUs, FIFO + EvalStop k=2) and episodes
scaled by 10x, 40x (jobs and GPUs together, so contention stays the same), then
the default episode in the realistic world (speed jitter, eval and resume
costs, per-job eval noise), with its jobs/s as a share of the paper world's.
Prints jobs per CPU second, also as a multiple of CartPole-v1's steps per CPU
second measured in the same run (:mod:`benchmarks.reference`: the figure that
travels between machines), with and without workload generation, and the
growth of per-job cost relative to the smallest size (n log n growth would
give log(n)/log(200): 1.43 at 10x). Times are CPU seconds (best of
``--repeat``), steadier than wall time on a shared machine.

    python benchmarks/bench_sim.py [--repeat 5] [--policy fifo:evalstop] [--scales 1,10,40]
    python benchmarks/bench_sim.py --policy srtf-est:evalstop --scales 50,100,200,400  # 10k-80k jobs
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's code

from evalstop_gym.baselines import make_policy  # noqa: E402
from evalstop_gym import WorkloadConfig, generate, run_policy  # noqa: E402
from benchmarks.reference import cartpole_steps_per_cpu_s, reference_line  # noqa: E402


def best_time(fn, repeat: int) -> float:
    best = math.inf
    for _ in range(repeat):
        t = time.process_time()
        fn()
        best = min(best, time.process_time() - t)
    return best


def measure(jobs: int, gpus: int, scheduler: str, stopper: str, repeat: int, calibration: str = "paper") -> dict:
    cfg = WorkloadConfig(jobs=jobs, gpus=gpus, seed=1, calibration=calibration)
    w = generate(cfg)
    sim_s = best_time(lambda: run_policy(w, make_policy(scheduler, stopper)), repeat)
    gen_s = best_time(lambda: generate(cfg), repeat)
    return {"world": calibration, "jobs": jobs, "gpus": gpus, "sim_s": sim_s, "gen_s": gen_s,
            "jobs_per_s": jobs / sim_s, "jobs_per_s_with_gen": jobs / (sim_s + gen_s)}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--policy", default="fifo:evalstop", help="SCHEDULER:STOPPER")
    p.add_argument("--scales", default="1,10,40", help="multiples of (200 jobs, 64 GPUs)")
    a = p.parse_args(argv)
    scheduler, stopper = a.policy.split(":")
    rows = [measure(200 * s, 64 * s, scheduler, stopper, a.repeat if s < 20 else 1)
            for s in map(int, a.scales.split(","))]
    # the realistic world at the default size: its jobs/s as a share of the paper world's
    real = measure(200, 64, scheduler, stopper, a.repeat, calibration="realistic")
    cartpole = cartpole_steps_per_cpu_s()
    base = rows[0]["sim_s"] / rows[0]["jobs"]
    print(f"policy {scheduler} + {stopper}; load average", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    print(reference_line(cartpole))
    print(f"{'world':>9} {'jobs':>7} {'gpus':>6} {'sim s':>8} {'jobs/s':>9} {'x CartPole':>10} "
          f"{'jobs/s incl. gen':>17} {'cost/job vs 1x':>15} {'n log n would be':>17}")
    for r in rows + [real]:
        growth = (r["sim_s"] / r["jobs"]) / base
        nlogn = math.log(r["jobs"]) / math.log(rows[0]["jobs"])
        print(f"{r['world']:>9} {r['jobs']:>7} {r['gpus']:>6} {r['sim_s']:>8.4f} {r['jobs_per_s']:>9.0f} "
              f"{r['jobs_per_s'] / cartpole:>10.3f} {r['jobs_per_s_with_gen']:>17.0f} {growth:>15.2f} {nlogn:>17.2f}")
    print(f"realistic / paper jobs/s at 200 jobs: {real['jobs_per_s'] / rows[0]['jobs_per_s']:.2f} "
          f"(incl. generation {real['jobs_per_s_with_gen'] / rows[0]['jobs_per_s_with_gen']:.2f})")


if __name__ == "__main__":
    main()
