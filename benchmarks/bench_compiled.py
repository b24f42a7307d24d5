"""The compiled path against the Python simulator: CPU per simulated job, as a ratio within one run.

For each supported pair (``evalstop_gym.compiled.compiled_pairs``) and each size, one workload is
generated (not timed) and played alternately on the Python path (``drive(Simulator(w), policy)``) and
the compiled one (``evalstop_gym.compiled.fast_outcome``), ``--repeat`` times each, interleaved so both
see the same load; the compiled episode is repeated within a timing until it has used 20 ms of CPU.
Prints CPU microseconds per simulated job (min and median over the repeats) and the ratio of Python to
compiled (of the mins, and of the medians), then the same for a whole run as ``reproduce`` plays it
(generate + simulate + metrics). Every compiled outcome is checked equal to the Python one first.

``--clusters`` plays each size on the flat pool and on clusters of nodes of 8 GPUs (as many as the size's
GPUs fill): ``consolidate``, ``first-fit``, ``spread`` (their placement policy, the default spread penalties)
or ``two-types`` (half of the nodes an older GPU generation).

Compile time is shown apart: the CPU seconds of importing the kernel and playing one 200-job episode in
a fresh process, first with an empty numba cache (compiling) and then with the cache that run left
(loading the machine code), both in a temporary ``NUMBA_CACHE_DIR``.

    python benchmarks/bench_compiled.py [--sizes 200,2000] [--repeat 5] [--pairs fifo:none,srtf-est:evalstop]
                                        [--clusters flat,consolidate,spread,two-types]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # this checkout's code

from evalstop_gym import WorkloadConfig, generate  # noqa: E402
from evalstop_gym.baselines import make_policy  # noqa: E402
from evalstop_gym.cluster import PLACEMENTS, ClusterSpec, two_types, uniform  # noqa: E402
from evalstop_gym.compiled import compiled_pairs, fast_outcome  # noqa: E402
from evalstop_gym.metrics import compute_metrics, job_results  # noqa: E402
from evalstop_gym.policy import drive  # noqa: E402
from evalstop_gym.simulator import Simulator  # noqa: E402

# the pairs reproduce and the bench play most (docs/scale.md, "Compiled path")
DEFAULT_PAIRS = ("fifo:none", "fifo:evalstop", "sjf-est:none", "srtf-est:none", "srtf-est:evalstop",
                 "srtf-est:patience", "srtf-est:stopat", "srtf-est:cusum", "srtf-est:smoothed", "srtf-est:droptest",
                 "srtf-est:divergence", "srtf-est:lossplateau", "srtf-progress:evalstop", "lossaware:none",
                 "tiresias:none", "tiresias:evalstop")
MIN_CPU_S = 0.02

FIRST_CALL = """
import time
t = time.process_time()
from evalstop_gym import WorkloadConfig, generate
from evalstop_gym.baselines import make_policy
from evalstop_gym.compiled import fast_outcome
w = generate(WorkloadConfig(seed=0))
t0 = time.process_time()
assert fast_outcome(w, make_policy("srtf-est", "evalstop")) is not None
print(time.process_time() - t0)
"""


def cpu(fn) -> float:
    """CPU seconds of one call of ``fn``, repeated until ``MIN_CPU_S`` is used."""
    calls, t = 0, time.process_time()
    while True:
        fn()
        calls += 1
        used = time.process_time() - t
        if used >= MIN_CPU_S or calls >= 1000:
            return used / calls


def python_episode(w, scheduler, stopper):
    return drive(Simulator(w), make_policy(scheduler, stopper))


def compiled_episode(w, scheduler, stopper):
    return fast_outcome(w, make_policy(scheduler, stopper))


def whole_run(cfg, play, scheduler, stopper):
    out = play(generate(cfg), scheduler, stopper)
    return {**compute_metrics(out), "jobs": job_results(out)}


def measure(cfg, pairs, repeat: int) -> list[dict]:
    w = generate(cfg)
    rows = []
    for scheduler, stopper in pairs:
        ref, got = python_episode(w, scheduler, stopper), compiled_episode(w, scheduler, stopper)
        assert got is not None, f"{scheduler}+{stopper} is not compiled here"
        assert compute_metrics(ref) == compute_metrics(got) and job_results(ref) == job_results(got)
        sim = {"python": [], "compiled": []}
        run = {"python": [], "compiled": []}
        for _ in range(repeat):   # interleaved: both paths see the same load
            for name, play in (("python", python_episode), ("compiled", compiled_episode)):
                sim[name].append(cpu(lambda: play(w, scheduler, stopper)) / cfg.jobs)
                run[name].append(cpu(lambda: whole_run(cfg, play, scheduler, stopper)) / cfg.jobs)
        rows.append({"pair": f"{scheduler}+{stopper}", "jobs": cfg.jobs, "sim": sim, "run": run})
    return rows


def first_call_cpu_s() -> tuple[float, float]:
    """CPU seconds of the first compiled episode in a fresh process: empty cache, then warm cache."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache, "PYTHONPATH": ROOT}
        env.pop("EVALSTOP_COMPILED", None)
        times = [float(subprocess.run([sys.executable, "-c", FIRST_CALL], env=env, capture_output=True, text=True,
                                      check=True).stdout) for _ in range(2)]
    return times[0], times[1]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="200,2000", help="jobs per episode (64 GPUs per 200 jobs)")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--pairs", default=",".join(DEFAULT_PAIRS), help="SCHEDULER:STOPPER,... ('all': every "
                                                                        "compiled pair)")
    p.add_argument("--clusters", default="flat,consolidate",
                   help=f"flat and/or nodes of 8 GPUs: {', '.join(PLACEMENTS)}, two-types")
    a = p.parse_args(argv)
    pairs = (compiled_pairs() if a.pairs == "all" else [tuple(x.split(":")) for x in a.pairs.split(",")])
    cold, warm = first_call_cpu_s()
    print("load average", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    print(f"first compiled episode in a fresh process (CPU s): {cold:.2f} with an empty cache (compiling), "
          f"{warm:.2f} with a warm cache")
    print(f"{'pair':>24} {'cluster':>11} {'jobs':>6} | {'sim us/job: python':>18} {'compiled':>9} {'ratio':>6} "
          f"{'(median)':>8} | {'whole run: python':>17} {'compiled':>9} {'ratio':>6}")
    for jobs in map(int, a.sizes.split(",")):
        gpus = 64 * jobs // 200
        for name in a.clusters.split(","):
            cfg = WorkloadConfig(jobs=jobs, gpus=gpus, seed=1, cluster=cluster(name, gpus))
            for r in measure(cfg, pairs, a.repeat):
                report(r, name)


def cluster(name: str, gpus: int) -> ClusterSpec:
    """``--clusters``' names: the flat pool, or nodes of 8 GPUs."""
    if name == "flat":
        return ClusterSpec.flat(gpus)
    if name == "two-types":
        return two_types(gpus // 8, 8)
    if name not in PLACEMENTS:
        raise SystemExit(f"--clusters {name}: must be flat, two-types or one of {', '.join(PLACEMENTS)}")
    return uniform(gpus // 8, 8, name)


def report(r: dict, name: str) -> None:
    s, w = r["sim"], r["run"]
    med = statistics.median(s["python"]) / statistics.median(s["compiled"])
    print(f"{r['pair']:>24} {name:>11} {r['jobs']:>6} | {min(s['python']) * 1e6:>18.2f} {min(s['compiled']) * 1e6:>9.2f} "
          f"{min(s['python']) / min(s['compiled']):>6.1f} {med:>8.1f} | {min(w['python']) * 1e6:>17.2f} "
          f"{min(w['compiled']) * 1e6:>9.2f} {min(w['python']) / min(w['compiled']):>6.1f}")


if __name__ == "__main__":
    main()
