"""A big episode: 20,000 jobs (rlhf-heavy) on 2,000 GPUs by default, 100,000 on 10,000 with
``--jobs 100000 --gpus 10000``, with its time and peak memory.

Each policy runs in a fresh process, so the peak resident memory it reports
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``) is that episode's alone:
interpreter, workload with its hidden curves, simulator and metrics. Times
are wall and CPU seconds for generating the workload, simulating and computing
the metrics; the load average is printed beside them (CPU time is the figure
to compare on a shared machine), and the simulation's CPU time also in units
of 1,000 CartPole-v1 steps timed in the same run (:mod:`benchmarks.reference`),
the figure that travels between machines.

    python benchmarks/bench_scale.py [--jobs 100000] [--gpus 10000] [--load 1.5]
                                     [--policies fifo:evalstop,srtf-est:evalstop]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)  # this checkout's code, not an installed copy


def episode(jobs: int, gpus: int, workload: str, policy: str, seed: int, load: float | None) -> dict:
    """Run one episode in this process; return its timings, peak memory and a few metrics."""
    from evalstop_gym.baselines import make_policy
    from evalstop_gym import WorkloadConfig, compute_metrics, drive, generate
    from evalstop_gym.simulator import Simulator

    scheduler, stopper = policy.split(":")
    out = {"policy": policy, "jobs": jobs, "gpus": gpus}
    clock = [time.perf_counter(), time.process_time()]

    def lap(name):
        w, c = time.perf_counter(), time.process_time()
        out[f"{name}_wall_s"], out[f"{name}_cpu_s"] = w - clock[0], c - clock[1]
        clock[:] = w, c

    cfg = WorkloadConfig(workload=workload, jobs=jobs, gpus=gpus, seed=seed)
    w = generate(cfg if load is None else cfg.replace(load=load))
    lap("generate")
    outcome = drive(Simulator(w), make_policy(scheduler, stopper))
    lap("simulate")
    m = compute_metrics(outcome)
    lap("metrics")
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    out.update({k: m[k] for k in ("avg_jct_h", "utilization", "preemptions", "jobs_stopped")})
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # the default finishes in about a minute on 2 shared cores; --jobs 100000 --gpus 10000 is the large one
    p.add_argument("--jobs", type=int, default=20_000)
    p.add_argument("--gpus", type=int, default=2_000)
    p.add_argument("--workload", default="rlhf-heavy")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--load", type=float, default=None, help="offered load (default: the config's)")
    p.add_argument("--policies", default="fifo:evalstop,srtf-est:evalstop", help="SCHEDULER:STOPPER,...")
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)  # internal: run one policy, print JSON
    a = p.parse_args(argv)
    if a.one:
        print(json.dumps(episode(a.jobs, a.gpus, a.workload, a.one, a.seed, a.load)))
        return 0
    from evalstop_gym import WorkloadConfig
    from benchmarks.reference import cartpole_steps_per_cpu_s, reference_line

    offered = WorkloadConfig().load if a.load is None else a.load
    print(f"{a.jobs} jobs ({a.workload}, offered load {offered}) on {a.gpus} GPUs, seed {a.seed}; load average "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    cartpole = cartpole_steps_per_cpu_s()
    print(reference_line(cartpole))
    print(f"{'policy':<20} {'gen s':>6} {'sim wall s':>10} {'sim cpu s':>9} {'x CartPole':>10} {'metrics s':>9} "
          f"{'total wall s':>12} {'peak RSS MB':>11} {'preemptions':>11} {'stopped':>7} {'avg JCT h':>9}")
    for policy in a.policies.split(","):
        cmd = [sys.executable, os.path.abspath(__file__), "--jobs", str(a.jobs), "--gpus", str(a.gpus),
               "--workload", a.workload, "--seed", str(a.seed), "--one", policy]
        cmd += [] if a.load is None else ["--load", str(a.load)]
        r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        total = r["generate_wall_s"] + r["simulate_wall_s"] + r["metrics_wall_s"]
        print(f"{policy:<20} {r['generate_wall_s']:>6.2f} {r['simulate_wall_s']:>10.2f} {r['simulate_cpu_s']:>9.2f} "
              f"{r['simulate_cpu_s'] * cartpole / 1000:>10.1f} {r['metrics_wall_s']:>9.2f} {total:>12.2f} {r['peak_rss_mb']:>11.0f} {r['preemptions']:>11} "
              f"{r['jobs_stopped']:>7} {r['avg_jct_h']:>9.2f}", flush=True)
    print("load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
