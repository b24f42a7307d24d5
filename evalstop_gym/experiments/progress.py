"""Progress on stderr for commands that run longer than a few seconds: done / total, rate and ETA (tqdm).

Off when asked (``--quiet``) and whenever stderr is not a terminal (a log file, a pipe, CI), so what a
command writes to files and to stdout never depends on it.
"""

from __future__ import annotations

import sys
from typing import Any, Iterable


def progress_bar(total: int | None, desc: str, unit: str = "it", enabled: bool = True,
                 iterable: Iterable | None = None) -> Any:
    """A tqdm bar on stderr (``update(n)``, a context manager; iterating it iterates ``iterable``), disabled
    unless ``enabled`` and stderr is a terminal. Without tqdm (an install without the ``experiments`` extra)
    there is no bar: the command runs the same without one."""
    try:
        from tqdm import tqdm
    except ModuleNotFoundError:
        return _NoBar(iterable)

    # disable=None: tqdm turns itself off when the stream is not a terminal
    return tqdm(iterable, total=total, desc=desc, unit=unit, file=sys.stderr, disable=None if enabled else True,
                dynamic_ncols=True)


class _NoBar:
    """What a bar does when there is none: iterate, count nothing."""

    def __init__(self, iterable: Iterable | None):
        self.iterable = iterable

    def __iter__(self):
        return iter(self.iterable or ())

    def update(self, n: int = 1) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass
