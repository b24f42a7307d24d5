"""The hand-coded policies a learned one is judged against: tuned as the bench tunes, on validation seeds only.

    >>> from evalstop_gym.agents.selection import select
    >>> sel = select(WorkloadConfig(calibration="realistic"), out="results/targets")
    >>> sel.best_pair["arm"], sel.best_detector["arm"]

Every policy family (each registered stopper, ``none`` included) gets the
bench tuner's budget (:func:`evalstop_gym.bench.tune.tune_families`:
:data:`~evalstop_gym.bench.tune.FAMILY_BUDGET` trials of TPE, seed 0, over the
family's parameters in :data:`~evalstop_gym.bench.tune.SPACES`) on the same
validation workloads (seeds ``VALIDATION_FIRST ..``,
:mod:`evalstop_gym.agents.seeds`; test seeds are refused), by a rule fixed in
code before anything is tuned. Two winners:

* the **best pair**: the scheduler (searched among every registered one) and
  stopper parameters by the bench's rule (:data:`~evalstop_gym.bench.tune.JCT`:
  the lowest mean ratio of average JCT to SRTF-Est's, among trials at no more
  delivered-quality regret than SRTF-Est + EvalStop k=2);
* the **best detector**: every stopper but ``none`` over the default base
  scheduler (``srtf-est``), its parameters by the F1 rule
  (:data:`~evalstop_gym.bench.tune.F1`: the highest mean F1 from counts,
  :func:`evalstop_gym.metrics.f1_counts`; ties: less compute waste).

Each table lists every family's best trial. Runs are a sweep of the experiment
runner: appended to ``<out>/runs.jsonl`` as they finish and reused by run id on
the next call, so an interrupted selection resumes and a finished one costs
nothing to repeat (the studies are deterministic, so they replay on the stored runs).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from evalstop_gym.api import DEFAULT_SCHEDULER
from evalstop_gym.config import ConfigError, WorkloadConfig, check_range
from evalstop_gym.metrics import f1_counts

from .seeds import VALIDATION_FIRST, check_validation_seeds

RUNS_FILE = "runs.jsonl"
PAIR_COLUMNS = ("avg_jct_h", "preemptions", "f1", "compute_waste_gpu_h", "delivered_quality_regret")
DETECTOR_COLUMNS = ("f1", "precision", "recall", "compute_waste_gpu_h", "avg_jct_h")


@dataclass
class Selection:
    """The outcome of :func:`select`: every candidate's row, and the two winners."""

    base: WorkloadConfig
    seeds: list[int]
    pairs: list[dict[str, Any]]        # each family's best trial by the JCT rule, best first
    detectors: list[dict[str, Any]]    # each stopper's best trial over ``scheduler`` by the F1 rule, best first
    scheduler: str                     # the base scheduler of the detectors
    budget: int                        # trials per family
    tuning: dict[str, Any]             # "pair", "detector": the tuner's records, every trial included
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
        from evalstop_gym.bench.tune import F1, JCT

        p, d = self.best_pair, self.best_detector
        over = [r["arm"] for r in self.pairs if not r["feasible"]]
        return "\n".join([
            "## Hand-coded policies chosen on validation seeds", "",
            f"{base_text(self.base)}; validation seeds {self.seeds[0]}-{self.seeds[-1]} (n = {len(self.seeds)}); "
            "cells: mean ± std over seeds.", "",
            f"Every family tuned with {self.budget} trials (TPE, seed 0) on these workloads.", "",
            f"Best scheduler x stopper pair ({JCT.text}): **{p['arm']}**, {p['avg_jct_h']:.3f} h, "
            f"{p['preemptions']:.1f} preemptions per episode.",
            f"Best detector over {self.scheduler} ({F1.text}): **{d['arm']}**, F1 {d['f1']:.3f}, "
            f"waste {d['compute_waste_gpu_h']:.0f} GPU-h.", "",
            *([f"Above the regret cap (each scored its ratio + 1): {', '.join(over)}.", ""] if over else []),
            f"### Each family's best pair, best first ({len(self.pairs)})", "", self.pair_table, "",
            f"### Each stopper's best over {self.scheduler}, best first", "", self.detector_table, ""])


def select(base: WorkloadConfig | None = None, *, seeds: int = 10, first_seed: int = VALIDATION_FIRST,
           out: str | os.PathLike = "results/targets", workers: int = 1, scheduler: str = DEFAULT_SCHEDULER,
           progress: bool = False, registry=None, budget: int | None = None) -> Selection:
    """Tune (or replay the stored tuning of) every family on the validation seeds; choose the pair and detector."""
    from evalstop_gym.bench.tune import FAMILY_BUDGET, JCT
    from evalstop_gym.experiments.tables import markdown_table

    base = base or WorkloadConfig()
    reg = _registry(registry, scheduler)
    seed_list, exp, pair_rows, pair_tuning = _tuned(base, seeds, first_seed, out, workers, progress, budget, JCT,
                                                    list(reg.stoppers), reg.schedulers, PAIR_COLUMNS)
    _, det_exp, det_rows, det_tuning = best_detectors(base, seeds=seeds, first_seed=first_seed, out=out,
                                                      workers=workers, scheduler=scheduler, progress=progress,
                                                      registry=reg, budget=budget)
    return Selection(base, seed_list, pair_rows, det_rows, scheduler, FAMILY_BUDGET if budget is None else budget,
                     {"pair": pair_tuning, "detector": det_tuning}, markdown_table(exp, pair_rows),
                     markdown_table(det_exp, det_rows))


def best_detectors(base: WorkloadConfig, *, seeds: int = 10, first_seed: int = VALIDATION_FIRST,
                   out: str | os.PathLike = "results/targets", workers: int = 1, scheduler: str = DEFAULT_SCHEDULER,
                   progress: bool = False, registry=None, budget: int | None = None):
    """``(seeds, experiment, rows, tuning)``: each stopper but ``none`` tuned over ``scheduler`` by the F1 rule,
    best first."""
    from evalstop_gym.bench.tune import F1

    reg = _registry(registry, scheduler)
    families = [s for s in reg.stoppers if s != "none"]
    return _tuned(base, seeds, first_seed, out, workers, progress, budget, F1, families, [scheduler],
                  DETECTOR_COLUMNS)


def best_detector(base: WorkloadConfig, *, seeds: int = 10, first_seed: int = VALIDATION_FIRST,
                  out: str | os.PathLike = "results/targets", scheduler: str = DEFAULT_SCHEDULER,
                  registry=None) -> dict[str, Any]:
    """The best detector's row, as :func:`select` chooses it, tuning (or replaying) only the detectors."""
    return best_detectors(base, seeds=seeds, first_seed=first_seed, out=out, scheduler=scheduler,
                          registry=registry)[2][0]


def _registry(registry, scheduler: str):
    from evalstop_gym.experiments.spec import Registry

    reg = registry or Registry.current()
    if scheduler not in reg.schedulers:
        raise ConfigError("scheduler", scheduler, f"must be one of {', '.join(reg.schedulers)}")
    return reg


def _tuned(base: WorkloadConfig, seeds: int, first_seed: int, out, workers: int, progress: bool,
           budget: int | None, rule, families: Sequence[str], schedulers: Sequence[str], columns: Sequence[str]):
    """``(seeds, experiment, rows, tuning)``: ``families`` tuned by ``rule`` on the validation seeds, each family's best
    trial a row (by the rule, best first), its figures the means over the seeds."""
    from evalstop_gym.bench.policies import builtin
    from evalstop_gym.bench.suite import Row
    from evalstop_gym.bench.tune import tune_families
    from evalstop_gym.experiments.runner import ResultStore, exclusive
    from evalstop_gym.experiments.spec import Arm, Experiment, Point
    from evalstop_gym.files import prepare_out

    check_range("validation_seeds", seeds, 1, integer=True)
    check_validation_seeds(first_seed, seeds)
    check_range("workers", workers, 1, integer=True)
    seed_list = list(range(first_seed, first_seed + seeds))
    outdir = prepare_out(out)
    with exclusive(outdir, echo=lambda text: print(text, file=sys.stderr)):
        store = ResultStore(Path(outdir) / RUNS_FILE)
        tuning = tune_families([Row.of_config("validation", base, seed_list)], store, budget=budget,
                               families=families, schedulers=schedulers, rule=rule, validation=None,
                               workers=workers, progress=progress)
        results = store.metrics
    best = sorted(tuning["families"].values(), key=lambda t: (t["score"], t["tie"]))   # stable: registry order
    points = []
    for t in best:
        pol = builtin(t["scheduler"], t["stopper"], **t["params"])
        points.append(Point.of(Arm(pol.label, pol.stopper, pol.params), pol.scheduler))
    exp = Experiment(f"selection-{rule.name}", "Selection", "", None, tuple(points), tuple(columns), ())
    rows = rows_with_f1(exp, results, base, seed_list)
    for row, t in zip(rows, best):
        row["rule_score"], row["feasible"] = t["score"], t["feasible"]
    return seed_list, exp, rows, tuning


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
