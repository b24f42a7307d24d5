"""The arms of a bench: the reference arms, and every arm's runs on a suite's rows, played or read back.

Every arm plays the same workloads (row x seed) through the experiment
runner (:func:`~evalstop_gym.experiments.runner.run_sweep`: process pool or Ray,
records appended to a checksummed JSONL store, resumed by run id); a saved
model's runs play as :class:`~.play.LearnedSpec` says: in the model's own process by default, through the
learned layer's provider in this one with ``in_process``.
"""

from __future__ import annotations

import sys
from typing import Sequence

from ..config import ConfigError
from ..experiments.runner import ResultStore, pending_specs, run_sweep
from .play import COUNTS, METRICS, BenchSpec, learned_spec
from .policies import LEARNED_KIND, BenchPolicy, builtin
from .suite import Row

NO_STOPPER, EVALSTOP_K2, TUNED_BEST = "no stopper", "EvalStop k=2", "tuned best"


def references() -> dict[str, BenchPolicy]:
    """The fixed reference arms: SRTF-Est without a stopper, and with EvalStop k=2 (the paper's pair)."""
    return {NO_STOPPER: builtin("srtf-est"), EVALSTOP_K2: builtin("srtf-est", "evalstop", k=2)}


def _cannot_run(policy: BenchPolicy, row: Row, in_process: bool) -> str | None:
    """The learned layer's reason why a saved model cannot play ``row``'s cluster, or ``None`` (finding out
    loads the model: in its own process unless ``in_process``)."""
    spec = learned_spec(policy, row, row.seeds[0], in_process)
    if in_process:
        from ..experiments.learned import provider

        return provider().cannot_run(spec)
    from .isolate import learned_cannot_run

    return learned_cannot_run(spec)


def rows_of(policy: BenchPolicy, rows: Sequence[Row], in_process: bool = False) -> list[Row]:
    """The rows ``policy`` plays: all of them, or for a saved model the synthetic ones (:attr:`Row.synthetic`)
    whose cluster it runs on (a learned scheduler trained on nodes does not run on the flat pool)."""
    if policy.kind != LEARNED_KIND:
        return list(rows)
    return [r for r in rows if r.synthetic and _cannot_run(policy, r, in_process) is None]


def why_not(policy: BenchPolicy, rows: Sequence[Row], in_process: bool = False) -> str:
    """Why a saved model plays none of ``rows`` (the learned layer's reason on the first synthetic one)."""
    synthetic = [r for r in rows if r.synthetic]
    if not synthetic:
        return "a saved model plays synthetic rows only (no trace, no logged curves)"
    return _cannot_run(policy, synthetic[0], in_process) or "no reason given"


def specs_of(policy: BenchPolicy, rows: Sequence[Row], in_process: bool = False) -> list:
    """Every run of ``policy`` on the rows of ``rows`` it plays (:func:`rows_of`); ``in_process``: a user
    class or a saved model plays in this process instead of in its own (:mod:`.isolate`)."""
    if policy.kind == LEARNED_KIND:
        return [learned_spec(policy, r, s, in_process) for r in rows_of(policy, rows, in_process) for s in r.seeds]
    return [BenchSpec.make(policy, r, s, in_process) for r in rows for s in r.seeds]


def play(policies: Sequence[BenchPolicy], rows: Sequence[Row], store: ResultStore, *, backend: str, workers: int,
         ray_address: str | None, progress: bool, desc: str = "bench",
         in_process: bool = False) -> dict[str, dict[str, dict[str, list]]]:
    """Run what ``store`` lacks; return label -> row -> metric -> per-seed values (:data:`METRICS`, :data:`COUNTS`).
    ``in_process``: user classes and saved models play beside the simulator (:func:`specs_of`); else a saved
    model's runs join the pool's, each in its model's process."""
    from tqdm import tqdm

    played = {p.label: rows_of(p, rows, in_process) for p in policies}
    for p in policies:
        if not played[p.label]:
            raise ConfigError("policy", p.text, f"plays none of the rows {[r.name for r in rows]}: "
                                                f"{why_not(p, rows, in_process)}")
    by_policy = {p.label: specs_of(p, played[p.label], in_process) for p in policies}
    here = in_process and any(p.kind == LEARNED_KIND for p in policies)
    hand = [s for p in policies if not (here and p.kind == LEARNED_KIND) for s in by_policy[p.label]]
    learned = [s for p in policies if here and p.kind == LEARNED_KIND for s in by_policy[p.label]]
    todo = len(pending_specs(hand + learned, store))
    with tqdm(total=todo, desc=desc, unit="run", file=sys.stderr, disable=not progress or todo == 0) as bar:
        run_sweep(hand, store, backend=backend, workers=workers, on_done=bar.update, ray_address=ray_address)
        if learned:
            from ..experiments.learned import provider

            provider().run(pending_specs(learned, store), store, on_done=bar.update)
    out: dict[str, dict[str, dict[str, list]]] = {}
    for p in policies:
        specs = iter(by_policy[p.label])
        table = out.setdefault(p.label, {})
        for r in played[p.label]:
            runs = [store.metrics[next(specs).run_id] for _ in r.seeds]
            table[r.name] = {m: [run.get(m) for run in runs] for m in METRICS + COUNTS}
    return out
