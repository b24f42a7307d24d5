"""Any log as the simulator's :class:`~evalstop_gym.curvelog.LoggedRun`, on one chosen metric.

:func:`read_runs` reads every log :func:`evalstop_gym.logs.read_logs` reads (a
folder or a glob is many runs) and makes each run a ``LoggedRun`` on the metric
and direction of :func:`evalstop_gym.logs.metric.choose`: ``eval_score`` is
that metric, negated for a lower-is-better one (the simulator's scores improve
upwards); ``train_loss`` the training loss; ``proxy_reward`` the curve log's,
or GRPO / RLOO's ``reward``, DPO's ``rewards/margins``, TRL's
``objective/scores``; ``gold`` the log's ``gold`` / ``eval_gold``; ``kl`` its
``eval_kl``, else the ``kl`` GRPO and RLOO log while training, else TRL's
``objective/kl``; ``eval_items`` the eval's n where logged. The ``LoggedRun``
keeps the metric and mode it was read on.
"""

from __future__ import annotations

import math
import os

import numpy as np

from ..curvelog import PROXY_KEYS, CurveLogError, LoggedRun
from . import read_logs
from .metric import TRAIN_LOSS_KEYS, choose, training_series
from .record import LogError

KL_KEYS = ("eval_kl", "kl", "objective/kl")
GOLD_KEYS = ("gold", "eval_gold")


def logged_run(run, choice) -> LoggedRun:
    """A :class:`~evalstop_gym.curvelog.LoggedRun` of a :class:`RunLog` on ``choice``'s metric (module
    docstring)."""
    sign = 1.0 if choice.mode == "max" else -1.0
    columns = {"eval_score": (run.series[choice.metric][0], sign * run.series[choice.metric][1])}
    for column, keys in (("train_loss", TRAIN_LOSS_KEYS), ("proxy_reward", ("proxy_reward", *PROXY_KEYS))):
        got = training_series(run, keys)
        if got is not None:
            columns[column] = got
    for column, keys in (("gold", GOLD_KEYS), ("kl", KL_KEYS), ("eval_items", ("eval_items",))):
        key = next((k for k in keys if k in run.series), None)
        if key is not None:
            columns[column] = run.series[key]
    steps = np.unique(np.concatenate([s for s, _ in columns.values()]))

    def on_steps(s, v):
        out = np.full(steps.size, math.nan)
        out[np.searchsorted(steps, s)] = v
        return out

    full = {c: on_steps(*sv) for c, sv in columns.items()}
    empty = np.full(steps.size, math.nan)
    return LoggedRun(name=run.name, step=steps, eval_score=full.pop("eval_score"),
                     train_loss=full.pop("train_loss", empty), proxy_reward=full.pop("proxy_reward", empty),
                     extra=full, metric=choice.metric, mode=choice.mode)


def read_runs(paths, metric: str | None = None, mode: str = "auto", skipped=None) -> dict[str, LoggedRun]:
    """``{run name: LoggedRun}`` of every run under ``paths`` (files, folders, globs) on the metric and mode of
    :func:`evalstop_gym.logs.metric.choose` (module docstring). Each log refused is appended to ``skipped``
    (a list) as a one-line :class:`~evalstop_gym.logs.LogError`; with no run left, the refusal is the error
    (the only one, or a count and the first)."""
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    logs, refused = read_logs(paths)
    runs: dict[str, LoggedRun] = {}
    for r in logs:
        try:
            runs[r.name] = logged_run(r, choose(r, metric, mode))
        except LogError as e:
            refused.append(e)
    if skipped is not None:
        skipped.extend(refused)
    if not runs:
        if len(refused) == 1:
            raise refused[0]
        first = f"; the first: {refused[0]}" if refused else ""
        raise CurveLogError(", ".join(map(os.fspath, paths)), None,
                            f"no run to use ({len(refused)} logs refused{first})")
    return runs
