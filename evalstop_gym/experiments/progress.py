"""Progress on stderr for commands that run longer than a few seconds: done / total, rate and ETA (tqdm).

Off when asked (``--quiet``) and whenever stderr is not a terminal (a log file, a pipe, CI), so what a
command writes to files and to stdout never depends on it.
"""

from __future__ import annotations

import sys
from typing import Any


def progress_bar(total: int, desc: str, unit: str = "it", enabled: bool = True) -> Any:
    """A tqdm bar on stderr (``update(n)``, a context manager), disabled unless ``enabled`` and stderr is a
    terminal. Needs tqdm (the ``experiments`` extra)."""
    from tqdm import tqdm

    # disable=None: tqdm turns itself off when the stream is not a terminal
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, disable=None if enabled else True,
                dynamic_ncols=True)
