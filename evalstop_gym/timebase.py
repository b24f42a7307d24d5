"""The simulator's exact time base: integer ticks of one millisecond.

Inside the simulator every instant and every duration is an integer number of
ticks, and every event time is computed from integers (a checkpoint from the
job's remaining work, a completion from its length), never accumulated in
floating point. Two events of the same millisecond are therefore one instant
and form one scheduling point, whatever path led to them. Hours appear only at
the boundary: workloads are specified in hours and rounded to the nearest tick
once (:func:`to_ticks`); views, metrics and environments read hours computed as
``ticks / TICKS_PER_HOUR``.

One millisecond resolves every recorded time of the public cluster traces
(they record whole seconds) and is far below any modelled duration (evals and
restarts take seconds to minutes). Times are bounded by :data:`MAX_HOURS` so
tick counts stay exact in 64-bit integers and in float hours.
"""

from __future__ import annotations

import math

import numpy as np

TICKS_PER_HOUR = 3_600_000  # one tick = 1 ms
MAX_HOURS = 1e6             # about 114 years; 3.6e12 ticks, exact in int64 and in float64


def to_ticks(hours: np.ndarray) -> np.ndarray:
    """Hours (array) -> nearest integer ticks (int64). Callers bound ``hours`` first."""
    return np.rint(np.asarray(hours, dtype=float) * TICKS_PER_HOUR).astype(np.int64)


def ceil_ticks(hours: float) -> int:
    """The first tick at or after ``hours`` (for timers: a wake-up never comes early)."""
    return math.ceil(hours * TICKS_PER_HOUR)


def to_hours(ticks):
    """Ticks (int or int array) -> hours (float or float array)."""
    return ticks / TICKS_PER_HOUR
