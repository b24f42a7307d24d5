"""The workload seed ranges, declared once for the whole package: who may play which seeds.

A workload seed fixes a whole episode (arrivals, lengths, hidden curves, eval
noise). Four disjoint ranges say what each seed is for:

* **test** ``0 .. 899,999``: held out. ``bench``, ``evaluate``, ``targets``,
  ``reproduce`` and the examples report on these; nothing in the package is
  trained, tuned or selected on them.
* **validation** ``900,000 .. 8,999,999``: tuning and selection: the bench's
  tuner (:mod:`evalstop_gym.bench.tune`), the choice of hand-coded comparators
  and of learned runs, the EvalCallback of training. The hand-coded detectors'
  defaults are chosen on validation seeds of one world,
  :data:`SELECTION_CALIBRATION`.
* **audit** ``9,000,000 .. 9,999,999``: checks of a world itself (is the
  hidden label readable from public data?), apart from both of the above.
* **train** ``10,000,000 ..``: training episodes; run seed ``s``, env rank
  ``r`` of ``n`` plays episode ``i`` on ``TRAIN_BLOCK * (s + 1) + r + n * i``.

:func:`check_seeds` is the guard every path calls with the role it plays:
``check_seeds("validation", seeds)`` before tuning anything. Seeds inside the test range
that a shipped default was ever tuned on are recorded in :data:`TUNED_ON_TEST`;
they no longer count as held out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from .config import ConfigError


@dataclass(frozen=True)
class SeedRange:
    """Seeds ``first .. end - 1``, reserved for one role."""

    role: str
    first: int
    end: int

    def __contains__(self, seed: object) -> bool:
        return isinstance(seed, int) and not isinstance(seed, bool) and self.first <= seed < self.end

    def __str__(self) -> str:
        return f"{self.first}..{self.end - 1}"


TRAIN_BLOCK = 10_000_000
TEST = SeedRange("test", 0, 900_000)
VALIDATION = SeedRange("validation", 900_000, 9_000_000)
AUDIT = SeedRange("audit", 9_000_000, TRAIN_BLOCK)
TRAIN = SeedRange("train", TRAIN_BLOCK, 2**63)
RANGES: dict[str, SeedRange] = {r.role: r for r in (TRAIN, VALIDATION, TEST, AUDIT)}

# Seeds in the test range that shipped defaults were once chosen on: check_seeds("test", ...) refuses them.
# The detectors' earlier defaults were grid-searched on seeds 100-110 of the realistic world; today's are
# chosen on validation seeds (docs/select_detectors.py, docs/detectors.md), but figures of the earlier
# search were seen on these seeds, so they stay out of every held-out report.
TUNED_ON_TEST: dict[str, range] = {"earlier detector defaults": range(100, 111)}

# The world whose validation seeds choose the hand-coded detectors' defaults: docs/select_detectors.py
# plays it, records its choice in docs/detector_defaults.json, and tests/test_baselines_defaults.py holds
# the file, this name and the defaults in evalstop_gym/baselines/ equal. To move the selection to another
# world, change this name, re-run the script and ship what it picks.
SELECTION_CALIBRATION = "grounded"

# the names the learned layer has used since before this module (evalstop_gym.agents.seeds)
TEST_SEEDS_END = TEST.end
VALIDATION_FIRST = VALIDATION.first
VALIDATION_END = VALIDATION.end


def train_first(run_seed: int, rank: int) -> int:
    """Workload seed of the first training episode of env ``rank`` in run ``run_seed``."""
    return TRAIN_BLOCK * (run_seed + 1) + rank


def _listing(seeds: list[int], most: int = 5) -> str:
    shown = ", ".join(map(str, seeds[:most]))
    return shown + (f" (and {len(seeds) - most} more)" if len(seeds) > most else "")


def check_seeds(role: str, seeds: Iterable[int]) -> list[int]:
    """Raise :class:`ConfigError` naming the offending seeds unless every seed belongs to ``role``'s range.

    ``role``: one of :data:`RANGES` (``train``, ``validation``, ``test``, ``audit``). Test
    seeds recorded in :data:`TUNED_ON_TEST` are refused as test seeds too. Returns the seeds as a list.
    """
    if role not in RANGES:
        raise ConfigError("role", role, f"must be one of {', '.join(RANGES)}")
    seeds = list(seeds)
    bad = [s for s in seeds if s not in RANGES[role]]
    if bad:
        where = "; ".join(f"{r.role} {r}" for r in RANGES.values())
        why = {"validation": "tuning and selection may only touch validation seeds, never held-out test seeds",
               "test": "results are reported on held-out test seeds only"}.get(role, f"this path plays {role} seeds")
        raise ConfigError("seeds", _listing(bad), f"are not {role} seeds ({RANGES[role]}): {why} ({where})")
    if role == "test":
        for what, used in TUNED_ON_TEST.items():
            hit = [s for s in seeds if s in used]
            if hit:
                raise ConfigError("seeds", _listing(hit), f"the {what} were tuned on seeds {used.start}-"
                                  f"{used.stop - 1}, so they are not held out; choose other test seeds")
    return seeds


def check_test_seeds(first: int, count: int) -> None:
    """Raise :class:`ConfigError` unless ``first .. first + count - 1`` are test seeds (the learned layer's check)."""
    if first < 0 or first + count > TEST.end:
        raise ConfigError("seed", first, f"held-out test seeds are {TEST} (with --seeds {count} "
                          f"the first may be at most {TEST.end - count}); higher seeds are used for "
                          "validation and training")


def check_validation_seeds(first: int, count: int) -> None:
    """Raise :class:`ConfigError` unless ``first .. first + count - 1`` are validation seeds."""
    if first < VALIDATION.first or first + count > VALIDATION.end:
        raise ConfigError("validation_seed", first, f"validation seeds are {VALIDATION} "
                          f"(with {count} seeds the first may be at most {VALIDATION.end - count}); lower seeds "
                          "are the held-out test seeds, which selection must never see")
