"""``bench``: play policies and the reference arms on every row of a suite, then score them.

Output folder::

    runs.jsonl     one checksummed record per finished run (the experiment runner's; resume skips these)
    tune.jsonl     the tuner's runs on validation seeds (with ``tune=True``)
    results.json   the scorecards, the suite's hash, the package version (:mod:`.results`)
    bench.md       the same as Markdown
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from .. import __version__
from ..config import ConfigError, check_range
from ..experiments.runner import BACKENDS, ResultStore, exclusive
from ..files import prepare_out, write_atomic
from .arms import TUNED_BEST, play, references
from .fingerprint import provenance
from .isolate import names_outside_code, parse_outside
from .policies import LEARNED_KIND, check_file_names, file_policy, modules_named, parse_policies
from .score import scorecard, verdicts
from .suite import DEFAULT_SUITE, suite, suite_hash

RUNS_FILE, TUNE_FILE, RESULTS_FILE, MARKDOWN_FILE = "runs.jsonl", "tune.jsonl", "results.json", "bench.md"
INPUTS_FILE = "fingerprint.txt"   # the fingerprint the folder's runs were played under


def set_aside_stale(outdir: Path, echo: Callable[[str], None]) -> None:
    """Keep finished runs only while every input of a score is unchanged: the runner's run ids hash the code,
    not the data files or library versions (:mod:`.fingerprint`), so runs of a folder played under another
    fingerprint are renamed ``runs.<fingerprint>.jsonl`` (and ``tune...``) and never read back."""
    from .fingerprint import fingerprint

    marker, now = outdir / INPUTS_FILE, fingerprint()
    before = marker.read_text().strip() if marker.is_file() else None
    if before not in (None, now):
        for name in (RUNS_FILE, TUNE_FILE):
            old = outdir / name
            if old.exists():
                kept = old.with_name(f"{old.stem}.{before}{old.suffix}")
                old.replace(kept)
                echo(f"{old}: played under fingerprint {before}, not {now} (code, data or library versions "
                     f"changed): set aside as {kept.name}, every run plays again")
    marker.write_text(now + "\n")


def score_all(arms: Sequence[Mapping[str, Mapping[str, list]]], ref_values: Mapping[str, Any], *, workers: int,
              progress: bool) -> list[dict[str, Any]]:
    """The :func:`~.score.scorecard` of each arm, in order, on up to ``workers`` processes.

    A scorecard makes about 700 paired tests on suite v2 (12 metrics x 3 references x 19 row
    groups), some 15 CPU seconds: for the leaderboard's 70-odd policies the scoring would take longer
    than their runs in one process.
    """
    from concurrent.futures import ProcessPoolExecutor

    from tqdm import tqdm

    from ..processes import cap_workers

    workers = cap_workers(workers, len(arms))
    with tqdm(total=len(arms), desc="score", unit="policy", file=sys.stderr,
              disable=not progress or len(arms) < 2) as bar:
        cards: list[dict[str, Any]] = []
        with contextlib.ExitStack() as stack:
            mapper = map if workers == 1 else stack.enter_context(ProcessPoolExecutor(max_workers=workers)).map
            for card in mapper(scorecard, arms, [ref_values] * len(arms)):
                cards.append(card)
                bar.update()
        return cards


def run_bench(policies: Sequence[str], *, suite_name: str = DEFAULT_SUITE, out: str | os.PathLike = "bench-results",
              backend: str = "local", workers: int = 1, ray_address: str | None = None, progress: bool = True,
              tune: bool = False, tuned: str | os.PathLike | None = None, budget: int | None = None,
              command: str = "", echo: Callable[[str], None] = print,
              learned_tuning: Mapping[str, Any] | None = None, in_process: bool = False,
              per_scheduler: bool = False, trust: Sequence[str | os.PathLike] = ()) -> dict[str, Any]:
    """Score ``policies`` (``--policy`` texts) on suite ``suite_name``; write results.json and bench.md to ``out``.

    ``tune``: first tune every stopper family on validation seeds (:mod:`.tune`); its best pair
    becomes the ``tuned best`` reference and its parameters go in the results. A ``module:Class`` stopper
    that declares a search space (:data:`~.space.SEARCH_SPACE`) is tuned too, with the same budget, seeds and
    rule (:func:`~.tune.tune_outside`), and scored with its best trial's parameters. ``tuned``: reuse
    the tuning of an earlier results file instead. Without either there is no tuned reference.
    ``learned_tuning``: a learned family's tuning (:func:`~.tune.tune_learned`) the scored models come
    from, kept in the results file for the leaderboard. ``per_scheduler``: with ``tune``, each scheduler
    and stopper pair is a family of its own (:func:`~.tune.tune_families`). ``in_process``: user classes
    play beside the simulator instead of in their own processes (:mod:`.isolate`); the results say so.
    ``trust``: files whose ``module:Class`` names may be imported (a results file otherwise names registered
    policies or modules of ``policies`` only).
    """
    from . import results as res

    check_range("workers", workers, 1, integer=True)
    if backend not in BACKENDS:
        raise ConfigError("backend", backend, f"must be one of {', '.join(BACKENDS)}")
    if not policies:
        raise ConfigError("policy", None, "name at least one policy")
    if tune and tuned is not None:
        raise ConfigError("tuned", str(tuned), "give --tune or --tuned FILE, not both")
    # a file names no module but those of this call's policies, unless the user trusts it (--trust FILE)
    allowed = None if tuned is not None and _is_trusted(tuned, trust) else modules_named(policies)
    rows = suite(suite_name)
    played = [r for r in rows if r.missing() is None]
    skipped = {r.name: r.missing() for r in rows if r.missing() is not None}
    for name, why in skipped.items():   # loudly: these figures are then not the published page's
        print(f"evalstop-gym bench: row {name} of suite {suite_name} is NOT played ({why}); these results cover "
              f"{len(played)} of {len(rows)} rows, so their suite means differ from figures over all {len(rows)} "
              "(the leaderboard also gives each policy's figure over the rows every clone plays)", file=sys.stderr)
    if in_process or not names_outside_code(policies):
        from .space import spaces_of

        scored = parse_policies(policies)
        spaces = spaces_of(scored) if tune else {}
    else:
        scored, spaces = parse_outside(policies, spaces=tune)
    refs = references()
    outdir = prepare_out(out)
    with exclusive(outdir, echo=lambda text: print(text, file=sys.stderr)):
        set_aside_stale(outdir, echo=lambda text: print(text, file=sys.stderr))
        tuning, outside = None, {}
        if tune:
            from .tune import tune_families, tune_outside

            tuning = tune_families(played, ResultStore(outdir / TUNE_FILE), budget=budget, backend=backend,
                                   workers=workers, ray_address=ray_address, progress=progress,
                                   per_scheduler=per_scheduler)
            for i, p in enumerate(scored):   # an outside policy's declared space: the families' budget and rule
                if p.label in spaces:
                    outside[p.label], scored[i] = tune_outside(
                        p, spaces[p.label], played, ResultStore(outdir / TUNE_FILE), budget=budget,
                        in_process=in_process, backend=backend, workers=workers, ray_address=ray_address,
                        progress=progress)
        elif tuned is not None:
            tuning = res.load(tuned, suite_name=suite_name)["tuning"]
            if not tuning:
                raise ConfigError("tuned", str(tuned), "holds no tuning (it was not written by bench --tune)")
            check_file_names(tuning, tuned, allowed)
        if tuning:
            refs[TUNED_BEST] = file_policy(tuning["best"], "tuning.best", tuned or "the tuning", allowed)
        arms = list(refs.values()) + [p for p in scored if p.label not in {r.label for r in refs.values()}]
        values = play(arms, played, ResultStore(outdir / RUNS_FILE), backend=backend, workers=workers,
                      ray_address=ray_address, progress=progress, in_process=in_process)
    ref_values = {name: values[p.label] for name, p in refs.items()}
    own_process = {p.label for p in scored if p.source or p.kind == LEARNED_KIND}   # outside code: its own process
    cards = [{"policy": p.text, "label": p.label, "kind": p.kind, "source": p.source,
              **({"process": "in-process" if in_process else "isolated"} if p.label in own_process else {}), **card,
              "verdicts": verdicts(card), "per_seed": values[p.label]}
             for p, card in zip(scored, score_all([values[p.label] for p in scored], ref_values,
                                                  workers=workers if backend == "local" else 1, progress=progress))]
    result = {"format": res.FORMAT, "suite": suite_name, "suite_hash": suite_hash(suite_name), "version": __version__,
              **provenance(), "rows": [r.name for r in played], "skipped": skipped, "in_process": in_process,
              "references": {name: p.label for name, p in refs.items()},
              "reference_values": ref_values, "tuning": tuning,
              "tuned_from": "--tune" if tune else (None if tuned is None else str(tuned)),
              "outside_tuning": outside, "command": command, "policies": cards}
    if learned_tuning is not None:
        result["learned_tuning"] = dict(learned_tuning)
    if trust:
        result["trusted"] = [str(t) for t in trust]
    res.save(result, outdir / RESULTS_FILE)
    md = res.markdown(result)
    write_atomic(outdir / MARKDOWN_FILE, md)
    echo(md)
    return result


def _is_trusted(path: str | os.PathLike, trust: Sequence[str | os.PathLike]) -> bool:
    from pathlib import Path

    return any(Path(path).resolve() == Path(t).resolve() for t in trust)
