"""Which workload seeds each stage plays: training, validation and held-out test seeds never overlap.

* **test** (held-out): seeds ``0 .. TEST_SEEDS_END - 1``. ``evaluate``, ``reproduce``
  and the examples play these (``reproduce`` defaults to 0-9); nothing trains
  or selects models on them.
* **validation** (model selection by the EvalCallback): ``VALIDATION_FIRST + i``.
* **training**: run seed ``s``, env rank ``r`` of ``n`` plays episode ``i`` on
  ``TRAIN_BLOCK * (s + 1) + r + n * i``, a block of its own per run seed.
"""

from __future__ import annotations

from evalstop_gym.config import ConfigError

TEST_SEEDS_END = 900_000
VALIDATION_FIRST = 900_000
TRAIN_BLOCK = 10_000_000


def train_first(run_seed: int, rank: int) -> int:
    """Workload seed of the first training episode of env ``rank``."""
    return TRAIN_BLOCK * (run_seed + 1) + rank


def check_test_seeds(first: int, count: int) -> None:
    """Raise :class:`ConfigError` unless ``first .. first + count - 1`` are held-out test seeds."""
    if first < 0 or first + count > TEST_SEEDS_END:
        raise ConfigError("seed", first, f"held-out test seeds are 0..{TEST_SEEDS_END - 1} (with --seeds {count} "
                          f"the first may be at most {TEST_SEEDS_END - count}); higher seeds are used for "
                          "validation and training")
