"""transformers / TRL callbacks: stop a run by a registered stopper, keep its best checkpoint, log its curve.

:class:`CurveLogger` writes the run's history in the curve-log format of
:mod:`evalstop_gym.curvelog` (one row per logged step: ``job``, ``step``,
``eval_score``, ``train_loss``, ``proxy_reward`` and extra columns), so a real
run replays in the simulator (``--curves``, :func:`~evalstop_gym.curvelog.apply_curve_log`).

:class:`EvalStopCallback` sees, at each evaluation (``on_evaluate``), the eval
metrics the Trainer computed; it hands the watched metric, the latest training
loss, an optional proxy reward and the progress ``global_step / max_steps`` to
a :class:`~evalstop_gym.integrations.live.LiveStopper` and, on a stop, sets
``control.should_training_stop``. The eval at the last step is recorded but
not judged (the run ends anyway), as in the simulator.

The best checkpoint (the best eval so far, the one before the declines) is
kept where the Trainer saves checkpoints: the callback writes its step into
``state.best_global_step``, so the Trainer's checkpoint rotation
(``save_total_limit``) never deletes it and ``load_best_model_at_end`` loads it;
and it writes ``evalstop.json`` in ``output_dir`` (the evals, the stop, the best
step, score and checkpoint directory, and the stopper's state), replacing the
file whole at each write. A checkpoint exists for an eval only if the Trainer
saves at that step (``save_steps`` dividing ``eval_steps``): at setup a
misaligned pair is warned about with its fix, and a best eval without a
checkpoint names ``nearest_checkpoint``, the saved one closest to it, as such.
If ``metric_for_best_model`` is set it must name the same metric in the same
direction, since the Trainer then keeps the best itself. A ``metric`` the evals
do not report is a :class:`~evalstop_gym.config.ConfigError` listing the keys
found: at setup for a resumed run (its ``log_history`` holds its evals), else
at the first eval, before anything is recorded (a callback sees no
``compute_metrics`` before training).

State that survives (resume): the callback is transformers'
``ExportableState``; every checkpoint's ``trainer_state.json`` holds its state,
restored with ``restore_callback_states_from_checkpoint=True`` (the Trainer
then builds a new callback object: read it from ``trainer.callback_handler``
or from ``evalstop.json``). With or without that flag a resumed run also reads
``output_dir/evalstop.json``, the latest record (written after every eval), and
continues from it; an eval the resumed run repeats (its step already recorded)
is not counted twice. A relaunched run that was already stopped stops at once:
the Trainer cannot skip its first step, so the callback drops that step's
gradients before the optimizer step and cancels its log, eval and save; the
weights, the checkpoints and the record stay as they were. A shared ``live``
stopper is the caller's to save and restore (:meth:`LiveStopper.state`).

Several processes (``torchrun``, DDP): every rank runs the callback; at each
eval the ranks take process 0's score, loss and proxy (accelerate's broadcast), so each
rank's stopper sees the same history and stops at the same eval; only process 0
writes ``evalstop.json``.

A NaN or infinite score follows ``on_nonfinite``
(:data:`~evalstop_gym.integrations.live.NONFINITE`, default ``"stop"``: the run
stops and keeps its best finite checkpoint).

TRL's trainers (``GRPOTrainer``, ``RLOOTrainer``, ``DPOTrainer``) subclass
``Trainer`` and take ``callbacks=[...]`` alike. Needs the ``live`` extra.
"""

from __future__ import annotations

import csv
import difflib
import json
import math
import os
import warnings
from typing import Hashable

from ..config import ConfigError
from ..curvelog import CURVE_COLUMNS
from ..extras import missing_extra
from .live import DEFAULT_NONFINITE, LiveStopper

try:
    from transformers import TrainerCallback
    from transformers.trainer_callback import ExportableState
except ModuleNotFoundError as e:
    raise missing_extra(e, "evalstop_gym.integrations.EvalStopCallback") from None

RECORD = "evalstop.json"
CHECKPOINT_PREFIX = "checkpoint"   # transformers' PREFIX_CHECKPOINT_DIR


def _metric_key(metric: str, metrics, where: str = "the eval metrics") -> str:
    """The key of ``metric`` in the Trainer's eval metrics (which prefix ``eval_``), or :class:`ConfigError`
    listing the keys found in ``where``."""
    for key in (metric, f"eval_{metric}"):
        if key in metrics:
            return key
    close = difflib.get_close_matches(metric, list(metrics), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ConfigError("metric", metric, f"is not among {where} ({', '.join(sorted(metrics)) or 'none'}){hint}")


def logged_eval_keys(log_history: list) -> set:
    """Every key of the evals in the Trainer's ``log_history`` (entries with an ``eval_`` key)."""
    keys: set = set()
    for entry in log_history:
        if any(k.startswith("eval_") for k in entry):
            keys.update(entry)
    return keys


def latest_logged(name: str, log_history: list) -> float | None:
    """The latest value of ``name`` in the Trainer's ``log_history`` (None if never logged)."""
    for entry in reversed(log_history):
        if name in entry:
            return entry[name]
    return None


class EvalStopCallback(TrainerCallback, ExportableState):
    """Stop training when the stopper ``stopper`` (a name of ``STOPPERS``, with ``params``) says so.

    ``metric``: the eval metric watched (``eval_reward``; ``reward`` finds
    ``eval_reward`` too); ``mode``: ``max``, ``min`` (a loss) or ``auto`` (from
    the metric's name; a name that says neither is refused); ``eval_items``:
    the eval set's size when the metric is a proportion of items (0: unknown,
    the noise is then estimated from the scores); ``proxy_metric``: a logged
    proxy reward (TRL's ``reward``), read from the eval metrics or the training
    logs; ``on_nonfinite``: what a NaN or infinite score does (module
    docstring). ``live`` and ``job``: a :class:`LiveStopper` shared with other
    runs and this run's key in it (then ``stopper``, ``mode``, ``on_nonfinite``
    and ``params`` are the shared object's).
    """

    def __init__(self, stopper: str = "evalstop", metric: str = "eval_reward", mode: str = "auto", *,
                 eval_items: int = 0, proxy_metric: str | None = None, on_nonfinite: str = DEFAULT_NONFINITE,
                 live: LiveStopper | None = None, job: Hashable = "run", **params):
        if live is not None and params:
            raise ConfigError("params", params, "must be empty when a shared live stopper is given")
        self._shared = live is not None
        if live is None:
            live = LiveStopper(stopper, mode=mode, metric=metric, on_nonfinite=on_nonfinite, **params)
        self.live = live
        # what ExportableState rebuilds the callback from (mode resolved: no second warning)
        self._args = dict(stopper=stopper, metric=metric, mode=live.mode, eval_items=eval_items,
                          proxy_metric=proxy_metric, on_nonfinite=on_nonfinite, job=job, **params)
        self.metric, self.eval_items, self.proxy_metric, self.job = metric, eval_items, proxy_metric, job
        self.evals: list[dict] = []
        self.stopped_at: int | None = None
        self.best_checkpoint: str | None = None
        self._output_dir: str | None = None
        self._halted = False   # a relaunched stopped run: its one unavoidable step changes nothing

    # -- state that survives -------------------------------------------------------------
    def state(self) -> dict:
        return {"args": self._args, "attributes": {"history": self.history}}

    @property
    def history(self) -> dict | None:
        """What the callback has decided, as JSON data (None for a shared live stopper, the caller's to save)."""
        if self._shared:
            return None
        return {"live": self.live.state(), "evals": self.evals, "stopped_at": self.stopped_at}

    @history.setter
    def history(self, history: dict | None) -> None:
        if history is None or self._shared:
            return
        live = LiveStopper(self._args["stopper"], mode=self.live.mode, metric=self.metric,
                           on_nonfinite=self.live.on_nonfinite, **self.live.params)
        live.restore(history["live"])
        self.live, self.evals, self.stopped_at = live, list(history["evals"]), history["stopped_at"]

    # -- the Trainer's events --------------------------------------------------------------
    def on_train_begin(self, args, state, control, **kwargs):
        self._output_dir = args.output_dir
        mine = self.metric if self.metric.startswith("eval_") else f"eval_{self.metric}"
        theirs = args.metric_for_best_model
        if theirs is not None:
            theirs = theirs if theirs.startswith("eval_") else f"eval_{theirs}"
            if theirs != mine or bool(args.greater_is_better) != (self.live.mode == "max"):
                raise ConfigError("metric_for_best_model", args.metric_for_best_model,
                                  f"must be {mine!r} with greater_is_better={self.live.mode == 'max'} (the "
                                  f"metric EvalStopCallback watches) or None, so both keep the same best checkpoint")
        logged = logged_eval_keys(state.log_history)
        if logged:   # a resumed run: its own evals name the metrics, so a wrong name fails before training
            _metric_key(self.metric, logged, where="the eval metrics the run logged before this resume")
        self._warn_at_setup(args, state)
        if state.global_step > 0:   # resumed: the latest record knows at least what the checkpoint knew
            record = self._read_record()
            saved = (record or {}).get("history")
            if saved and len(saved["live"]["evals"]) >= len(self.live.state()["evals"]):
                self.history = saved
        if self.stopped_at is not None:
            self._halted = True
            control.should_training_stop = True

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        if self._halted and model is not None:
            for p in model.parameters():
                p.grad = None   # the optimizer skips a parameter without a gradient: the weights stay

    def on_step_end(self, args, state, control, **kwargs):
        if self._halted:
            control.should_training_stop = True
            control.should_log = control.should_evaluate = control.should_save = False

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if self._halted or self.stopped_at is not None:
            return
        metrics = metrics or {}
        step = state.global_step
        if self.live.repeated(self.job, step):
            return   # a step already judged: evaluated again after training, or repeated after a resume
        # the callback API shows no compute_metrics before training, so a fresh run's first eval is the first
        # place a wrong name shows (the Trainer's own metric_for_best_model check is no earlier)
        score = metrics[_metric_key(self.metric, metrics, where=f"the eval metrics at step {step}")]
        progress = min(step / state.max_steps, 1.0) if state.max_steps else None
        loss = latest_logged("loss", state.log_history)
        proxy = None
        if self.proxy_metric:   # an eval metric, else the training logs' latest (TRL logs ``reward`` there)
            proxy = metrics.get(self.proxy_metric, latest_logged(self.proxy_metric, state.log_history))
        score, loss, proxy = from_rank_zero([_plain(score), _plain(loss), _plain(proxy)])
        stop = self.live.update(self.job, score, eval_items=self.eval_items, loss=loss, proxy=proxy,
                                progress=progress, step=step)
        finite = isinstance(score, (int, float)) and math.isfinite(score)
        self.evals.append({"step": step, "score": float(score) if finite else None, "stop": stop})
        if len(self.live.view(self.job).eval_scores) and args.metric_for_best_model is None:
            best = self.live.best(self.job)   # else the Trainer tracks the same best itself
            state.best_global_step = int(best.step)
            state.best_metric = best.score
        if stop:
            self.stopped_at = step
            control.should_training_stop = True
        self._write(state)

    def on_save(self, args, state, control, **kwargs):
        self._write(state)

    def on_train_end(self, args, state, control, **kwargs):
        self._write(state)

    # -- internals ---------------------------------------------------------------------------
    def _warn_at_setup(self, args, state) -> None:
        """Warnings a run should get before it trains: a best eval that may have no checkpoint, a stopper that can
        never fire within the planned evals."""
        evals_by_steps = args.eval_strategy == "steps" and state.eval_steps
        if evals_by_steps and args.save_strategy == "steps" and state.eval_steps % state.save_steps:
            warnings.warn(f"eval_steps={state.eval_steps} is not a multiple of save_steps={state.save_steps}: evals "
                          f"between saves have no checkpoint, so the best eval may have none (evalstop.json then "
                          f"names the nearest saved one); set save_steps to a divisor of eval_steps", stacklevel=2)
        if getattr(args, "eval_on_start", False):
            warnings.warn("eval_on_start judges the initial model at step 0, which has no checkpoint: if it stays the "
                          "best, evalstop.json names the nearest saved checkpoint instead (save the initial model "
                          "yourself to keep it)", stacklevel=2)
        if evals_by_steps and state.max_steps:
            # the eval at the last step ends the run and is not judged
            self.live.warn_if_short((state.max_steps - 1) // state.eval_steps)

    def _read_record(self) -> dict | None:
        path = os.path.join(self._output_dir, RECORD)
        if not os.path.exists(path):
            return None
        with open(path) as f:
            record = json.load(f)
        same = (record.get("stopper"), record.get("metric"), record.get("job"))
        if same != (self.live.name, self.metric, self.job):
            return None   # another callback's record in the same output_dir
        return record

    def _write(self, state) -> None:
        if not self.evals or self._output_dir is None or not state.is_world_process_zero:
            return
        best_record = nearest = None
        if len(self.live.view(self.job).eval_scores):
            best = self.live.best(self.job)
            self.best_checkpoint, nearest = _checkpoint_at(self._output_dir, int(best.step))
            best_record = {"step": int(best.step), "score": best.score, "checkpoint": self.best_checkpoint}
            if self.best_checkpoint is None:
                best_record["nearest_checkpoint"] = nearest
        record = {"stopper": self.live.name, "metric": self.metric, "mode": self.live.mode, "job": self.job,
                  "evals": self.evals, "stopped_at_step": self.stopped_at, "best": best_record,
                  "history": self.history}
        os.makedirs(self._output_dir, exist_ok=True)
        path = os.path.join(self._output_dir, RECORD)
        with open(path + ".tmp", "w") as f:   # a whole file or the last one: a kill never leaves half a record
            json.dump(record, f, indent=1)
        os.replace(path + ".tmp", path)


def from_rank_zero(values: list) -> list:
    """``values`` as process 0 has them when the run has several processes (else unchanged): every rank then
    feeds its stopper the same eval and, the stoppers being deterministic, makes the same decision. Through
    accelerate, the Trainer's own process layer (torch.distributed, XLA)."""
    from accelerate import PartialState
    from accelerate.utils import broadcast_object_list

    if PartialState().num_processes == 1:
        return values
    return broadcast_object_list([values], from_process=0)[0]


def _plain(value):
    """A metric as a Python number (a numpy or torch scalar too), so it crosses processes as plain data."""
    return value.item() if hasattr(value, "item") else value


def _checkpoint_at(output_dir: str, step: int) -> tuple[str | None, str | None]:
    """``(checkpoint of step, None)`` if it exists, else ``(None, the saved checkpoint nearest to step)``
    (the earlier one on a tie; None if there is none)."""
    path = os.path.join(output_dir, f"{CHECKPOINT_PREFIX}-{step}")
    if os.path.isdir(path):
        return path, None
    saved = []
    for name in os.listdir(output_dir):
        prefix, _, number = name.partition("-")
        if prefix == CHECKPOINT_PREFIX and number.isdigit() and os.path.isdir(os.path.join(output_dir, name)):
            saved.append((abs(int(number) - step), int(number), os.path.join(output_dir, name)))
    return None, (min(saved)[2] if saved else None)


class CurveLogger(TrainerCallback):
    """Append the run's logged history to the curve log ``path`` (``.csv`` or ``.jsonl``) as run ``job``.

    Every ``on_log`` of the Trainer fills the row of its step: ``eval_score``
    from the eval metric ``metric``, ``train_loss`` from the training log's
    ``loss``, ``proxy_reward`` from ``proxy_metric`` (TRL's ``reward``) and
    each extra column ``name`` from the log key ``extra[name]`` (e.g.
    ``{"kl": "kl"}``). A row is written once its step is over, so a run killed
    mid-way leaves every finished step in the file. A run starting at step 0
    writes a row for step 0, so the run's progress maps onto the simulator's
    checkpoint grid from the start (replay stretches ``first .. last step``
    onto it). Several runs may share one file (distinct ``job`` names); a CSV
    that exists must have the same columns.
    """

    def __init__(self, path, job: str = "run", metric: str = "eval_reward", *, proxy_metric: str | None = None,
                 extra: dict[str, str] | None = None):
        self.path = os.fspath(path)
        if not self.path.endswith((".csv", ".jsonl")):
            raise ConfigError("path", self.path, "must end in .csv or .jsonl (the curve-log formats)")
        if not str(job).strip():
            raise ConfigError("job", job, "must be a non-empty run name")
        extra = dict(extra or {})
        clash = [c for c in extra if c in CURVE_COLUMNS]
        if clash:
            raise ConfigError("extra", clash[0], f"is a curve-log column; extra columns must not be "
                                                 f"{', '.join(CURVE_COLUMNS)}")
        self.job, self.metric, self.proxy_metric, self.extra = str(job), metric, proxy_metric, extra
        self.columns = list(CURVE_COLUMNS) + sorted(extra)
        self._row: dict | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        if self.path.endswith(".csv"):
            self._check_header()
        if state.global_step == 0:
            self._row = {"job": self.job, "step": 0, "eval_score": None}

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero:
            return
        logs = logs or {}
        if self._row is not None and self._row["step"] != state.global_step:
            self._flush()
        if self._row is None:
            self._row = {"job": self.job, "step": state.global_step, "eval_score": None}
        row = self._row
        metric = next((k for k in (self.metric, f"eval_{self.metric}") if k in logs), None)
        for column, key in (("eval_score", metric), ("train_loss", "loss"), ("proxy_reward", self.proxy_metric),
                            *self.extra.items()):
            value = logs.get(key) if key else None
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                row[column] = float(value)

    def on_train_end(self, args, state, control, **kwargs):
        if state.is_world_process_zero and self._row is not None:
            self._flush()

    def _check_header(self) -> None:
        if not os.path.exists(self.path) or os.path.getsize(self.path) == 0:
            with open(self.path, "w", newline="") as f:
                csv.writer(f).writerow(self.columns)
            return
        with open(self.path, newline="") as f:
            header = next(csv.reader(f), [])
        if header != self.columns:
            raise ConfigError("path", self.path, f"holds columns {', '.join(header)}; this logger writes "
                                                 f"{', '.join(self.columns)}")

    def _flush(self) -> None:
        row, self._row = self._row, None
        with open(self.path, "a", newline="") as f:
            if self.path.endswith(".jsonl"):
                f.write(json.dumps(row, allow_nan=False) + "\n")
            else:
                csv.DictWriter(f, fieldnames=self.columns).writerow(row)
