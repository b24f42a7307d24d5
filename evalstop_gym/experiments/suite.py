"""``reproduce``: build the experiments, run the missing runs, write tables, plots and a summary.

Output folder layout (one folder per world: ``results/<calibration>/`` by default,
``results/<calibration>-<scale>/`` for a named scale)::

    suite.json          the world the folder holds (workload, seeds, base scheduler, detectors)
                        and each written experiment's claim verdicts
    runs.jsonl          one record per finished run (appended; resume skips these)
    runs.parquet        the same records as one table (pandas.read_parquet, DuckDB), rewritten atomically
    <E>.md <E>.csv <E>.png   per experiment: Markdown table + claims, CSV, figure
    summary.md          every claim against the paper, then every experiment written to the folder

A run of some experiments (``--experiments E9``) rewrites those experiments' files and their part
of ``summary.md`` and keeps the others. A folder that holds another world is refused in one line
unless ``force`` is set, which replaces it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..config import ConfigError, UsageError, WorkloadConfig, check_range
from ..files import prepare_out, write_atomic
from .progress import progress_bar
from .runner import BACKENDS, ResultStore, RunSpec, describe_config, exclusive, pending_specs, run_sweep
from .runs_table import export_parquet
from .spec import EXPERIMENTS, LEARNED, Experiment, build_suite
from .tables import (UNEXPECTED, aggregate, claim_verdicts, claims_table, console_text, csv_table, markdown_table,
                     verdict_block, verdict_of)

RUNS_FILE = "runs.jsonl"
TABLE_FILE = "runs.parquet"   # the same records as a table for pandas / SQL (a snapshot, rewritten atomically)
MANIFEST = "suite.json"
OUTPUTS = (".md", ".csv", ".png")   # the files each experiment writes

# Sizes of the base workload every experiment starts from (its sweeps override the rest).
# "large": 1,024-GPU clusters with 5,000 jobs; with the default 10 seeds, 1,580 distinct runs
# with today's registered policies (docs/scale.md gives the time it takes on N workers).
SCALES: dict[str, dict[str, int]] = {
    "default": {},
    "large": {"jobs": 5000, "gpus": 1024},
}


def default_out(base: WorkloadConfig, scale: str = "default") -> Path:
    """Where a world's results go unless told: ``results/<calibration>`` (``-<scale>`` for a named scale); a
    world file's folder is named by its stem (``--calibration fits/mine.yaml``: ``results/mine``)."""
    from ..worldfile import world_key

    key = world_key(base.calibration)
    return Path("results") / (key if scale == "default" else f"{key}-{scale}")


def world_of(base: WorkloadConfig, seed_list: Sequence[int], base_scheduler: str | None,
             detectors: Sequence[str] | None) -> dict[str, Any]:
    """What the tables of a folder depend on besides the code: two runs with different worlds must
    not share a folder's tables."""
    workload = {k: v for k, v in describe_config(base).items() if k != "seed"}
    return {"workload": workload, "seeds": [seed_list[0], len(seed_list)],
            "base_scheduler": base_scheduler, "detectors": None if detectors is None else list(detectors)}


def _difference(old: Mapping[str, Any], new: Mapping[str, Any], prefix: str = "") -> str | None:
    """The first field where two worlds differ, as ``name=<old> there, <new> here`` (``None``: the same world)."""
    for key in sorted(set(old) | set(new), key=str):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            found = _difference(a, b, f"{prefix}{key}.")
            if found:
                return found
        elif a != b:
            return f"{prefix}{key}={a!r} there, {b!r} here"
    return None


def _read_manifest(outdir: Path) -> dict[str, Any] | None:
    path = outdir / MANIFEST
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise UsageError(f"{path} is not readable JSON ({e}): move it away, or pass --force to replace "
                         "the folder's tables") from None
    if not (isinstance(data, dict) and isinstance(data.get("world"), dict)
            and isinstance(data.get("experiments"), dict) and set(data["experiments"]) <= set(EXPERIMENTS)):
        raise UsageError(f"{path} is not a results manifest: move it away, or pass --force to replace "
                         "the folder's tables")
    return data


def _write_manifest(outdir: Path, manifest: Mapping[str, Any]) -> None:
    tmp = outdir / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, outdir / MANIFEST)   # atomic: a kill leaves the old manifest or the new one


def claim_folder(outdir: Path, world: dict[str, Any], force: bool,
                 echo: Callable[[str], None]) -> dict[str, Any]:
    """The folder's manifest for ``world``: the one there if it holds the same world; refused
    (:class:`UsageError`, one line) if it holds another, unless ``force``, which removes the
    other world's experiment files and starts a fresh manifest."""
    manifest = None
    try:
        manifest = _read_manifest(outdir)
    except UsageError:
        if not force:
            raise
    if manifest is not None:
        diff = _difference(manifest["world"], world)
        if diff is None:
            return manifest
        if not force:
            raise UsageError(f"{outdir} holds the results of another world ({diff}): pass --out DIR for "
                             "a folder of its own, or --force to replace them")
        for name in manifest["experiments"]:
            for ext in OUTPUTS:
                (outdir / f"{name}{ext}").unlink(missing_ok=True)
        echo(f"--force: replacing the results of another world in {outdir} ({diff})")
    manifest = {"world": world, "experiments": {}}
    _write_manifest(outdir, manifest)
    return manifest


def folder_experiments(outdir: Path, manifest: Mapping[str, Any]) -> list[str]:
    """The experiments whose tables the folder holds, in the suite's order."""
    return [n for n in EXPERIMENTS if n in manifest["experiments"] and (outdir / f"{n}.md").is_file()]


def summary_text(outdir: Path, manifest: Mapping[str, Any]) -> str:
    """``summary.md`` from the folder's experiments (in the suite's order): every claim, then each
    experiment's Markdown file as written."""
    names = folder_experiments(outdir, manifest)
    verdicts = [v for n in names for v in manifest["experiments"][n]]
    parts = ["# evalstop-gym reproduce: summary", ""]
    if verdicts:
        parts += ["## Compared with the paper", "", "```text", verdict_block(verdicts), "```", "",
                  claims_table(verdicts, with_experiment=True), ""]
    parts += [(outdir / f"{n}.md").read_text(encoding="utf-8") for n in names]
    return "\n".join(parts)


def folder_specs(experiments: Sequence[Experiment], manifest: Mapping[str, Any], base: WorkloadConfig,
                 seed_list: Sequence[int]) -> dict[str, list[RunSpec]]:
    """Each experiment of the folder (these, and those its manifest keeps from earlier runs) with its runs'
    specs: what fills the ``experiments`` column of ``runs.parquet``."""
    world, mine = manifest["world"], {e.name for e in experiments}
    kept = [n for n in manifest["experiments"] if n not in mine]
    if kept:
        experiments = [*experiments, *build_suite(kept, base_scheduler=world["base_scheduler"],
                                                   detectors=world["detectors"], workload=base)]
    return {e.name: [RunSpec.of(p, base, s) for p in e.points for s in seed_list]
            for e in sorted(experiments, key=lambda e: list(EXPERIMENTS).index(e.name))}


@dataclass
class SuiteResult:
    experiments: list[Experiment]
    new_runs: int
    remaining: int                     # runs still missing (a ``max_runs`` stop): no tables written
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    verdicts: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    unexpected: int = 0                # claims of the folder that differ unexpectedly (``--strict`` fails on them)

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
              out: str | os.PathLike | None = None, base: WorkloadConfig | None = None,
              backend: str = "local", workers: int | None = None, base_scheduler: str | None = None,
              detectors: Sequence[str] | None = None, max_runs: int | None = None, progress: bool = True,
              plots: bool = True, echo: Callable[[str], None] = print, model: str | None = None,
              ray_address: str | None = None, force: bool = False) -> SuiteResult:
    """Run the named experiments (default: all) over ``seeds`` seeds from ``first_seed``.

    ``out`` (default :func:`default_out`, ``results/<calibration>``) holds one world: a folder
    whose ``suite.json`` names another workload, seed range, base scheduler or detector list is
    refused with a :class:`UsageError` unless ``force`` (then that world's tables are replaced).

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
    experiments = build_suite(names, base_scheduler=base_scheduler, detectors=detectors, model=model, workload=base)
    if base.calibration != "paper":  # claims about the paper calibration's regime do not apply
        experiments = [dataclasses.replace(e, claims=tuple(c for c in e.claims if c.source != "calibration"))
                       for e in experiments]
    seed_list = list(range(first_seed, first_seed + seeds))
    specs = [RunSpec.of(p, base, s) for e in experiments for p in e.points for s in seed_list]
    outdir = prepare_out(default_out(base) if out is None else out)

    def warn(text):
        print(text, file=sys.stderr)

    with exclusive(outdir, echo=warn):
        manifest = claim_folder(outdir, world_of(base, seed_list, base_scheduler, detectors), force, warn)
        return _run_and_write(experiments, specs, outdir, manifest, base, seed_list, backend=backend,
                              workers=workers, max_runs=max_runs, progress=progress, plots=plots, echo=echo,
                              ray_address=ray_address)


def _run_and_write(experiments, specs, outdir: Path, manifest: dict[str, Any], base: WorkloadConfig,
                   seed_list: list[int], *, backend: str, workers: int, max_runs: int | None, progress: bool,
                   plots: bool, echo: Callable[[str], None], ray_address: str | None) -> SuiteResult:
    """The part of :func:`reproduce` that holds the output folder's lock: run what is missing, write."""
    learned = [s for s in specs if s.stopper == LEARNED]
    store = ResultStore(outdir / RUNS_FILE)
    todo = len(pending_specs(specs, store))
    distinct = len({s.run_id for s in specs})   # experiments share points: those run once
    if todo < distinct:
        print(f"reproduce: reusing {distinct - todo} of {distinct} runs already finished in "
              f"{outdir / RUNS_FILE}; {todo} to run", file=sys.stderr)
    with progress_bar(min(todo, max_runs or todo), "reproduce", "run", progress) as bar:
        new = run_sweep([s for s in specs if s.stopper != LEARNED], store, backend=backend, workers=workers,
                        limit=max_runs, on_done=bar.update, ray_address=ray_address)
        if learned and (max_runs is None or new < max_runs):
            from .learned import provider

            new += provider().run(pending_specs(learned, store), store,
                               limit=None if max_runs is None else max_runs - new, on_done=bar.update)
    result = SuiteResult(experiments, new, todo - new)
    if (outdir / RUNS_FILE).exists():   # every reproduce rewrites the table: its experiments column may change
        export_parquet(outdir / RUNS_FILE, outdir / TABLE_FILE,
                       experiments=folder_specs(experiments, manifest, base, seed_list))
    if not result.complete:
        echo(f"stopped after {new} new runs; {result.remaining} remain: run the same command again to resume")
        return result
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
        manifest["experiments"][exp.name] = verdicts
    _write_manifest(outdir, manifest)
    write_atomic(outdir / "summary.md", summary_text(outdir, manifest))
    kept = sorted(set(manifest["experiments"]) - {e.name for e in experiments})
    echo(f"wrote {', '.join(e.name for e in experiments)} tables and plots and summary.md to {outdir}/"
         + (f" (summary.md keeps {', '.join(kept)} from earlier runs)" if kept else ""))
    claims = [v for n in folder_experiments(outdir, manifest) for v in manifest["experiments"][n]]
    if claims:   # the folder's claims, as summary.md has them: the last thing printed
        echo("\n" + verdict_block(claims))
    result.unexpected = sum(verdict_of(v) == UNEXPECTED for v in claims)
    return result
