"""A curve library: generator runs over a grid of knobs, written run by run so that a rerun resumes.

Layout of ``out_dir``:

* ``runs/<name>.csv`` (or ``.jsonl``): one run's curve-log rows, written when the run ends;
  ``runs/<name>.json``: its backend, settings, wall time and CPU time (seconds
  of the worker process), written after the CSV, so its presence marks a
  finished run. A rerun skips every run whose JSON holds the same settings.
* TRL backend only: ``runs/<name>.trainer_state.json``, the Trainer's own
  state with its ``log_history``; ``models/``, the SFT model folders runs share,
  each built once before the runs (its ``sft.json`` records the CPU seconds it
  took), so a run's CPU seconds never include an SFT.
* ``curves.csv`` (or ``.jsonl``): every run's rows in settings order, rewritten
  at the end; ``runs.json``: the index (settings of every run, wall time).
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import csv
import dataclasses
import json
import multiprocessing
import os
import time

from ..config import ConfigError, check_range
from ..files import load_json, write_atomic
from ..processes import cap_workers, init_worker
from .rlhf import RunSettings, run

BACKENDS = ("torch", "trl")   # torch: the plain-torch loop of .rlhf (fast); trl: TRL's trainers (.trl_backend)

# One grid point per method and knob setting. Few pairs with no KL (RLHF) or a small beta (DPO) and the
# larger learning rate over-optimise; many pairs with a KL penalty mostly do not.
RLHF_GRID: tuple[dict, ...] = tuple(
    {"method": "rlhf", "pairs": pairs, "kl_coef": kl, "lr": lr, "rm_dim": rm_dim}
    for pairs in (32, 512) for kl in (0.0, 0.1) for lr in (1e-3, 3e-3) for rm_dim in (16, 64))
DPO_GRID: tuple[dict, ...] = tuple(
    {"method": "dpo", "pairs": pairs, "kl_coef": beta, "lr": lr}
    for pairs in (32, 512) for beta in (0.1, 0.3) for lr in (1e-3, 3e-3))
DEFAULT_GRID: tuple[dict, ...] = RLHF_GRID + DPO_GRID
MAX_RUNS = 100_000   # runs of one library (a run takes seconds to minutes of CPU)


def backend(name: str):
    """``(settings class, default grid)`` of a backend (:data:`BACKENDS`); ``trl`` needs the ``live`` extra."""
    if name == "torch":
        return RunSettings, DEFAULT_GRID
    if name == "trl":
        from .trl_backend import TRL_GRID, TRLRunSettings

        return TRLRunSettings, TRL_GRID
    raise ConfigError("backend", name, f"must be one of {', '.join(BACKENDS)}")


def library_settings(runs: int, seed: int = 0, grid=None, backend_name: str = "torch", **overrides) -> list:
    """Settings of ``runs`` runs: run ``i`` takes grid point ``i % len(grid)`` and seed ``seed + i // len(grid)``
    (``grid`` defaults to the backend's)."""
    cls, default = backend(backend_name)
    grid = default if grid is None else grid
    return [cls(seed=seed + i // len(grid), **{**grid[i % len(grid)], **overrides}) for i in range(runs)]


def _execute(settings, runs_dir: str) -> list[dict]:
    """One run's curve-log rows, by the backend its settings belong to."""
    if type(settings) is RunSettings:   # the TRL backend's settings subclass it
        return run(settings)
    from .trl_backend import run as run_trl

    return run_trl(settings, os.path.dirname(runs_dir),
                   state_path=os.path.join(runs_dir, settings.name + ".trainer_state.json"))


def _run_one(settings, runs_dir: str, fmt: str) -> str:
    """Run one setting and write its files; returns its name."""
    from ..curvelog import write_curve_log

    t0, c0 = time.perf_counter(), time.process_time()
    rows = _execute(settings, runs_dir)
    name = settings.name
    write_curve_log(os.path.join(runs_dir, f"{name}.{fmt}"), rows)
    meta = {"name": name, "backend": "torch" if type(settings) is RunSettings else "trl",
            **dataclasses.asdict(settings), "wall_s": round(time.perf_counter() - t0, 2),
            "cpu_s": round(time.process_time() - c0, 2)}
    write_atomic(os.path.join(runs_dir, name + ".json"), json.dumps(meta, indent=1))
    return name


def _sft_to_build(todo: list, out_dir) -> list:
    """One TRL run's settings per SFT model the runs in ``todo`` need and ``out_dir/models`` lacks (the
    plain-torch backend caches its SFT models per process: none)."""
    from .rlhf import RunSettings

    trl = [s for s in todo if type(s) is not RunSettings]
    if not trl:
        return []
    from .trl_backend import sft_path

    models = os.path.join(out_dir, "models")
    by_path = {sft_path(s, models): s for s in trl}
    return [s for path, s in by_path.items() if not os.path.isdir(path)]


def _build_sft(settings, out_dir) -> str:
    from .trl_backend import sft_folder

    return sft_folder(settings, os.path.join(out_dir, "models"))


def is_finished(settings, runs_dir: str, fmt: str = "csv") -> bool:
    """Whether ``runs_dir`` holds a finished run of ``settings`` (its JSON, with the same settings, and its log)."""
    try:
        meta = load_json(os.path.join(runs_dir, settings.name + ".json"))   # bounded; a FIFO never blocks
    except ConfigError:
        return False   # absent, cut or not a run's record: run it again
    return isinstance(meta, dict) and all(meta.get(k) == v for k, v in dataclasses.asdict(settings).items()) and os.path.exists(
        os.path.join(runs_dir, f"{settings.name}.{fmt}"))


def _records(path: str, fmt: str) -> list[dict]:
    """The rows of one run's file as written (CSV values stay text, so rewriting them keeps every byte)."""
    with open(path, newline="") as f:
        if fmt == "csv":
            return list(csv.DictReader(f))
        return [json.loads(line) for line in f if line.strip()]


def generate_library(out_dir, runs: int = 48, *, seed: int = 0, workers: int = 1, fmt: str = "csv",
                     grid=None, backend_name: str = "torch", progress=None, **overrides) -> dict:
    """Run the generator ``runs`` times into ``out_dir`` (module docstring), skipping finished runs.

    ``backend_name`` is one of :data:`BACKENDS`; ``grid`` defaults to its grid.
    ``overrides`` are settings fields applied to every run (e.g.
    ``steps``). ``progress``, if given, is called with ``(done, total)`` as runs
    finish (skipped ones count as done at once). Returns the index written to
    ``runs.json``: the settings, how many runs were skipped, the wall time (s)
    and the workers used (``workers`` capped by the runs to do and the CPUs).
    Every file is written all or nothing; a full disk is a one-line
    :class:`~evalstop_gym.config.ConfigError` and a rerun resumes.
    """
    from ..curvelog import write_curve_log

    check_range("runs", runs, 1, MAX_RUNS, integer=True)   # before the list of settings is built
    settings = library_settings(runs, seed, grid, backend_name, **overrides)
    for s in settings:
        s.validate()
    names = [s.name for s in settings]
    if len(set(names)) != len(names):
        raise ConfigError("runs", runs, "at most one run per seed and grid point: the grid has points with "
                                        "the same name")
    runs_dir = os.path.join(out_dir, "runs")
    os.makedirs(runs_dir, exist_ok=True)
    t0 = time.perf_counter()
    todo = [s for s in settings if not is_finished(s, runs_dir, fmt)]
    done = len(settings) - len(todo)
    if progress:
        progress(done, len(settings))
    workers = cap_workers(workers, max(len(todo), 1))   # no more than runs and CPUs
    sft_todo = _sft_to_build(todo, out_dir)
    with contextlib.ExitStack() as stack:
        if workers <= 1:
            def each(fn, items):
                return (fn(*args) for args in items)
        else:
            ctx = multiprocessing.get_context("spawn")  # torch and fork do not mix well
            pool = stack.enter_context(cf.ProcessPoolExecutor(
                max_workers=workers, mp_context=ctx, initializer=init_worker,
                initargs=(os.getpid(),)))   # workers end with this process

            def each(fn, items):
                return (f.result() for f in cf.as_completed([pool.submit(fn, *args) for args in items]))
        for _ in each(_build_sft, [(s, out_dir) for s in sft_todo]):
            pass
        for _ in each(_run_one, [(s, runs_dir, fmt) for s in todo]):
            done += 1
            if progress:
                progress(done, len(settings))
    rows = [r for name in names for r in _records(os.path.join(runs_dir, f"{name}.{fmt}"), fmt)]
    path = os.path.join(out_dir, f"curves.{fmt}")
    write_curve_log(path, rows)
    index = {"curve_log": os.path.basename(path), "backend": backend_name,
             "wall_s": round(time.perf_counter() - t0, 2), "workers": workers, "skipped": len(settings) - len(todo),
             "runs": [{"name": s.name, **dataclasses.asdict(s)} for s in settings]}
    write_atomic(os.path.join(out_dir, "runs.json"), json.dumps(index, indent=1, allow_nan=False))
    return index
