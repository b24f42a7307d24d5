"""Which workload seeds each stage plays: the package's declaration, :mod:`evalstop_gym.seeds`.

Kept so the learned layer's imports (``from .seeds import VALIDATION_FIRST``) keep working.
"""

from evalstop_gym.seeds import (TEST_SEEDS_END, TRAIN_BLOCK, VALIDATION_END, VALIDATION_FIRST,  # noqa: F401
                                check_test_seeds, check_validation_seeds, train_first)
