"""Bad input: the error types, the range check, and the job types and size limits inputs are checked against.

The bottom of the package: it imports nothing of it, so :mod:`evalstop_gym.config`
and :mod:`evalstop_gym.cluster` both build on it without importing each other in a
circle. ``evalstop_gym.config`` re-exports every name here.
"""

from __future__ import annotations

import math
from typing import Any

JOB_TYPES = ("lora", "dpo", "rlhf")

# Size limits (docs/reliability.md): far beyond any real cluster or trace, low enough that an
# absurd request is refused at once instead of exhausting memory or overflowing int64 / float.
# Times are bounded by timebase.MAX_HOURS.
MAX_GPUS = 1_000_000           # GPUs of a cluster, or of one job
MAX_JOBS = 2_000_000           # jobs in one workload
MAX_EVAL_CELLS = 20_000_000    # jobs x eval checkpoints: the hidden curves' size (about 0.6 GB)


class ConfigError(ValueError):
    """A configuration value is out of range: names the field, value and what is allowed."""

    def __init__(self, field_name: str, value: Any, allowed: str):
        self.field = field_name
        self.value = value
        self.allowed = allowed
        super().__init__(f"{field_name}={value!r} is invalid: {allowed}")

    def __reduce__(self):   # raised in a worker process, re-raised in the parent as it was
        return type(self), (self.field, self.value, self.allowed)


class UsageError(ValueError):
    """Bad command-line input that is not a config field (paths, names, ...): one line, exit 2."""


def check_range(name: str, value: Any, lo: float | None = None, hi: float | None = None,
                *, lo_open: bool = False, integer: bool = False) -> None:
    """Raise :class:`ConfigError` unless ``value`` is a finite number in the range."""
    kind = "an integer" if integer else "a number"
    # an integer of hundreds of digits is refused before math.isfinite, which cannot make it a float
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            integer and not isinstance(value, int)) or (isinstance(value, int) and abs(value) > 2**63) or (
            not math.isfinite(value)):
        raise ConfigError(name, value, f"must be {kind}{_range_text(lo, hi, lo_open)}")
    if (lo is not None and (value <= lo if lo_open else value < lo)) or (hi is not None and value > hi):
        raise ConfigError(name, value, f"must be {kind}{_range_text(lo, hi, lo_open)}")


def check_pair(name: str, value: Any, lo_open: bool = False) -> None:
    """Raise :class:`ConfigError` unless ``value`` is a ``(low, high)`` pair with ``0 <= low <= high``
    (``0 < low`` with ``lo_open``)."""
    if not isinstance(value, tuple) or len(value) != 2:
        raise ConfigError(name, value, "must be a (low, high) pair")
    check_range(name, value[0], 0.0, lo_open=lo_open)
    check_range(name, value[1], value[0])


def check_ranges(model: Any, section: str, ranges: dict[str, tuple[float, float]]) -> None:
    """Every field of ``model`` named in ``ranges`` (a number, or each item of a tuple of numbers) in its
    ``[low, high]``; :class:`ConfigError` naming ``section.field`` otherwise. ``None`` (a knob left off) passes."""
    for name, (lo, hi) in ranges.items():
        value = getattr(model, name)
        for v in (value if isinstance(value, tuple) else () if value is None else (value,)):
            check_range(f"{section}.{name}", v, lo, hi)


def _range_text(lo, hi, lo_open) -> str:
    if lo is not None and hi is not None:
        return f" in {'(' if lo_open else '['}{lo}, {hi}]"
    if lo is not None:
        return f" {'>' if lo_open else '>='} {lo}"
    if hi is not None:
        return f" <= {hi}"
    return ""
