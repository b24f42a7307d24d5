"""Which metric of a run is judged, and which way it improves: the caller names them, or the log does.

Metric: ``--metric NAME`` (any key the log holds, slashes included; on a
Trainer state ``NAME`` may drop the ``eval_`` prefix, as
``metric_for_best_model`` does); a key the log does not mark as an eval is
allowed, with a note that it is a training-side value. Without a name: the
run's own metric where the log records it (a Trainer's
``metric_for_best_model``, :mod:`.trainer_state`); else the curve log's
``eval_score``; else the eval loss (``eval_loss``, ``val_loss``: the default of
transformers' ``metric_for_best_model`` and of Lightning's usual monitor); else
the run's only eval metric; else an error listing the eval metrics found.

Direction (``--mode``): ``min`` or ``max`` as given; ``auto`` takes the run's
own direction where the log records it (the extreme its ``best_metric`` is),
else the name rule of :func:`evalstop_gym.direction.mode_from_name` (loss,
wer, cer, perplexity, error: min; accuracy, f1, rouge, reward, score: max),
else an error asking for ``--mode``.
"""

from __future__ import annotations

from typing import NamedTuple

from ..direction import mode_from_name, words
from .record import LogError, RunLog

MODES = ("auto", "min", "max")
MIN_EVALS = 2
#: The training loss as the logs name it (transformers, the curve log, TRL's TensorBoard, Lightning).
TRAIN_LOSS_KEYS = ("loss", "train_loss", "train/loss", "train_loss_step", "train_loss_epoch")


def training_series(run: RunLog, keys) -> tuple | None:
    """``(steps, values)`` of the first of ``keys`` the run logs outside its evals, or None."""
    key = next((k for k in keys if k in run.series and k not in run.evals), None)
    return run.series[key] if key else None


class Choice(NamedTuple):
    """The metric and direction a run is judged on, and where each came from."""

    metric: str
    mode: str
    metric_from: str    # "given", "the run's own", "the eval loss", "the only eval metric", ...
    mode_from: str      # "given", "the run's own", "the name rule"
    note: str | None    # e.g. a training-side metric


def _listing(keys, limit: int = 12) -> str:
    keys = sorted(keys)
    shown = ", ".join(keys[:limit])
    return shown + (f" and {len(keys) - limit} more" if len(keys) > limit else "") if keys else "none"


def _find(run: RunLog, name: str) -> str:
    if name in run.series:
        return name
    if run.fmt == "trainer_state" and "eval_" + name in run.series:
        return "eval_" + name
    raise LogError(run.source, None, f"metric {name!r} not found; eval metrics: {_listing(run.evals)}; "
                                     f"other keys: {_listing(set(run.series) - set(run.evals))}")


def _default(run: RunLog) -> tuple[str, str]:
    if run.own_metric:
        return run.own_metric, "the run's own (best_metric)"
    if not run.evals:
        raise LogError(run.source, None, f"no eval rows; keys logged: {_listing(run.series)} "
                                         "(judge one with --metric NAME)")
    if "eval_score" in run.evals:
        return "eval_score", "the curve log's eval_score"
    losses = [k for k in run.evals if "loss" in words(k)]
    if len(losses) >= 1:
        exact = [k for k in losses if k in ("eval_loss", "val_loss", "eval/loss", "val/loss")]
        return (exact or sorted(losses, key=len))[0], "the eval loss, the usual default"
    if len(run.evals) == 1:
        return run.evals[0], "the only eval metric"
    raise LogError(run.source, None, f"several eval metrics and none chosen by the run: {_listing(run.evals)} "
                                     "(name one with --metric)")


def choose(run: RunLog, metric: str | None = None, mode: str = "auto") -> Choice:
    """The :class:`Choice` for ``run`` (module docstring); a :class:`LogError` in one line when there is
    none, or when the chosen metric has fewer than 2 evals."""
    if mode not in MODES:
        from ..config import ConfigError
        raise ConfigError("mode", mode, f"must be one of {', '.join(MODES)}")
    if metric is not None:
        key, metric_from = _find(run, metric), "given"
    else:
        key, metric_from = _default(run)
    note = None if key in run.evals else f"{key} is a training-side value, not an eval"
    n = run.series[key][0].size
    if n < MIN_EVALS:
        raise LogError(run.source, None, f"{n} eval{'s' if n != 1 else ''} of {key}; at least {MIN_EVALS} "
                                         "are needed to judge a stop")
    if mode != "auto":
        return Choice(key, mode, metric_from, "given", note)
    if key == run.own_metric and run.own_mode:
        return Choice(key, run.own_mode, metric_from, "the run's own (best_metric)", note)
    by_name = mode_from_name(key)
    if by_name is None:
        raise LogError(run.source, None, f"cannot tell from its name which way {key} improves: "
                                         "give --mode min or --mode max")
    return Choice(key, by_name, metric_from, "the name rule", note)
