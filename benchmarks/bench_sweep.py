"""A sweep on 1 and 2 workers: wall and CPU time, and how much CPU other processes took meanwhile.

Runs ``python3 -m evalstop_gym.cli reproduce --scale default --seeds 1 --workers W``
(every experiment; ``--scale large`` gives the 158 runs of docs/scale.md) for each worker count in turn, ``--repeats``
times, alternating, each into a fresh folder. For each it prints the wall
time, the CPU time of the command and its workers (``RUSAGE_CHILDREN``), the
load average before and after, and the CPU seconds other processes used
meanwhile (all busy time in ``/proc/stat`` less the sweep's own): on a
machine shared with other work, that is what the workers could not have.
Every run must write the same ``summary.md``. Then it times the run with the
highest estimated cost alone (``estimated_cost``): no sweep ends sooner than
that run takes, whatever the workers.

``--against DIR`` also runs the checkout in DIR (e.g. the code before a
change), alternately with this one, labelled ``other``.

    python benchmarks/bench_sweep.py [--workers 1,2] [--repeats 1] [--scale default] [--seeds 1]
                                     [--against DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import os
import resource
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)  # this checkout's code, not an installed copy


def busy_seconds() -> float | None:
    """CPU seconds all cores have spent busy since boot (``/proc/stat``; ``None`` off Linux)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return None
    idle = fields[3] + fields[4]   # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def sweep(repo: str, workers: int, scale: str, seeds: int, out: str) -> dict:
    """One ``reproduce`` of the checkout ``repo`` in a fresh process; its wall and CPU seconds and the
    others' CPU meanwhile."""
    cmd = [sys.executable, "-m", "evalstop_gym.cli", "reproduce", "--scale", scale, "--seeds", str(seeds),
           "--workers", str(workers), "--out", out, "--no-progress"]
    load0, busy0, cpu0, t0 = os.getloadavg()[0], busy_seconds(), children_cpu(), time.perf_counter()
    subprocess.run(cmd, cwd=repo, check=True, stdout=subprocess.DEVNULL)
    wall, cpu, busy1 = time.perf_counter() - t0, children_cpu() - cpu0, busy_seconds()
    with open(os.path.join(out, "summary.md"), "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:12]
    others = None if busy0 is None else max(busy1 - busy0 - cpu, 0.0)
    return {"workers": workers, "wall": wall, "cpu": cpu, "others": others, "load": (load0, os.getloadavg()[0]),
            "summary": digest}


def longest_run(scale: str) -> tuple[str, float, float]:
    """The sweep's run with the highest estimated cost, timed alone here: (policy, wall s, CPU s)."""
    from evalstop_gym.config import WorkloadConfig
    from evalstop_gym.experiments.runner import RunSpec, estimated_cost, execute
    from evalstop_gym.experiments.spec import build_suite
    from evalstop_gym.experiments.suite import SCALES

    base = WorkloadConfig(**SCALES[scale])
    spec = max((RunSpec.of(p, base, 0) for e in build_suite() for p in e.points), key=estimated_cost)
    w, c = time.perf_counter(), time.process_time()
    execute(spec)
    return f"{spec.scheduler}:{spec.stopper}", time.perf_counter() - w, time.process_time() - c


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", default="1,2", help="worker counts, comma-separated (default %(default)s)")
    # the defaults finish in about two minutes on 2 shared cores; the figures of docs/scale.md came from
    # --scale large --repeats 3 (about an hour)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--scale", default="default")
    p.add_argument("--seeds", type=int, default=1)
    p.add_argument("--against", default=None, metavar="DIR", help="another checkout to run alternately")
    a = p.parse_args(argv)
    repos = {"this": REPO} if a.against is None else {"this": REPO, "other": os.path.abspath(a.against)}
    counts = [int(w) for w in a.workers.split(",")]
    print(f"reproduce --scale {a.scale} --seeds {a.seeds}; {os.cpu_count()} cores")
    print(f"{'code':>5} {'workers':>7} {'wall s':>7} {'CPU s':>6} {'others CPU s':>12} {'free cores':>10} "
          f"{'load average':>14} {'summary.md':>12}")
    digests = set()
    with tempfile.TemporaryDirectory() as tmp:
        for rep, w, label in itertools.product(range(a.repeats), counts, repos):
            r = sweep(repos[label], w, a.scale, a.seeds, os.path.join(tmp, f"{label}-w{w}-{rep}"))
            digests.add(r["summary"])
            others = "n/a" if r["others"] is None else f"{r['others']:.1f}"
            free = "n/a" if r["others"] is None else f"{os.cpu_count() - r['others'] / r['wall']:.2f}"
            print(f"{label:>5} {w:>7} {r['wall']:>7.1f} {r['cpu']:>6.1f} {others:>12} {free:>10} "
                  f"{r['load'][0]:>6.2f} -> {r['load'][1]:<5.2f} {r['summary']:>12}", flush=True)
    print("same summary.md in every run" if len(digests) == 1 else f"summary.md DIFFERS: {sorted(digests)}")
    policy, wall, cpu = longest_run(a.scale)
    print(f"longest estimated run ({policy}, seed 0) alone: {wall:.2f} s wall, {cpu:.2f} CPU s; "
          f"load average {os.getloadavg()[0]:.2f}")
    return 0 if len(digests) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
