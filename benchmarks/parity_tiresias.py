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

The peer is run as two builds, both in the same run: the original under Python
2.7 (``--python``, with numpy) and a Python 3 port of it (``--port-python``,
default this interpreter): the original's code converted by ``lib2to3`` (which
that interpreter must have: Python 3.12 or older), plus the one change the
conversion misses, Python 2's integer ``/`` in the 2D-LAS demotion timer
written as ``//`` (without it the port's timer, and so its 2D-LAS finishes,
differ from the original's). The first table gives each build's average JCT
beside the package's and says whether the two builds finished every job at the
same second.

The package plays each job with ``--evals`` eval checkpoints (default 1, 10: a
checkpoint is an event the simulator processes, so the count changes its CPU
time, never a finish time; a trace replay gives 10). The speed table gives CPU
seconds of each: the peer's whole process (through ``RUSAGE_CHILDREN``:
interpreter start, imports, trace parsing, the simulation, its logs) and its
``main()`` alone (the simulation with its parsing and logs, timed inside the
process), and the package's ``drive`` (the simulation only), with the ratios
of each peer figure to the package's at each checkpoint count.

    python benchmarks/parity_tiresias.py --peer PATH/TO/Tiresias [--python python2.7] [--port-python python3]
        [--sizes 1000,10000] [--gpus 349] [--peer-schedules fjf,shortest,dlas-gpu] [--evals 1,10]

``--python none`` or ``--port-python none`` leaves that build out.
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


# Python 2's integer division in the peer's 2D-LAS demotion timer (run_sim.py: three schedulers and a
# commented-out copy), which lib2to3 leaves as "/": the port writes it "//", as Python 2 computes it on
# these integers
PORT_DIVISION = ("executed_time'])/rjob['num_gpu'])", "executed_time'])//rjob['num_gpu'])", 4)

# run inside the peer's folder by either interpreter: run_sim.main() timed in CPU seconds of the process
DRIVER = """import os, resource, sys
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
out = sys.argv[1]
sys.argv = ['run_sim.py'] + sys.argv[2:]
sys.path.insert(0, os.getcwd())
import run_sim
t = cpu()
run_sim.main()
f = open(out, 'w')
f.write(repr(cpu() - t))
f.close()
"""


def check_python(python: str, flag: str, modules: str) -> None:
    """Exit with one line if ``python`` cannot run or lacks ``modules`` (comma-separated)."""
    try:
        ok = subprocess.run([python, "-c", f"import {modules}"], capture_output=True).returncode == 0
    except OSError:
        ok = False
    if not ok:
        sys.exit(f"{flag} {python}: cannot run it with {modules.replace(',', ' and ')}; give an interpreter "
                 f"that has them, or {flag} none to leave this build out")


def make_port(python: str, sim_dir: str, into: str) -> str:
    """A Python 3 port of the peer's folder ``sim_dir`` in ``into``: lib2to3 run by ``python``, then
    :data:`PORT_DIVISION`; return its path."""
    port = os.path.join(into, "simulator-py3")
    shutil.copytree(sim_dir, port)
    subprocess.run([python, "-W", "ignore", "-m", "lib2to3", "-w", "-n", "--no-diffs", port], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    path = os.path.join(port, "run_sim.py")
    with open(path) as f:
        code = f.read()
    old, new, count = PORT_DIVISION
    if code.count(old) != count:
        sys.exit(f"the peer's run_sim.py has {code.count(old)} copies of the demotion timer written {old!r}, not {count}: "
                 "this port does not know this version of the peer")
    with open(path, "w") as f:
        f.write(code.replace(old, new))
    return port


def run_peer(python: str, sim_dir: str, trace: str, spec: str, schedule: str, out: str):
    """Run the peer once; return (finish second per job, preemptions, CPU s of the process, CPU s of main())."""
    os.makedirs(out, exist_ok=True)
    driver, timed = os.path.join(out, "driver.py"), os.path.join(out, "main_cpu_s")
    with open(driver, "w") as f:
        f.write(DRIVER)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([python, driver, timed, f"--cluster_spec={spec}", "--scheme=count", f"--trace_file={trace}",
                    f"--schedule={schedule}", f"--log_path={out}"], cwd=sim_dir, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    finish, preempt = {}, 0
    with open(os.path.join(out, "job.csv")) as f:
        for row in csv.DictReader(f):
            finish[int(row["job_id"])] = int(row["end_time"])
            preempt += int(row.get("preempt") or 0)
    with open(timed) as f:
        main_cpu = float(f.read())
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return [finish[j] for j in range(len(finish))], preempt, cpu, main_cpu


def run_package(jobs, gpus: int, make, evals: int):
    """The package on ``jobs`` with ``evals`` eval checkpoints per job: (finish second per job, preemptions,
    CPU s of the simulation)."""
    w = workload_from_jobs([{"submit_h": s / 3600, "length_h": d / 3600, "gpus": g} for s, d, g in jobs],
                           gpus, evals_per_job=evals)
    t = time.process_time()
    out = drive(Simulator(w), make())
    return (out.finish_ticks / 1000).tolist(), out.preemptions, time.process_time() - t


def counts(text: str, flag: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",")]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        sys.exit(f"{flag} {text}: comma-separated counts, each at least 1")
    return values


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--peer", required=True, help="a Tiresias checkout (work tree or git directory)")
    p.add_argument("--python", default="python2.7", help="the original's interpreter (Python 2.7 with numpy); none: skip")
    p.add_argument("--port-python", default=sys.executable,
                   help="the Python 3 port's interpreter (with numpy and lib2to3); none: skip (default: this one)")
    p.add_argument("--sizes", default="1000,10000")
    p.add_argument("--gpus", type=int, default=349)
    p.add_argument("--peer-schedules", default="fjf,shortest,dlas-gpu",
                   help="the rows to run, by the peer's --schedule (default all: %(default)s)")
    p.add_argument("--evals", default="1,10", help="the package's eval checkpoints per job (default %(default)s)")
    a = p.parse_args(argv)
    chosen = a.peer_schedules.split(",")
    unknown = sorted(set(chosen) - {r[1] for r in ROWS})
    if unknown:
        sys.exit(f"--peer-schedules {a.peer_schedules}: unknown {', '.join(unknown)}; known: fjf, shortest, dlas-gpu")
    sizes, evals = counts(a.sizes, "--sizes"), counts(a.evals, "--evals")
    builds = {}
    if a.python != "none":
        check_python(a.python, "--python", "numpy")
        builds["Python 2.7 original"] = a.python
    if a.port_python != "none":
        check_python(a.port_python, "--port-python", "numpy,lib2to3")
        builds["Python 3 port"] = a.port_python
    if not builds:
        sys.exit("--python none and --port-python none: no peer build left to run")
    if not os.path.exists(PHILLY):
        sys.exit(f"no trace at {PHILLY}")
    folder = tempfile.mkdtemp(prefix="evalstop-parity-")  # the peer's code never enters the repository
    try:
        sim_dir, commit = export_peer(os.path.abspath(a.peer), folder)
        dirs = {b: sim_dir if b.startswith("Python 2") else make_port(py, sim_dir, folder) for b, py in builds.items()}
        versions = {b: subprocess.run([py, "-c", "import sys, numpy; sys.stdout.write(sys.version.split()[0] + ' ' + numpy.__version__)"],
                                      capture_output=True, text=True).stdout.split() for b, py in builds.items()}
        print(f"peer: SymbioticLab/Tiresias at {commit}; {a.gpus} GPUs, one pool; builds: " +
              "; ".join(f"{b} (Python {v[0]}, numpy {v[1]})" for b, v in versions.items()) +
              f"; the package: Python {sys.version.split()[0]}, eval checkpoints per job {', '.join(map(str, evals))}")
        print(f"load average at the start: {', '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
        print("| policy | jobs | peer avg JCT h | package avg JCT h | difference | same finish | "
              "preemptions peer / package | builds finish alike |")
        print("|---|---|---|---|---|---|---|---|")
        parity, speed = [], []
        for n in sizes:
            jobs = philly_jobs(n)
            trace, spec = write_inputs(jobs, a.gpus, folder)
            jct = lambda f: sum(x - s for x, (s, _, _) in zip(f, jobs)) / n / 3600  # noqa: E731
            peer_runs = {}
            for label, schedule, make in (r for r in ROWS if r[1] in chosen):
                if schedule not in peer_runs:
                    peer_runs[schedule] = {b: run_peer(py, dirs[b], trace, spec, schedule,
                                                       os.path.join(folder, f"out-{schedule}-{n}-{i}"))
                                           for i, (b, py) in enumerate(builds.items())}
                runs = peer_runs[schedule]
                mine = {e: run_package(jobs, a.gpus, make, e) for e in evals}
                fin, pre, _ = mine[evals[0]]
                if any(m[0] != fin for m in mine.values()):
                    sys.exit(f"{label}, {n} jobs: the package's finish times depend on the eval checkpoint count")
                ref_b = next(iter(runs))
                ref, ref_pre, _, _ = runs[ref_b]
                same_builds = "yes" if all(r[0] == ref for r in runs.values()) else "NO"
                same = sum(1 for x, y in zip(fin, ref) if abs(x - y) < 1) / n
                parity.append(f"| {label} | {n:,} | {jct(ref):.4f} | {jct(fin):.4f} | {jct(fin) / jct(ref) - 1:+.2e} | "
                              f"{same:.1%} | {ref_pre:,} / {pre:,} | {same_builds} |")
                for b, (_, _, proc, main_s) in runs.items():
                    speed.append(f"| {label} | {n:,} | {b} | {proc:.2f} | {main_s:.2f} | " +
                                 " | ".join(f"{mine[e][2]:.2f}" for e in evals) + " | " +
                                 " | ".join(f"{proc / mine[e][2]:.0f}x / {main_s / mine[e][2]:.0f}x" for e in evals) + " |")
                print(parity[-1], flush=True)
        print(f"\n(peer: {next(iter(builds))}; the last column: every finish second the same in "
              f"{' and '.join(builds)})\n")
        print("| policy | jobs | peer build | peer CPU s, process | peer CPU s, main() | " +
              " | ".join(f"package CPU s, {e} eval{'s' if e > 1 else ''}" for e in evals) + " | " +
              " | ".join(f"peer / package at {e}: process / main()" for e in evals) + " |")
        print("|---|---|---|---:|---:|" + "---:|" * (2 * len(evals)))
        print("\n".join(speed))
        print(f"\nload average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
