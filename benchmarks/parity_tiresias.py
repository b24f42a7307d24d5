"""Replayed Philly jobs: the package against Tiresias' own simulator (SymbioticLab/Tiresias).

Converts the first N Philly jobs (sorted by submit time, duration >= 60 s,
recorded times) to the peer's trace format (``job_id,num_gpu,submit_time,
iterations,model_name,duration,interval``, whole seconds) and a cluster spec of
``--gpus`` one-GPU nodes, runs the peer's ``run_sim.py`` (``--scheme=count``:
GPUs are only counted) from a throwaway folder outside this repository, runs
the same jobs through the package, and prints one row per scheduler:

* FIFO: the peer's ``fjf`` (FIFO, a job that does not fit is skipped) against ``fifo``;
* SRTF: the peer's ``shortest`` (remaining run time, exact) against ``srtf-est`` with exact estimates;
* 2D-LAS: the peer's ``dlas-gpu`` (thresholds 3,250 and 7,200 GPU-seconds, no
  starvation guard) against ``Tiresias((3250/3600, 2.0), None)``, as published
  (exact demotion timer) and with the peer's own timer (``demotion_timer="reference"``).

Columns: average JCT of each, their relative difference, the share of jobs
whose finish second is the same, preemptions, and CPU seconds of each (the
peer's through ``RUSAGE_CHILDREN``) with their ratio. The peer needs Python
2.7 with numpy; its checkout is either a work tree or a bare git directory
(``git archive`` exports it).

    python benchmarks/parity_tiresias.py --peer PATH/TO/Tiresias [--python python2.7]
        [--sizes 1000,10000] [--gpus 349] [--peer-schedules fjf,shortest,dlas-gpu]
"""

from __future__ import annotations

import argparse
import csv
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "tests"))
from test_exact_time import PHILLY, philly_jobs  # noqa: E402

from evalstop_gym.baselines import make_policy  # noqa: E402
from evalstop_gym.baselines.tiresias import Tiresias  # noqa: E402
from evalstop_gym.policy import drive  # noqa: E402
from evalstop_gym.simulator import Simulator  # noqa: E402
from evalstop_gym.workload import workload_from_jobs  # noqa: E402

PEER_LIMITS_S = (3250, 7200)  # the peer's dlas thresholds (simulator/jobs.py), GPU-seconds
ROWS = (  # label, peer --schedule, package policy factory
    ("FIFO", "fjf", lambda: make_policy("fifo")),
    ("SRTF", "shortest", lambda: make_policy("srtf-est")),
    ("2D-LAS", "dlas-gpu", lambda: Tiresias(tuple(s / 3600 for s in PEER_LIMITS_S), None)),
    ("2D-LAS, peer's timer", "dlas-gpu",
     lambda: Tiresias(tuple(s / 3600 for s in PEER_LIMITS_S), None, demotion_timer="reference")),
)


def export_peer(peer: str, into: str) -> str:
    """Copy the peer's ``simulator`` folder into ``into``; return its path and the peer's commit."""
    git_dir = peer if os.path.exists(os.path.join(peer, "HEAD")) else os.path.join(peer, ".git")
    commit = subprocess.run(["git", "--git-dir", git_dir, "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "unknown"
    if os.path.exists(os.path.join(peer, "simulator", "run_sim.py")):
        shutil.copytree(os.path.join(peer, "simulator"), os.path.join(into, "simulator"))
    else:
        archive = subprocess.run(["git", "--git-dir", git_dir, "archive", "HEAD", "simulator"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "x", "-C", into], input=archive, check=True)
    return os.path.join(into, "simulator"), commit


def write_inputs(jobs, gpus: int, folder: str) -> tuple[str, str]:
    trace, spec = os.path.join(folder, "philly.csv"), os.path.join(folder, "cluster.csv")
    with open(trace, "w") as f:
        f.write("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n")
        for i, (s, d, g) in enumerate(jobs):
            f.write(f"{i},{g},{s},1,vgg19,{d},0\n")
    with open(spec, "w") as f:
        f.write(f"num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n1,{gpus},1,64,256\n")
    return trace, spec


def run_peer(python: str, sim_dir: str, trace: str, spec: str, schedule: str, out: str):
    """Run the peer once; return (finish second per job, preemptions, CPU seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([python, "run_sim.py", f"--cluster_spec={spec}", "--scheme=count", f"--trace_file={trace}",
                    f"--schedule={schedule}", f"--log_path={out}"], cwd=sim_dir, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    finish, preempt = {}, 0
    with open(os.path.join(out, "job.csv")) as f:
        for row in csv.DictReader(f):
            finish[int(row["job_id"])] = int(row["end_time"])
            preempt += int(row.get("preempt") or 0)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return [finish[j] for j in range(len(finish))], preempt, cpu


def run_package(jobs, gpus: int, make):
    w = workload_from_jobs([{"submit_h": s / 3600, "length_h": d / 3600, "gpus": g} for s, d, g in jobs],
                           gpus, evals_per_job=1)
    t = time.process_time()
    out = drive(Simulator(w), make())
    return (out.finish_ticks / 1000).tolist(), out.preemptions, time.process_time() - t


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--peer", required=True, help="a Tiresias checkout (work tree or git directory)")
    p.add_argument("--python", default="python2.7", help="the peer's interpreter (Python 2.7 with numpy)")
    p.add_argument("--sizes", default="1000,10000")
    p.add_argument("--gpus", type=int, default=349)
    p.add_argument("--peer-schedules", default="fjf,shortest,dlas-gpu",
                   help="the rows to run, by the peer's --schedule (default all: %(default)s)")
    a = p.parse_args(argv)
    chosen = a.peer_schedules.split(",")
    if not os.path.exists(PHILLY):
        sys.exit(f"no trace at {PHILLY}")
    folder = tempfile.mkdtemp(prefix="evalstop-parity-")  # the peer's code never enters the repository
    try:
        sim_dir, commit = export_peer(os.path.abspath(a.peer), folder)
        print(f"peer: SymbioticLab/Tiresias at {commit}; {a.gpus} GPUs, one pool")
        print("| policy | jobs | peer avg JCT h | package avg JCT h | difference | same finish | "
              "preemptions peer / package | CPU s peer | CPU s package | peer / package |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for n in map(int, a.sizes.split(",")):
            jobs = philly_jobs(n)
            trace, spec = write_inputs(jobs, a.gpus, folder)
            peer_runs = {}
            for label, schedule, make in (r for r in ROWS if r[1] in chosen):
                if schedule not in peer_runs:
                    peer_runs[schedule] = run_peer(a.python, sim_dir, trace, spec, schedule,
                                                   os.path.join(folder, f"out-{schedule}-{n}"))
                ref, ref_pre, ref_cpu = peer_runs[schedule]
                fin, pre, cpu = run_package(jobs, a.gpus, make)
                jct = lambda f: sum(x - s for x, (s, _, _) in zip(f, jobs)) / n / 3600  # noqa: E731
                same = sum(1 for x, y in zip(fin, ref) if abs(x - y) < 1) / n
                print(f"| {label} | {n:,} | {jct(ref):.4f} | {jct(fin):.4f} | {jct(fin) / jct(ref) - 1:+.2e} | "
                      f"{same:.1%} | {ref_pre:,} / {pre:,} | {ref_cpu:.2f} | {cpu:.2f} | {ref_cpu / cpu:.0f}x |",
                      flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
