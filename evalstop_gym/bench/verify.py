"""``bench verify RESULTS``: play a results file's policies again, from nothing, and compare every cell.

A cell is one metric of one workload (row x seed) of one arm (the references
and every scored policy), as the file's ``per_seed`` and ``reference_values``
hold them. The replay uses a fresh folder, so no finished run is read back,
the same suite, the file's tuned-best reference (its ``tuning``) and the same
process isolation. Rows the file played that this checkout cannot play (a
trace not on this machine) are named, not compared; so are differences in the
fingerprint, the commit and the library versions, which explain most mismatches.
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping

from ..config import UsageError


def _cells(values: Mapping[str, Mapping[str, list]]):
    for row, metrics in values.items():
        for metric, seeds in metrics.items():
            for i, v in enumerate(seeds):
                yield (row, metric, i), v


def _same(a: Any, b: Any) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def compare_cells(recorded: Mapping[str, Any], replayed: Mapping[str, Any]) -> tuple[int, list[str]]:
    """``(cells compared, lines saying what differs)`` over the rows both files played."""
    rows = set(recorded["rows"]) & set(replayed["rows"])
    arms = [(f"reference {name}", recorded["reference_values"][name], replayed["reference_values"].get(name))
            for name in recorded["reference_values"]]
    again = {c["policy"]: c for c in replayed["policies"]}
    arms += [(c["label"], c["per_seed"], again.get(c["policy"], {}).get("per_seed")) for c in recorded["policies"]]
    n, diffs = 0, []
    for label, old, new in arms:
        if new is None:
            diffs.append(f"{label}: not in the replay")
            continue
        fresh = dict(_cells(new))
        for (row, metric, i), v in _cells(old):
            if row not in rows:
                continue
            n += 1
            w = fresh.get((row, metric, i), "(absent)")
            if not _same(v, w):
                diffs.append(f"{label} / {row} / {metric} / seed #{i}: recorded {v!r}, replayed {w!r}")
    return n, diffs


def verify(path: str | os.PathLike, *, out: str | os.PathLike | None = None, backend: str = "local",
           workers: int = 1, ray_address: str | None = None, progress: bool = True,
           echo: Callable[[str], None] = print) -> bool:
    """Replay results file ``path`` (in ``out``, which must hold no finished runs; default a temporary folder)
    and compare it cell for cell; print what differs; return whether every compared cell is identical."""
    from . import results as res
    from .fingerprint import provenance
    from .run import RUNS_FILE, run_bench

    recorded = res.load(path)
    if out is not None and (Path(out) / RUNS_FILE).exists():
        raise UsageError(f"--out {out}: holds finished runs ({RUNS_FILE}); verify replays from nothing")
    here = provenance()
    for key in ("code", "commit", "versions"):
        if recorded.get(key) != here[key]:
            echo(f"note: {key} differs: the file has {recorded.get(key)!r}, this checkout {here[key]!r}")
    policies = [c["policy"] for c in recorded["policies"]]
    with tempfile.TemporaryDirectory(prefix="evalstop-verify-") as tmp:
        replayed = run_bench(policies, suite_name=recorded["suite"], out=out or tmp, backend=backend,
                             workers=workers, ray_address=ray_address, progress=progress,
                             tuned=path if recorded.get("tuning") else None, command="verify",
                             echo=lambda _t: None, in_process=bool(recorded.get("in_process")))
    missing = sorted(set(recorded["rows"]) - set(replayed["rows"]))
    if missing:
        echo("not replayed here, so not compared: "
             + "; ".join(f"{r} ({replayed['skipped'].get(r, 'not in this suite')})" for r in missing))
    n, diffs = compare_cells(recorded, replayed)
    for line in diffs:
        echo(line)
    echo(f"{path}: {n} cells compared; " + (f"{len(diffs)} differences" if diffs else "every one identical"))
    return not diffs
