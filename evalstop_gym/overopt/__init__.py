"""A tiny *real* over-optimisation generator: a small causal transformer language model tuned by RLHF
(RLOO against a learned reward model) or by DPO, on a synthetic task with a known gold scorer (needs torch;
CPU, seconds per run).

With few preference pairs and little KL regularisation the policy exploits the
proxy: proxy reward rises while the gold score peaks and declines; with many
pairs and a KL penalty it does not. :mod:`.task` is the task and its gold
scorer, :mod:`.lm` the transformer, :mod:`.rlhf` one run, :mod:`.library` a
resumable curve library over a grid of knobs.

The simulator core never imports this package.
"""

from .library import DEFAULT_GRID, DPO_GRID, RLHF_GRID, generate_library, library_settings
from .rlhf import METHODS, RunSettings, run

__all__ = ["RunSettings", "run", "METHODS", "DEFAULT_GRID", "RLHF_GRID", "DPO_GRID", "generate_library",
           "library_settings"]
