"""Where ``evalstop-gym reproduce`` spends its CPU, in parts, without a profiler's overhead.

cProfile multiplies the cost of every Python call (about 5x on ``reproduce --seeds 3``), so the parts that
make many small calls (statistics, configuration checks, Matplotlib's text layout) read far heavier under it
than they are. This script instead times a few functions by ``time.process_time`` around each call, which
costs one clock read a call:

* **start and imports**: the interpreter's start, then the package, NumPy, SciPy's statistics, Matplotlib and numba, imported up front (a real run
  imports them lazily, inside the parts below; here they are charged to this line instead);
* **kernel load**: :func:`evalstop_gym.compiled.preload` (the numba machine code from its cache);
* per run: **workload** (:func:`~evalstop_gym.workload.generate`), **policy** (``make_policy``),
  **simulation** (:func:`~evalstop_gym.compiled.run_episode`: the compiled episode, or the Python one),
  **metrics** (``compute_metrics`` and ``job_results``), **record** (the run's JSON line and its read-back,
  :func:`~evalstop_gym.experiments.runner.serialize`), **store** (appending it to ``runs.jsonl``);
* **run ids and pending runs**: ``RunSpec.of`` plus hashing, and ``pending_specs``;
* per experiment: **aggregate** (per-seed rows into means, standard deviations and paired gains:
  ``tables.aggregate``), **tables** (Markdown, CSV, console text), **plot** (``plot_experiment``), and
  the **runs table** (``export_parquet``);
* **other**: the rest of the process (argument parsing, the folder's lock and manifest, summary.md, ...).

Each part's CPU seconds and share of the whole process (``resource.getrusage``, this process only:
run with ``--workers 1``) are printed, largest first. Any ``reproduce`` arguments may be given; ``--out``
defaults to a temporary folder.

    python benchmarks/profile_reproduce.py [--seeds 3] [--experiments all] [...]
"""

from __future__ import annotations

import functools
import os
import resource
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # this checkout's code

# (part, module, function): every module that imported the function by name is patched too
TIMED = (
    ("workload", "evalstop_gym.workload", "generate"),
    ("policy", "evalstop_gym.baselines", "make_policy"),
    ("simulation", "evalstop_gym.compiled", "run_episode"),
    ("metrics", "evalstop_gym.metrics", "compute_metrics"),
    ("metrics", "evalstop_gym.metrics", "job_results"),
    ("record", "evalstop_gym.experiments.runner", "serialize"),
    ("store", "evalstop_gym.experiments.runner", "ResultStore.append"),
    ("run ids and pending runs", "evalstop_gym.experiments.runner", "RunSpec.of"),
    ("run ids and pending runs", "evalstop_gym.experiments.runner", "pending_specs"),
    ("aggregate", "evalstop_gym.experiments.tables", "aggregate"),
    ("tables", "evalstop_gym.experiments.tables", "claim_verdicts"),
    ("tables", "evalstop_gym.experiments.suite", "experiment_markdown"),
    ("tables", "evalstop_gym.experiments.tables", "csv_table"),
    ("tables", "evalstop_gym.experiments.tables", "console_text"),
    ("plot", "evalstop_gym.experiments.plots", "plot_experiment"),
    ("runs table", "evalstop_gym.experiments.runs_table", "export_parquet"),
)


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class Clock:
    """CPU seconds per part; a part entered inside another (a run id inside aggregate) is charged to the
    inner part only, so the parts add up without counting any second twice."""

    def __init__(self):
        self.spent: dict[str, float] = {}
        self.stack: list[list] = []   # [part, start, CPU of parts nested inside]

    def timed(self, part: str, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            self.stack.append([part, time.process_time(), 0.0])
            try:
                return fn(*args, **kwargs)
            finally:
                name, start, inner = self.stack.pop()
                took = time.process_time() - start
                self.spent[name] = self.spent.get(name, 0.0) + took - inner
                if self.stack:
                    self.stack[-1][2] += took
        return wrapper


def patch(clock: Clock) -> None:
    """Wrap every function of :data:`TIMED`, wherever the package's modules hold it."""
    import importlib

    for part, module, name in TIMED:
        owner = importlib.import_module(module)
        if "." in name:   # a method: wrap it on its class
            cls_name, meth = name.split(".")
            cls = getattr(owner, cls_name)
            raw = cls.__dict__[meth]
            fn = raw.__func__ if isinstance(raw, classmethod) else raw
            wrapped = clock.timed(part, fn)
            setattr(cls, meth, classmethod(wrapped) if isinstance(raw, classmethod) else wrapped)
            continue
        original = getattr(owner, name)
        wrapped = clock.timed(part, original)
        for mod in list(sys.modules.values()):
            if getattr(mod, "__name__", "").startswith("evalstop_gym") and getattr(mod, name, None) is original:
                setattr(mod, name, wrapped)


def main(argv: list[str]) -> None:
    import matplotlib.figure  # noqa: F401
    import numba  # noqa: F401
    import numpy  # noqa: F401
    import scipy.stats  # noqa: F401

    import evalstop_gym.cli as cli
    import evalstop_gym.experiments.plots  # noqa: F401
    import evalstop_gym.experiments.suite  # noqa: F401
    from evalstop_gym import compiled

    imports = cpu()   # since the process started: the interpreter's start too
    t = cpu()
    compiled.preload()
    kernel = cpu() - t
    clock = Clock()
    patch(clock)
    with tempfile.TemporaryDirectory() as tmp:
        args = ["reproduce", *argv, "--quiet"]
        if "--out" not in argv:
            args += ["--out", tmp]
        if "--workers" not in argv:
            args += ["--workers", "1"]
        stdout, sys.stdout = sys.stdout, open(os.devnull, "w")
        try:
            code = cli.main(args)
        finally:
            sys.stdout.close()
            sys.stdout = stdout
    if code not in (0, 1):   # 1: a claim differs (with --strict); anything else is a failure
        sys.exit(f"profile_reproduce.py: `evalstop-gym {' '.join(args)}` exited {code}")
    total = cpu()
    parts = {"start and imports": imports, "kernel load": kernel, **clock.spent}
    parts["other"] = total - sum(parts.values())
    print(f"`evalstop-gym {' '.join(['reproduce', *argv])}`: {total:.2f} CPU s "
          f"(this process; load average {os.getloadavg()[0]:.1f})")
    for name, s in sorted(parts.items(), key=lambda kv: -kv[1]):
        print(f"  {name:26s} {s:7.2f} s  {100 * s / total:5.1f}%")


if __name__ == "__main__":
    main(sys.argv[1:])
