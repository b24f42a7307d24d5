"""Ray Tune: a registered stopper as a Tune ``Stopper`` and as a ``TrialScheduler``.

Both read, from each result a trial reports, the eval ``metric`` and, when
named, ``loss_metric``, ``proxy_metric`` and the eval-set size
``eval_items``; progress is ``result[time_attr] / max_t`` when ``max_t`` is
given (as for Tune's ASHA), else unknown. A result without ``metric`` is not
an eval and is never judged. Both keep one
:class:`~evalstop_gym.integrations.live.LiveStopper` for every trial of the
run, keyed by trial id: the platform form, in which a noise-aware detector
pools its noise estimate over the trials (so its decisions depend on the order
Tune delivers the results; ``live.arrivals()`` records it for
:func:`~evalstop_gym.integrations.replay.replay_runs`).

- :class:`TuneStopper`: ``RunConfig(stop=TuneStopper("eval_reward"))``. Tune
  ends a trial when ``__call__(trial_id, result)`` is True.
- :class:`EvalStopScheduler`: ``TuneConfig(scheduler=EvalStopScheduler(...))``,
  FIFO order plus ``STOP`` on a stop, so the trial's resources go to the next
  pending trial (many tenants' trials on one Ray cluster).

``mode`` is ``max``, ``min`` or ``auto`` (from the metric's name); a NaN or
infinite score follows ``on_nonfinite``
(:data:`~evalstop_gym.integrations.live.NONFINITE`, default ``"stop"``: the
trial stops, the experiment goes on). A result whose ``time_attr`` is not after
the trial's last judged one (a trial restarted from an earlier checkpoint
reports those iterations again) is not counted twice.

State that survives: :class:`EvalStopScheduler` implements the scheduler's
``save`` / ``restore`` and saves itself after every judged result into the
experiment's directory (``evalstop_scheduler.json``, synced with Tune's own
experiment state), and restores from it when ``Tuner.restore`` adds the
experiment's trials back, so a restored experiment stops each trial where the
uninterrupted one would. :class:`TuneStopper` needs no file: Tune keeps the
``RunConfig(stop=...)`` object in its experiment state (pickled with the
controller's state) and puts it back on restore, and a
:class:`~evalstop_gym.integrations.live.LiveStopper` pickles as its
:meth:`~evalstop_gym.integrations.live.LiveStopper.state`.

The best checkpoint of each trial (its best eval, the one before the
declines) is Tune's to keep: ``CheckpointConfig(checkpoint_score_attribute=metric,
checkpoint_score_order=mode, num_to_keep=1)`` keeps the checkpoint reported
with the highest (``min``: lowest) score, and ``result.best_checkpoints`` of
the trial's :class:`ray.tune.Result` gives it. Report the metric with every
checkpoint: Ray 2.60's checkpoint manager puts a checkpoint without it at the
top of its ranking, so ``num_to_keep`` deletes the best one (in either order),
and no Tune hook lets an adapter change the metrics a checkpoint was saved with.
A checkpoint result without the metric gets a warning naming the safe recipe:
``num_to_keep=None`` and ``result.get_best_checkpoint(metric, mode)``, which
passes over checkpoints without the metric. On
equal scores Tune keeps the latest checkpoint where ``LiveStopper.best`` names
the first. Needs the ``ray`` extra.
"""

from __future__ import annotations

import json
import os
import warnings
from typing import Hashable

from ..config import ConfigError, check_range
from ..extras import missing_extra
from .live import MODES, LiveStopper

try:
    from ray.tune import Stopper
    from ray.tune.schedulers import FIFOScheduler, TrialScheduler
except ModuleNotFoundError as e:
    raise missing_extra(e, "evalstop_gym.integrations.TuneStopper") from None


STATE_FILE = "evalstop_scheduler.json"


def check_mode(mode: str | None) -> None:
    """``mode`` must be None (set later), ``max``, ``min`` or ``auto``."""
    if mode is not None and mode not in (*MODES, "auto"):
        raise ConfigError("mode", mode, f"must be one of {', '.join(MODES)} or auto")


class ResultReader:
    """Feeds Tune results to a shared :class:`LiveStopper` (the options of the module docstring)."""

    def __init__(self, metric: str | None, stopper: str, mode: str | None, *, eval_items: int = 0,
                 loss_metric: str | None = None, proxy_metric: str | None = None, max_t: float | None = None,
                 time_attr: str = "training_iteration", live: LiveStopper | None = None, **params):
        check_mode(mode)
        check_range("eval_items", eval_items, 0, integer=True)
        if max_t is not None:
            check_range("max_t", max_t, 0, lo_open=True)
        if live is not None and params:
            raise ConfigError("params", params, "must be empty when a shared live stopper is given")
        self.metric, self.mode, self.stopper, self.params, self.live = metric, mode, stopper, params, live
        self.eval_items, self.loss_metric, self.proxy_metric = eval_items, loss_metric, proxy_metric
        self.max_t, self.time_attr = max_t, time_attr
        self._warned = False
        if metric is not None and live is None:
            self._live()   # a bad stopper name or parameter fails here, not at the first result
        if max_t is not None and self.live is not None:
            self.live.warn_if_short(int(max_t) - 1)   # one eval per unit of time_attr at most; the last not judged

    def _live(self) -> LiveStopper:
        """The shared live stopper, made once the metric is known."""
        if self.live is None:
            self.live = LiveStopper(self.stopper, mode=self.mode or "auto", metric=self.metric, **self.params)
        return self.live

    def judge(self, key: Hashable, result: dict) -> bool:
        """True if the trial ``key`` should stop after ``result``."""
        if self.metric is None:
            raise ConfigError("metric", None, "must be given (here or as TuneConfig(metric=...))")
        live = self._live()
        if live.ended(key):
            return live.stopped(key)   # results after the end of a run change nothing
        if result.get(self.metric) is None:
            if result.get("checkpoint_dir_name") and not self._warned:
                self._warned = True
                warnings.warn(f"trial {key} reported a checkpoint without {self.metric!r}: with num_to_keep set, "
                              f"Tune ranks it above the others and deletes the best one; report {self.metric!r} "
                              f"with every checkpoint, or keep every checkpoint (num_to_keep=None) and take "
                              f"result.get_best_checkpoint({self.metric!r}, mode)", stacklevel=2)
            return False
        progress = None
        if self.max_t is not None and result.get(self.time_attr) is not None:
            progress = min(result[self.time_attr] / self.max_t, 1.0)
        return live.update(key, result[self.metric], eval_items=self.eval_items,
                           loss=result.get(self.loss_metric) if self.loss_metric else None,
                           proxy=result.get(self.proxy_metric) if self.proxy_metric else None,
                           progress=progress, step=result.get(self.time_attr))


class TuneStopper(Stopper):
    """A Tune ``Stopper`` ending each trial when the stopper ``stopper`` (with ``params``) says so."""

    def __init__(self, metric: str, stopper: str = "evalstop", mode: str = "auto", **options):
        self.reader = ResultReader(metric, stopper, mode, **options)

    @property
    def live(self) -> LiveStopper:
        return self.reader.live

    def __call__(self, trial_id: str, result: dict) -> bool:
        return self.reader.judge(trial_id, result)

    def stop_all(self) -> bool:
        return False


class EvalStopScheduler(FIFOScheduler):
    """FIFO trial scheduling that returns ``STOP`` for a trial the stopper ``stopper`` stops.

    ``metric`` and ``mode`` may instead come from ``TuneConfig(metric=..., mode=...)``.
    """

    # every eval is judged in order: Tune must not hand over several results at once
    _supports_buffered_results = False

    def __init__(self, metric: str | None = None, stopper: str = "evalstop", mode: str | None = None, **options):
        super().__init__()
        self._metric, self._mode = metric, mode
        self._dir: str | None = None   # the experiment's directory on the driver, where the state is saved
        self.reader = ResultReader(metric, stopper, mode, **options)

    @property
    def live(self) -> LiveStopper | None:
        return self.reader.live

    def set_search_properties(self, metric: str | None, mode: str | None, **spec) -> bool:
        if (self._metric and metric and metric != self._metric) or (self._mode and mode and mode != self._mode):
            return False
        check_mode(mode)
        self._metric, self._mode = self._metric or metric, self._mode or mode
        self.reader.metric, self.reader.mode = self._metric, self._mode
        return True

    def on_trial_add(self, tune_controller, trial) -> None:
        super().on_trial_add(tune_controller, trial)
        if self._dir is None:   # the first trial names the experiment; a restored one brings the saved state
            self._dir = trial.storage.experiment_driver_staging_path
            path = os.path.join(self._dir, STATE_FILE)
            if os.path.exists(path):
                self.restore(path)

    def on_trial_result(self, tune_controller, trial, result: dict) -> str:
        stop = self.reader.judge(trial.trial_id, result)
        if self._dir is not None:
            self.save(os.path.join(self._dir, STATE_FILE))
        return TrialScheduler.STOP if stop else TrialScheduler.CONTINUE

    def save(self, checkpoint_path: str) -> None:
        """Write the scheduler's state (every judged eval) to ``checkpoint_path``, whole or not at all."""
        live = self.reader.live
        state = {"metric": self.reader.metric, "live": None if live is None else live.state()}
        os.makedirs(os.path.dirname(os.path.abspath(checkpoint_path)), exist_ok=True)
        with open(checkpoint_path + ".tmp", "w") as f:
            json.dump(state, f)
        os.replace(checkpoint_path + ".tmp", checkpoint_path)

    def restore(self, checkpoint_path: str) -> None:
        """Take back a :meth:`save` of a scheduler of the same configuration (a fresh one: nothing judged yet)."""
        with open(checkpoint_path) as f:
            state = json.load(f)
        if state["metric"] != self.reader.metric:
            raise ConfigError("metric", self.reader.metric, f"differs from the saved scheduler's {state['metric']!r} "
                                                            f"({checkpoint_path})")
        if state["live"] is not None:
            self.reader._live().restore(state["live"])

    def debug_string(self) -> str:
        return f"Using FIFO scheduling with the {self.reader.stopper!r} stop rule."
