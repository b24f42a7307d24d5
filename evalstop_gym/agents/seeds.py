"""Which workload seeds each stage plays: training, validation and held-out test seeds never overlap.

* **test** (held-out): seeds ``0 .. TEST_SEEDS_END - 1``. ``evaluate``, ``reproduce``
  and the examples play these (``reproduce`` defaults to 0-9); nothing trains
  or selects models on them.
* **validation**: ``VALIDATION_FIRST .. VALIDATION_END - 1``; model selection by the
  EvalCallback, and the choice of the best hand-coded policies that learned ones
  are judged against (:mod:`evalstop_gym.agents.selection`).
* **training**: run seed ``s``, env rank ``r`` of ``n`` plays episode ``i`` on
  ``TRAIN_BLOCK * (s + 1) + r + n * i``, a block of its own per run seed.
"""

from __future__ import annotations

from evalstop_gym.config import ConfigError

TEST_SEEDS_END = 900_000
VALIDATION_FIRST = 900_000
TRAIN_BLOCK = 10_000_000
VALIDATION_END = TRAIN_BLOCK   # the first training seed (run seed 0, rank 0)


def train_first(run_seed: int, rank: int) -> int:
    """Workload seed of the first training episode of env ``rank``."""
    return TRAIN_BLOCK * (run_seed + 1) + rank


def check_test_seeds(first: int, count: int) -> None:
    """Raise :class:`ConfigError` unless ``first .. first + count - 1`` are held-out test seeds."""
    if first < 0 or first + count > TEST_SEEDS_END:
        raise ConfigError("seed", first, f"held-out test seeds are 0..{TEST_SEEDS_END - 1} (with --seeds {count} "
                          f"the first may be at most {TEST_SEEDS_END - count}); higher seeds are used for "
                          "validation and training")


def check_validation_seeds(first: int, count: int) -> None:
    """Raise :class:`ConfigError` unless ``first .. first + count - 1`` are validation seeds."""
    if first < VALIDATION_FIRST or first + count > VALIDATION_END:
        raise ConfigError("validation_seed", first, f"validation seeds are {VALIDATION_FIRST}..{VALIDATION_END - 1} "
                          f"(with {count} seeds the first may be at most {VALIDATION_END - count}); lower seeds are "
                          "the held-out test seeds, which selection must never see")
