"""``reproduce``: build the experiments, run the missing runs, write tables, plots and a summary.

Output folder layout::

    runs.jsonl          one record per finished run (appended; resume skips these)
    <E>.md <E>.csv <E>.png   per experiment: Markdown table + claims, CSV, figure
    summary.md          the setup, every claim against the paper, every table
"""

from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from tqdm import tqdm

from ..config import ConfigError, WorkloadConfig, check_range
from ..files import prepare_out, write_atomic
from .runner import BACKENDS, ResultStore, RunSpec, exclusive, pending_specs, run_sweep
from .spec import LEARNED, Experiment, build_suite
from .tables import aggregate, claim_verdicts, claims_table, console_text, csv_table, markdown_table

RUNS_FILE = "runs.jsonl"

# Sizes of the base workload every experiment starts from (its sweeps override the rest).
# "large": 1,024-GPU clusters with 5,000 jobs; with the default 10 seeds, 1,580 distinct runs
# with today's registered policies (docs/scale.md gives the time it takes on N workers).
SCALES: dict[str, dict[str, int]] = {
    "default": {},
    "large": {"jobs": 5000, "gpus": 1024},
}


@dataclass
class SuiteResult:
    experiments: list[Experiment]
    new_runs: int
    remaining: int                     # runs still missing (a ``max_runs`` stop): no tables written
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    verdicts: dict[str, list[dict[str, str]]] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return self.remaining == 0


def setup_text(exp: Experiment, base: WorkloadConfig, seeds: Sequence[int]) -> str:
    schedulers = list(dict.fromkeys(p.scheduler for p in exp.points))
    from ..report import noise_text

    return (f"Calibration {base.calibration}. Workload {base.workload}: {base.jobs} jobs on {base.gpus} GPUs, "
            f"load {base.load:g}, {noise_text(base)}, {base.hacking_fraction:.0%} of RLHF runs drawn to hack, "
            f"{base.evals_per_job} evals per job"
            + (f" ({exp.x_name} swept)" if exp.x_name and exp.x_name != "scheduler" else "")
            + f". Base scheduler: {', '.join(schedulers)}. Seeds {seeds[0]}-{seeds[-1]} (n = {len(seeds)}). "
            "Cells: mean ± std over seeds. Gains: mean per-seed reduction against no stopper on the same "
            "seeds [95% CI]; p: two-sided paired t-test / Wilcoxon signed-rank.")


def experiment_markdown(exp: Experiment, rows, verdicts, setup: str) -> str:
    parts = [f"## {exp.name}: {exp.title}", "", exp.question, "", setup, "", markdown_table(exp, rows)]
    if exp.notes:
        parts += ["", "Notes:", *(f"- {n}" for n in exp.notes)]
    if verdicts:
        parts += ["", "### Compared with the paper", "", claims_table(verdicts)]
    parts += ["", f"![{exp.name}]({exp.name}.png)", ""]
    return "\n".join(parts)


def reproduce(names: Sequence[str] | None = None, *, seeds: int = 10, first_seed: int = 0,
              out: str | os.PathLike = "results", base: WorkloadConfig | None = None,
              backend: str = "local", workers: int | None = None, base_scheduler: str | None = None,
              detectors: Sequence[str] | None = None, max_runs: int | None = None, progress: bool = True,
              plots: bool = True, echo: Callable[[str], None] = print, model: str | None = None,
              ray_address: str | None = None) -> SuiteResult:
    """Run the named experiments (default: all) over ``seeds`` seeds from ``first_seed``.

    Finished runs found in ``<out>/runs.jsonl`` are not run again. With
    ``max_runs``, stops after that many new runs and writes no tables until a
    later call has run the rest. ``model`` (a model saved by ``evalstop-gym
    train``) adds a learned row to E1 and E3; its runs go after the others, in
    this process (by the provider of :mod:`.learned`), on held-out seeds only.
    ``ray_address``: with ``backend="ray"``, run on that existing Ray cluster
    (default ``$RAY_ADDRESS``, else a local Ray).
    """
    check_range("seeds", seeds, 1, integer=True)
    check_range("first_seed", first_seed, 0, integer=True)
    workers = (os.cpu_count() or 1) if workers is None else workers
    check_range("workers", workers, 1, integer=True)
    if backend not in BACKENDS:
        raise ConfigError("backend", backend, f"must be one of {', '.join(BACKENDS)}")
    if max_runs is not None:
        check_range("max_runs", max_runs, 1, integer=True)
    base = base or WorkloadConfig()
    if model is not None:
        from .learned import provider

        arms = provider()
        arms.check_seeds(first_seed, seeds)
        arms.check_model(model)   # a model that cannot be loaded fails now, before any run
    experiments = build_suite(names, base_scheduler=base_scheduler, detectors=detectors, model=model)
    if base.calibration != "paper":  # claims about the paper calibration's regime do not apply
        experiments = [dataclasses.replace(e, claims=tuple(c for c in e.claims if c.source != "calibration"))
                       for e in experiments]
    seed_list = list(range(first_seed, first_seed + seeds))
    specs = [RunSpec.of(p, base, s) for e in experiments for p in e.points for s in seed_list]
    outdir = prepare_out(out)
    with exclusive(outdir, echo=lambda text: print(text, file=sys.stderr)):
        return _run_and_write(experiments, specs, outdir, base, seed_list, backend=backend, workers=workers,
                              max_runs=max_runs, progress=progress, plots=plots, echo=echo,
                              ray_address=ray_address)


def _run_and_write(experiments, specs, outdir: Path, base: WorkloadConfig, seed_list: list[int], *,
                   backend: str, workers: int, max_runs: int | None, progress: bool, plots: bool,
                   echo: Callable[[str], None], ray_address: str | None) -> SuiteResult:
    """The part of :func:`reproduce` that holds the output folder's lock: run what is missing, write."""
    learned = [s for s in specs if s.stopper == LEARNED]
    store = ResultStore(outdir / RUNS_FILE)
    todo = len(pending_specs(specs, store))
    distinct = len({s.run_id for s in specs})   # experiments share points: those run once
    if todo < distinct:
        print(f"reproduce: reusing {distinct - todo} of {distinct} runs already finished in "
              f"{outdir / RUNS_FILE}; {todo} to run", file=sys.stderr)
    with tqdm(total=min(todo, max_runs or todo), desc="reproduce", unit="run", file=sys.stderr,
              disable=not progress) as bar:
        new = run_sweep([s for s in specs if s.stopper != LEARNED], store, backend=backend, workers=workers,
                        limit=max_runs, on_done=bar.update, ray_address=ray_address)
        if learned and (max_runs is None or new < max_runs):
            from .learned import provider

            new += provider().run(pending_specs(learned, store), store,
                               limit=None if max_runs is None else max_runs - new, on_done=bar.update)
    result = SuiteResult(experiments, new, todo - new)
    if not result.complete:
        echo(f"stopped after {new} new runs; {result.remaining} remain: run the same command again to resume")
        return result
    summary = ["# evalstop-gym reproduce: summary", ""]
    all_verdicts: list[dict[str, str]] = []
    sections = []
    for exp in experiments:
        rows = aggregate(exp, store.metrics, base, seed_list)
        verdicts = claim_verdicts(exp, rows)
        result.rows[exp.name], result.verdicts[exp.name] = rows, verdicts
        md = experiment_markdown(exp, rows, verdicts, setup_text(exp, base, seed_list))
        write_atomic(outdir / f"{exp.name}.md", md)
        write_atomic(outdir / f"{exp.name}.csv", csv_table(exp, rows))
        if plots:
            from .plots import plot_experiment

            plot_experiment(exp, rows, outdir / f"{exp.name}.png")
        echo(console_text(exp, rows, verdicts, full=str(outdir / f"{exp.name}.md")))
        all_verdicts += verdicts
        sections.append(md)
    if all_verdicts:
        summary += ["## Compared with the paper", "", claims_table(all_verdicts, with_experiment=True), ""]
    write_atomic(outdir / "summary.md", "\n".join(summary + sections))
    echo(f"wrote {', '.join(e.name for e in experiments)} tables and plots and summary.md to {outdir}/")
    return result
