"""Several training runs of one stop-policy recipe; the one that detects best on validation seeds is kept.

A recipe whose project section sets ``run_seeds: N`` trains run seeds
``seed .. seed + N - 1``, each a whole ``evalstop-gym train`` run of its own in
``OUT/runs/seed-<s>/``, and then keeps one. Training outcomes of one recipe
differ with the run seed (network initialisation, sampling, training
workloads) by more than the margins its targets are judged on, so a recipe
that trains one run and stops is a draw; choosing among a few runs on
validation data is ordinary model selection and makes the recipe's output
depend less on one draw.

The choice, on validation workloads only (``select_seeds`` of them from
:data:`~evalstop_gym.agents.seeds.VALIDATION_FIRST`, the recipe's validation
workload, each run's stop-policy over the default base scheduler, as the
``targets`` protocol plays it on test seeds):

* every run's mean F1 (per episode ``2 TP / (2 TP + FP + FN)``,
  :func:`~evalstop_gym.metrics.f1_counts`) and mean compute waste;
* the best hand-coded detector on the same workloads
  (:func:`~evalstop_gym.agents.selection.best_detector`), the one a learned
  stop-policy is judged against;
* **eligible**: runs whose mean waste is at most the detector's; **kept**:
  the eligible run with the highest mean F1 (ties: less waste, then the lower
  seed); with none eligible, the run with the least waste.

``OUT/model.zip`` and ``OUT/config.json`` are then the kept run's, the config
with a ``run_selection`` entry holding every run's validation figures, the
detector's and the rule; ``cpu_seconds`` and ``wall_seconds`` there are the
whole recipe's (every run's training and the selection). An interrupted
recipe resumes: a run folder whose ``config.json`` records the same settings
(hyperparameters, world, seed, steps, env workers, wrappers) is reused, not
retrained; one of other settings is refused (``force`` retrains every run).
The selection's own keys (``run_seeds``, ``select_seeds``) are not settings
of a run. A recipe is finished once ``OUT/config.json`` is written; to
choose again without retraining (say on more validation seeds, or with more
runs), remove that file and run it again.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from evalstop_gym.api import DEFAULT_SCHEDULER
from evalstop_gym.config import ConfigError, WorkloadConfig
from evalstop_gym.metrics import f1_counts

from .combined import learned_metrics
from .policy import LearnedPolicy
from .saved import CONFIG_FILE, FINAL_FILE, MODEL_FILE, write_config
from .seeds import VALIDATION_FIRST
from .selection import best_detector

RUNS_DIR = "runs"
SELECTION_DIR = "selection"      # the hand-coded detectors' validation runs (resumable sweep)
RULE = ("eligible: mean validation compute waste <= the best hand-coded detector's on the same validation "
        "workloads; kept: the eligible run with the highest mean validation F1 (ties: less waste, then the lower "
        "seed); none eligible: the run with the least waste")


def eligible(row: Mapping[str, Any], max_waste: float) -> bool:
    """Whether a run's mean validation waste is within ``max_waste`` (the best detector's)."""
    return row["compute_waste_gpu_h"] <= max_waste


def choose(rows: Sequence[Mapping[str, Any]], max_waste: float) -> int:
    """Index of the kept run among ``rows`` (each with ``seed``, ``f1`` (None: undefined on every seed) and
    ``compute_waste_gpu_h``), by :data:`RULE`."""
    if not rows:
        raise ValueError("no runs to choose from")
    ok = [i for i, r in enumerate(rows) if eligible(r, max_waste)]
    if not ok:
        return min(range(len(rows)), key=lambda i: (rows[i]["compute_waste_gpu_h"], rows[i]["seed"]))
    return min(ok, key=lambda i: (-(rows[i]["f1"] if rows[i]["f1"] is not None else -1.0),
                                  rows[i]["compute_waste_gpu_h"], rows[i]["seed"]))


def validation_row(model_dir: Path, base: WorkloadConfig, seeds: Sequence[int], scheduler: str) -> dict[str, Any]:
    """Mean F1 (:func:`~evalstop_gym.metrics.f1_counts`, undefined episodes dropped as the detectors'
    rows drop them), precision, recall and compute waste of a saved stop-policy over ``scheduler``."""
    from evalstop_gym.experiments.stats import summarize
    from evalstop_gym.workload import generate


    pol = LearnedPolicy.load(model_dir)   # from disk: a run retrained in this process is never a cached copy
    runs = [learned_metrics(pol, generate(base.replace(seed=s)), scheduler) for s in seeds]
    row = {"f1": summarize([f1_counts(m) for m in runs]).mean}
    for key in ("precision", "recall", "compute_waste_gpu_h", "avg_jct_h"):
        row[key] = summarize([m[key] for m in runs]).mean
    return row


def _f1(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.4f}"


def _finished(run_dir: Path, settings: Mapping[str, Any]) -> dict[str, Any] | None:
    """The config of a finished run in ``run_dir`` whose recorded settings (:func:`~evalstop_gym.agents.train.
    run_settings`) are ``settings``, else None; a finished run of other settings is a :class:`ConfigError`:
    it is never silently reused or overwritten."""
    cfg_path = run_dir / CONFIG_FILE   # written last: a run without it did not finish
    if not all(f.is_file() for f in (cfg_path, run_dir / MODEL_FILE, run_dir / FINAL_FILE)):
        return None
    try:
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    except ValueError:
        return None   # cut off while written: train it again
    want = json.loads(json.dumps(settings))   # as JSON gives it back (tuples as lists)
    other = [k for k, v in want.items() if not isinstance(cfg, dict) or cfg.get(k) != v]
    if other:
        raise ConfigError("out", str(run_dir), f"holds a run of other settings ({', '.join(other)}); pass --force "
                          "to retrain it, or choose another folder")
    return cfg


def train_and_select(recipe, train_one: Callable[[Path, int], dict[str, Any]], outdir: Path, first_seed: int,
                     settings_of: Callable[[int], dict[str, Any]], eval_workload: Mapping[str, Any], *,
                     force: bool = False, echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Train ``recipe.run_seeds`` runs with ``train_one(run_dir, seed)`` (``settings_of(seed)``: what a finished
    run of them records), keep one by :data:`RULE`; returns the config written to ``outdir``."""
    seeds = list(range(first_seed, first_seed + recipe.run_seeds))
    (outdir / CONFIG_FILE).unlink(missing_ok=True)   # a recipe cut off from here on resumes without --force
    runs = []
    for s in seeds:
        run_dir = outdir / RUNS_DIR / f"seed-{s}"
        cfg = None if force else _finished(run_dir, settings_of(s))
        if cfg is None:
            echo(f"run seed {s} ({seeds.index(s) + 1} of {len(seeds)})")
            cfg = train_one(run_dir, s)
        else:
            echo(f"run seed {s}: reusing the finished run in {run_dir}")
        runs.append((s, run_dir, cfg))

    t0, cpu0 = time.time(), time.process_time()
    base = WorkloadConfig(**eval_workload)
    val_seeds = list(range(VALIDATION_FIRST, VALIDATION_FIRST + recipe.select_seeds))
    det = best_detector(base, seeds=recipe.select_seeds, out=outdir / SELECTION_DIR)
    rows = [{"seed": s, "dir": str(Path(RUNS_DIR) / run_dir.name), "cpu_seconds": cfg["cpu_seconds"],
             **validation_row(run_dir, base, val_seeds, DEFAULT_SCHEDULER)} for s, run_dir, cfg in runs]
    kept = choose(rows, det["compute_waste_gpu_h"])
    for i, r in enumerate(rows):
        r["eligible"], r["kept"] = eligible(r, det["compute_waste_gpu_h"]), i == kept
    select_cpu, select_wall = time.process_time() - cpu0, time.time() - t0

    s, run_dir, cfg = runs[kept]
    for name in (MODEL_FILE, FINAL_FILE):
        shutil.copyfile(run_dir / name, outdir / name)
    config = {**cfg, "cpu_seconds": round(sum(r["cpu_seconds"] for r in rows) + select_cpu, 1),
              "wall_seconds": round(sum(c["wall_seconds"] for _, _, c in runs) + select_wall, 1),
              "run_selection": {
                  "rule": RULE, "scheduler": DEFAULT_SCHEDULER, "validation_seeds": val_seeds,
                  "detector": {"arm": det["arm"], "f1": det["f1"], "compute_waste_gpu_h": det["compute_waste_gpu_h"]},
                  "runs": rows, "kept_seed": s, "selection_cpu_seconds": round(select_cpu, 1)}}
    write_config(outdir, config)
    echo("\n".join([f"validation ({len(val_seeds)} workloads, over {DEFAULT_SCHEDULER}); {det['arm']}: F1 "
                    f"{_f1(det['f1'])}, waste {det['compute_waste_gpu_h']:.0f} GPU-h"]
                   + [f"  run seed {r['seed']}: F1 {_f1(r['f1'])}, waste {r['compute_waste_gpu_h']:.0f} GPU-h"
                      f"{'' if r['eligible'] else ' (more waste: not eligible)'}{'  <- kept' if r['kept'] else ''}"
                      for r in rows]
                   + [f"kept run seed {s}: wrote {outdir / MODEL_FILE} and {outdir / CONFIG_FILE} "
                      f"({config['cpu_seconds'] / 60:.1f} CPU minutes in all)"]))
    return config
