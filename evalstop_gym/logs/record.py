"""The record every log reader returns (:class:`RunLog`), the error every refusal is (:class:`LogError`), and
what the readers share."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..curvelog import CurveLogError

LFS_HEADER = b"version https://git-lfs.github.com/spec/v1"


class LogError(CurveLogError):
    """A log that cannot be read or judged: names the file and why, in one line."""


@dataclass(frozen=True)
class RunLog:
    """One run of a training log.

    ``series`` maps every numeric key the log holds to ``(steps, values)``
    (steps ascending and unique, values finite); ``evals`` are the keys the
    log marks as evaluations (``eval_*`` of a Trainer, ``val*`` of Lightning,
    every reported metric of a Tune trial); ``own_metric`` / ``own_mode`` are
    the metric and direction the run itself selected on, where the log records
    them (a Trainer's ``best_metric`` at ``best_model_checkpoint``);
    ``max_steps`` is the planned length in steps where known.
    """

    name: str
    source: str
    fmt: str
    series: dict[str, tuple[np.ndarray, np.ndarray]]
    evals: tuple[str, ...]
    own_metric: str | None = None
    own_mode: str | None = None
    max_steps: float | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def curve(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """``(steps, values)`` of ``key``."""
        return self.series[key]


def series_from_rows(rows: dict[float, dict[str, float]]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{key: (steps, values)}`` from ``{step: {key: value}}`` (finite values only, steps ascending)."""
    out: dict[str, tuple[list, list]] = {}
    for step in sorted(rows):
        for k, v in rows[step].items():
            if v is not None and np.isfinite(v):
                s, vals = out.setdefault(k, ([], []))
                s.append(step)
                vals.append(v)
    return {k: (np.asarray(s, dtype=float), np.asarray(v, dtype=float)) for k, (s, v) in out.items()}


def check_not_lfs(path: str) -> None:
    """Refuse a Git LFS pointer file (the log itself was never pulled), and anything that is not a regular
    file (:func:`evalstop_gym.files.open_binary`: a FIFO is refused at once, never waited on)."""
    from ..files import open_binary

    with open_binary(path, LogError, "log") as f:
        if f.read(len(LFS_HEADER)) == LFS_HEADER:
            raise LogError(path, None, "a Git LFS pointer, not the log: run `git lfs pull`")
