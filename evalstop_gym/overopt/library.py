"""A curve library: many generator runs over a grid of settings, written as one curve log."""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import json
import multiprocessing
import os
import time

from .bandit import RunSettings, run

# (preference pairs, KL coefficient): few pairs and no KL overoptimize, many pairs or KL=1 do not
DEFAULT_GRID: tuple[tuple[int, float], ...] = tuple(
    (pairs, kl) for pairs in (16, 64, 256, 1024) for kl in (0.0, 0.3, 1.0))


def library_settings(runs: int, seed: int = 0, grid=DEFAULT_GRID, **overrides) -> list[RunSettings]:
    """Settings of ``runs`` runs: run ``i`` takes grid point ``i % len(grid)`` and seed ``seed + i // len(grid)``."""
    out = []
    for i in range(runs):
        pairs, kl = grid[i % len(grid)]
        out.append(RunSettings(seed=seed + i // len(grid), pairs=pairs, kl_coef=kl, **overrides))
    return out


def _run_one(settings: RunSettings) -> list[dict]:
    import torch

    torch.set_num_threads(1)  # one run per process; the pool gives the parallelism
    return run(settings)


def generate_library(out_dir, runs: int = 48, *, seed: int = 0, workers: int = 1, fmt: str = "csv",
                     grid=DEFAULT_GRID, progress=None, **overrides) -> dict:
    """Run the generator ``runs`` times and write ``out_dir/curves.<fmt>`` and ``out_dir/runs.json``.

    ``overrides`` are :class:`RunSettings` fields applied to every run (e.g.
    ``steps``). ``progress``, if given, is called with ``(done, total)``.
    Returns the index written to ``runs.json``: the settings and wall time.
    """
    from ..curvelog import write_curve_log

    settings = library_settings(runs, seed, grid, **overrides)
    for s in settings:
        s.validate()
    os.makedirs(out_dir, exist_ok=True)
    t0 = time.perf_counter()
    results: list[list[dict] | None] = [None] * len(settings)
    if workers <= 1:
        for i, s in enumerate(settings):
            results[i] = _run_one(s)
            if progress:
                progress(i + 1, len(settings))
    else:
        ctx = multiprocessing.get_context("spawn")  # torch and fork do not mix well
        with cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            futures = {pool.submit(_run_one, s): i for i, s in enumerate(settings)}
            for done, f in enumerate(cf.as_completed(futures), start=1):
                results[futures[f]] = f.result()
                if progress:
                    progress(done, len(settings))
    rows = [r for rs in results for r in rs]
    path = os.path.join(out_dir, f"curves.{fmt}")
    write_curve_log(path, rows)
    index = {"curve_log": os.path.basename(path), "wall_s": time.perf_counter() - t0, "workers": workers,
             "runs": [{"name": s.name, **dataclasses.asdict(s)} for s in settings]}
    with open(os.path.join(out_dir, "runs.json"), "w") as f:
        json.dump(index, f, indent=1, allow_nan=False)
    return index
