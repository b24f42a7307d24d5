"""The hand-coded policies a learned one is judged against, chosen on validation seeds only.

    >>> from evalstop_gym.agents.selection import select
    >>> sel = select(WorkloadConfig(calibration="realistic"), out="results/targets")
    >>> sel.best_pair["arm"], sel.best_detector["arm"]

Every registered base scheduler with every registered stopper (``none``
included, each at its default parameters) plays the same validation workloads
(seeds ``VALIDATION_FIRST ..``, :mod:`evalstop_gym.agents.seeds`; test seeds
are refused). Two winners:

* the **best pair**: the lowest average JCT, mean over the seeds (ties: fewer
  preemptions, then registry order);
* the **best detector**: among the stoppers over the default base scheduler
  (``srtf-est``), the highest F1, mean over the seeds (ties: less compute waste).

F1 here is ``2 TP / (2 TP + FP + FN)`` per episode, the metrics' F1 wherever
that is defined and 0 where a stopper stops no hacking run (the metrics leave
it undefined there, which would drop exactly the seeds a detector fails on).

Runs are a sweep of the experiment runner: appended to ``<out>/runs.jsonl``
as they finish and reused by run id on the next call, so an interrupted
selection resumes and a finished one costs nothing to repeat.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from evalstop_gym.api import DEFAULT_SCHEDULER
from evalstop_gym.config import ConfigError, WorkloadConfig, check_range

from .seeds import VALIDATION_FIRST, check_validation_seeds

RUNS_FILE = "runs.jsonl"
PAIR_COLUMNS = ("avg_jct_h", "preemptions", "f1", "compute_waste_gpu_h", "delivered_quality_regret")
DETECTOR_COLUMNS = ("f1", "precision", "recall", "compute_waste_gpu_h", "avg_jct_h")


def f1_counts(metrics: Mapping[str, Any]) -> float | None:
    """F1 of one episode from its counts: ``2 TP / (2 TP + FP + FN)``; ``None`` with no hacking run and no stop."""
    tp, fp, fn = metrics["true_positives"], metrics["false_positives"], metrics["false_negatives"]
    den = 2 * tp + fp + fn
    return 2 * tp / den if den else None


@dataclass
class Selection:
    """The outcome of :func:`select`: every candidate's row, and the two winners."""

    base: WorkloadConfig
    seeds: list[int]
    pairs: list[dict[str, Any]]        # scheduler x stopper rows, best (lowest avg JCT) first
    detectors: list[dict[str, Any]]    # stoppers over ``scheduler``, best (highest F1) first
    scheduler: str                     # the base scheduler of the detectors
    pair_table: str                    # Markdown
    detector_table: str

    @property
    def best_pair(self) -> dict[str, Any]:
        return self.pairs[0]

    @property
    def best_detector(self) -> dict[str, Any]:
        return self.detectors[0]

    def markdown(self) -> str:
        from evalstop_gym.agents.evaluate import base_text

        p, d = self.best_pair, self.best_detector
        return "\n".join([
            "## Hand-coded policies chosen on validation seeds", "",
            f"{base_text(self.base)}; validation seeds {self.seeds[0]}-{self.seeds[-1]} (n = {len(self.seeds)}); "
            "cells: mean ± std over seeds.", "",
            f"Best scheduler x stopper pair (lowest average JCT): **{p['arm']}**, {p['avg_jct_h']:.3f} h, "
            f"{p['preemptions']:.1f} preemptions per episode.",
            f"Best detector over {self.scheduler} (highest F1): **{d['arm']}**, F1 {d['f1']:.3f}, "
            f"waste {d['compute_waste_gpu_h']:.0f} GPU-h.", "",
            f"### Every pair, by average JCT ({len(self.pairs)})", "", self.pair_table, "",
            f"### Every stopper over {self.scheduler}, by F1", "", self.detector_table, ""])


def candidate_points(registry=None, scheduler: str = DEFAULT_SCHEDULER):
    """``(pairs, detectors)``: experiment points of every scheduler x stopper, and of every stopper but
    ``none`` over ``scheduler`` (the detectors are a subset of the pairs, so they cost no extra runs)."""
    from evalstop_gym.experiments.spec import Arm, Point, Registry

    reg = registry or Registry.current()
    if scheduler not in reg.schedulers:
        raise ConfigError("scheduler", scheduler, f"must be one of {', '.join(reg.schedulers)}")
    pairs = [Point.of(Arm(s if st == "none" else f"{s} + {st}", st), s) for s in reg.schedulers for st in reg.stoppers]
    detectors = [p for p in pairs if p.scheduler == scheduler and p.stopper != "none"]
    return pairs, detectors


def select(base: WorkloadConfig | None = None, *, seeds: int = 10, first_seed: int = VALIDATION_FIRST,
           out: str | os.PathLike = "results/targets", workers: int = 1, scheduler: str = DEFAULT_SCHEDULER,
           progress: bool = False, registry=None) -> Selection:
    """Run (or reuse) every candidate on the validation seeds and choose the best pair and detector."""
    from evalstop_gym.experiments.spec import Experiment
    from evalstop_gym.experiments.tables import markdown_table

    base = base or WorkloadConfig()
    pairs, detectors = candidate_points(registry, scheduler)
    seed_list, results = _play(pairs, base, seeds, first_seed, out, workers, progress)
    exp = Experiment("selection", "Selection", "", None, tuple(pairs), PAIR_COLUMNS, ())
    pair_rows = rows_with_f1(exp, results, base, seed_list)
    pair_rows.sort(key=lambda r: (r["avg_jct_h"], r["preemptions"]))   # stable: registry order breaks ties
    det_exp, det_rows = _detector_rows(detectors, results, base, seed_list)
    return Selection(base, seed_list, pair_rows, det_rows, scheduler, markdown_table(exp, pair_rows),
                     markdown_table(det_exp, det_rows))


def best_detector(base: WorkloadConfig, *, seeds: int = 10, first_seed: int = VALIDATION_FIRST,
                  out: str | os.PathLike = "results/targets", scheduler: str = DEFAULT_SCHEDULER,
                  registry=None) -> dict[str, Any]:
    """The best detector's row, as :func:`select` chooses it, running (or reusing) only the detectors."""
    _, detectors = candidate_points(registry, scheduler)
    seed_list, results = _play(detectors, base, seeds, first_seed, out, 1, False)
    return _detector_rows(detectors, results, base, seed_list)[1][0]


def _play(points, base: WorkloadConfig, seeds: int, first_seed: int, out, workers: int,
          progress: bool) -> tuple[list[int], dict[str, Any]]:
    """``(seeds, results by run id)`` of ``points`` on the validation seeds, run or reused from ``out``."""
    from tqdm import tqdm

    from evalstop_gym.experiments.runner import ResultStore, RunSpec, exclusive, pending_specs, run_sweep
    from evalstop_gym.files import prepare_out

    check_range("validation_seeds", seeds, 1, integer=True)
    check_validation_seeds(first_seed, seeds)
    check_range("workers", workers, 1, integer=True)
    seed_list = list(range(first_seed, first_seed + seeds))
    specs = [RunSpec.of(p, base, s) for p in points for s in seed_list]
    outdir = prepare_out(out)
    with exclusive(outdir, echo=lambda text: print(text, file=sys.stderr)):
        store = ResultStore(Path(outdir) / RUNS_FILE)
        todo = len(pending_specs(specs, store))
        with tqdm(total=todo, desc="selection", unit="run", file=sys.stderr, disable=not progress) as bar:
            run_sweep(specs, store, workers=workers, on_done=bar.update)
        return seed_list, store.metrics


def _detector_rows(detectors, results, base: WorkloadConfig, seed_list):
    """``(experiment, rows)`` of the detectors, best first: highest F1, then less compute waste."""
    from evalstop_gym.experiments.spec import Experiment

    det_exp = Experiment("detectors", "Detectors", "", None, tuple(detectors), DETECTOR_COLUMNS, ())
    det_rows = rows_with_f1(det_exp, results, base, seed_list)
    det_rows.sort(key=lambda r: (-(r["f1"] if r["f1"] is not None else -1.0), r["compute_waste_gpu_h"]))
    return det_exp, det_rows


def rows_with_f1(exp, results: Mapping[str, Mapping[str, Any]], base: WorkloadConfig,
                 seeds: Sequence[int]) -> list[dict[str, Any]]:
    """The suite's rows (:func:`~evalstop_gym.experiments.tables.aggregate`), F1 from counts (:func:`f1_counts`)."""
    from evalstop_gym.experiments.runner import RunSpec
    from evalstop_gym.experiments.stats import summarize
    from evalstop_gym.experiments.tables import aggregate

    rows = aggregate(exp, results, base, seeds)
    for row, point in zip(rows, exp.points):
        s = summarize([f1_counts(results[RunSpec.of(point, base, seed).run_id]) for seed in seeds])
        row["f1"], row["f1_std"] = s.mean, s.std
    return rows
