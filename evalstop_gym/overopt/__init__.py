"""A tiny *real* reward-overoptimization generator (needs torch; CPU, about a second per run).

A bandit policy is optimized by policy gradient against a proxy reward model
that was trained on a limited set of preference pairs labelled by a gold
reward; its exact expected gold score, proxy reward, KL to the initial policy
and loss are logged in the curve-log format of :mod:`evalstop_gym.curvelog`.
With few pairs and no KL penalty gold genuinely peaks and declines; with many
pairs or a KL penalty it does not. See :mod:`evalstop_gym.overopt.bandit` for
the model and :func:`generate_library` for a curve library.

The simulator core never imports this package.
"""

from .bandit import GOLD_AT_PI0, RunSettings, run
from .library import DEFAULT_GRID, generate_library, library_settings

__all__ = ["RunSettings", "run", "GOLD_AT_PI0", "DEFAULT_GRID", "generate_library", "library_settings"]
