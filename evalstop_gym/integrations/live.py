"""The live adapter: a running job's eval history as the public view, so the simulator's stoppers decide.

A stopper of :data:`evalstop_gym.baselines.STOPPERS` answers
``should_stop(job, cluster)`` from a :class:`~evalstop_gym.view.JobView` and a
:class:`~evalstop_gym.view.ClusterView`. :class:`LiveStopper` keeps one view per
live job and, at each eval, appends what the simulator would have appended at
that checkpoint (the score, the training loss, the proxy reward, the eval-set
size, the count of trailing declines) and asks the same stopper object. No rule
is restated here, so a stopper decides a live run and its replay alike.

One object for many jobs. Some detectors pool state over the jobs of an
episode: the noise-aware ones estimate the eval-noise sigma from every job's
scores (:class:`~evalstop_gym.baselines.noise.PooledNoise`). The platform form
is one :class:`LiveStopper` shared by all the jobs it watches (the trials of a
sweep, the tenants' jobs of a cluster), each under its own ``job_key``; one
object per job gives each job its own estimate, learnt from that job alone.
A pooled estimate depends on the order in which the jobs' evals arrive, so
the stopper records when each eval came (:meth:`LiveStopper.arrivals`), and
:func:`~evalstop_gym.integrations.replay.replay_runs` puts the simulator's
checkpoints at those times to replay the same decisions.

What a live job does not know stays neutral. ``progress`` (fraction of the run
done, in [0, 1]) is the view's ``progress`` where given, else 0, so a rule by
progress (``stopat``) never fires on a job of unknown length. A missing loss or
proxy is NaN (each history keeps one entry per eval); the proxy history stays
empty for a job that never reports one, as for the simulator's non-RLHF jobs.
At an eval with ``progress >= 1`` the job has finished: the eval is recorded
(and counted for :meth:`LiveStopper.best`), the stopper is not asked, as the
simulator does not ask at a job's last checkpoint.

``mode="min"`` (a loss-like metric) feeds the stopper the negated score, so a
rise of the metric is a decline of the score; :meth:`LiveStopper.best` reports
scores in the caller's units. ``mode="auto"`` reads the direction from the
metric's name (:func:`evalstop_gym.direction.mode_from_name`: ``eval_loss`` is
``min``, ``eval_reward`` ``max``) and refuses a name that says neither; a
loss-like metric maximised gets a one-line warning.

Diverged runs: a score that is NaN or infinite is handled by ``on_nonfinite``,
one policy for every integration (:data:`NONFINITE`, default ``"stop"``):
``"stop"`` ends the job at once without recording the score, so its best is the
best finite eval and its checkpoint is the one kept; ``"skip"`` ignores the eval
(the job goes on); ``"raise"`` raises :class:`~evalstop_gym.config.ConfigError`.
A non-finite loss or proxy reward only counts as not logged.

An update that raises changes nothing: every input is checked before anything
is recorded. An eval whose ``step`` is not after the job's last recorded step
is a repeat (a trial restarted from an earlier checkpoint reports that
iteration again; a Trainer evaluates again after training) and is not counted
twice: it records nothing and returns the job's standing decision.

State that survives: :meth:`LiveStopper.state` is every recorded eval as plain
JSON data, in arrival order; :meth:`LiveStopper.restore` replays it through a
fresh stopper of the same configuration, so every decision, the pooled noise
estimates, the best evals and the arrival times come back as they were (the
stoppers are deterministic functions of the evals they saw, in order). A
pickled stopper goes through the same two steps.
"""

from __future__ import annotations

import math
import time
import warnings
from typing import Callable, Hashable, NamedTuple

from ..baselines import make_policy
from ..config import JOB_TYPES, ConfigError, check_range
from ..direction import is_loss_like, mode_from_name
from ..timebase import TICKS_PER_HOUR
from ..view import COMPLETED, RUNNING, STOPPED, ClusterView, JobView

MODES = ("max", "min")
NONFINITE = ("stop", "skip", "raise")
DEFAULT_NONFINITE = "stop"
STATE_VERSION = 1


def resolve_mode(mode: str, metric: str | None) -> str:
    """``mode`` (``max``, ``min`` or ``auto``: from ``metric``'s name) as ``max`` or ``min``; warns once when a
    loss-like ``metric`` is maximised."""
    if mode == "auto":
        found = None if metric is None else mode_from_name(metric)
        if found is None:
            raise ConfigError("mode", mode, f"cannot tell from the metric name {metric!r} whether it improves up or "
                                            f"down; pass mode='max' or mode='min'")
        return found
    if mode not in MODES:
        raise ConfigError("mode", mode, f"must be one of {', '.join(MODES)} or auto")
    if mode == "max" and metric is not None and is_loss_like(metric):
        warnings.warn(f"metric {metric!r} reads as a loss but mode='max' keeps its highest value as best; pass "
                      f"mode='min' (or mode='auto')", stacklevel=3)
    return mode


def check_nonfinite(on_nonfinite: str) -> str:
    """``on_nonfinite`` if it is one of :data:`NONFINITE`, else :class:`ConfigError`."""
    if on_nonfinite not in NONFINITE:
        raise ConfigError("on_nonfinite", on_nonfinite, f"must be one of {', '.join(NONFINITE)}")
    return on_nonfinite


class Best(NamedTuple):
    """The best eval of a job so far: the checkpoint the tenant gets back on a stop."""

    index: int              # 0-based eval index
    step: float | None      # the caller's training step of that eval (None if not given)
    score: float            # in the caller's units (``mode`` undone)


class LiveJobView(JobView):
    """A :class:`~evalstop_gym.view.JobView` whose ``progress`` is the one the live job reports."""

    __slots__ = ("live_progress",)

    @property
    def progress(self) -> float:
        """Fraction of the run done as last reported (0 when unknown)."""
        return self.live_progress


class Eval(NamedTuple):
    """One eval as :meth:`LiveStopper.update` checked it: ``score`` in the caller's units (None: not finite)."""

    score: float | None
    eval_items: int
    loss: float | None
    proxy: float | None
    progress: float | None
    step: float | None
    job_type: str


class LiveStopper:
    """A registered stopper driven by live eval results (module docstring).

    ``name`` and ``params`` are those of :func:`evalstop_gym.baselines.make_policy`
    (e.g. ``LiveStopper("evalstop", k=2)``); ``mode``: ``max``, ``min`` or
    ``auto`` (from ``metric``, the watched metric's name); ``job_type`` (one of
    :data:`~evalstop_gym.config.JOB_TYPES`) is the default type of new jobs;
    ``on_nonfinite``: what a NaN or infinite score does (:data:`NONFINITE`);
    ``clock`` (seconds) times the hours each eval came out at, which no stopper
    reads.
    """

    def __init__(self, name: str = "evalstop", *, mode: str = "max", metric: str | None = None,
                 job_type: str = "rlhf", on_nonfinite: str = DEFAULT_NONFINITE,
                 clock: Callable[[], float] = time.monotonic, **params):
        mode = resolve_mode(mode, metric)
        if job_type not in JOB_TYPES:
            raise ConfigError("job_type", job_type, f"must be one of {', '.join(JOB_TYPES)}")
        self.name, self.params, self.metric = name, dict(params), metric
        self.policy = make_policy("fifo", name, **params)
        self.policy.reset()
        self.mode, self.job_type, self.on_nonfinite, self.clock = mode, job_type, check_nonfinite(on_nonfinite), clock
        self.cluster = ClusterView(0)
        self._views: dict[Hashable, LiveJobView] = {}
        self._started: dict[Hashable, float] = {}
        self._steps: dict[Hashable, list[float | None]] = {}
        self._arrived: dict[Hashable, list[float]] = {}   # seconds since _t0 of each recorded eval
        self._t0: float | None = None   # time of the first eval of any job: the cluster clock's zero
        self._shift = 0.0               # added to clock(): a restored stopper's times go on from the saved ones
        self._log: list[list] = []      # every recorded eval, in arrival order (:meth:`state`)

    def update(self, job_key: Hashable, score: float, *, eval_items: int = 0, loss: float | None = None,
               proxy: float | None = None, progress: float | None = None, step: float | None = None,
               job_type: str | None = None) -> bool:
        """Record one eval of ``job_key`` and return True if the job should stop now.

        ``score`` is the eval metric; ``eval_items`` the size of the eval set it
        was measured on (0: unknown); ``loss`` the latest training loss;
        ``proxy`` the latest proxy (reward-model) reward (a loss or proxy that
        is None or not finite counts as not logged); ``progress`` the fraction
        of the run done; ``step`` the training step (kept for :meth:`best`; a
        step not after the job's last one is a repeat, module docstring);
        ``job_type`` the job's type, read at its first eval. A job once
        stopped stays stopped: later calls return True and record nothing.
        A bad input raises before anything is recorded.
        """
        view = self._views.get(job_key)
        if view is not None and view.status == STOPPED:
            return True
        if view is not None and view.status == COMPLETED:
            raise ConfigError("job_key", job_key, "has finished (an eval with progress >= 1 was recorded); "
                                                  "use a new key for a new run")
        e = self.check(score, eval_items=eval_items, loss=loss, proxy=proxy, progress=progress, step=step,
                       job_type=job_type)
        if self.repeated(job_key, e.step):
            return False
        if e.score is None and self.on_nonfinite == "skip":
            return False
        return self._record(job_key, e, self.clock() + self._shift)

    def check(self, score, *, eval_items: int = 0, loss=None, proxy=None, progress=None, step=None,
              job_type: str | None = None) -> Eval:
        """The inputs of :meth:`update` checked and converted, or :class:`ConfigError` naming the first bad one."""
        try:
            value = math.nan if isinstance(score, bool) else float(score)   # numpy and torch scalars too
        except (TypeError, ValueError):
            raise ConfigError("score", score, "must be a number") from None
        if not math.isfinite(value):
            if self.on_nonfinite == "raise":
                raise ConfigError("score", score, "is not finite (on_nonfinite='raise'; 'stop' ends the run at its "
                                                  "best finite eval, 'skip' ignores the eval)")
            value = None
        check_range("eval_items", eval_items, 0, integer=True)
        if progress is not None:
            check_range("progress", progress, 0.0, 1.0)
        if step is not None:
            try:
                step = float(step)
            except (TypeError, ValueError):
                raise ConfigError("step", step, "must be a number (the training step) or None") from None
            if not math.isfinite(step):
                raise ConfigError("step", step, "must be a finite number (the training step) or None")
        job_type = job_type or self.job_type
        if job_type not in JOB_TYPES:
            raise ConfigError("job_type", job_type, f"must be one of {', '.join(JOB_TYPES)}")
        return Eval(value, eval_items, _optional(loss), _optional(proxy),
                    None if progress is None else float(progress), step, job_type)

    def repeated(self, job_key: Hashable, step: float | None) -> bool:
        """Whether an eval at ``step`` repeats one already recorded for ``job_key`` (its step is not after the last)."""
        steps = self._steps.get(job_key)
        return step is not None and bool(steps) and steps[-1] is not None and step <= steps[-1]

    def best(self, job_key: Hashable) -> Best:
        """The best eval of ``job_key`` so far (the first of equal bests, as in the simulator)."""
        view = self.view(job_key)
        if not len(view.eval_scores):
            raise ConfigError("job_key", job_key, "has no eval recorded yet")
        scores = view.eval_scores
        i = max(range(len(scores)), key=lambda k: (scores[k], -k))
        return Best(i, self._steps[job_key][i], scores[i] if self.mode == "max" else -scores[i])

    def stopped(self, job_key: Hashable) -> bool:
        """Whether ``job_key`` was stopped by the rule."""
        v = self._views.get(job_key)
        return v is not None and v.status == STOPPED

    def ended(self, job_key: Hashable) -> bool:
        """Whether ``job_key`` was stopped or has finished (an eval with ``progress >= 1``)."""
        v = self._views.get(job_key)
        return v is not None and v.status in (STOPPED, COMPLETED)

    def view(self, job_key: Hashable) -> LiveJobView:
        """The public view of ``job_key`` the stopper decides on."""
        try:
            return self._views[job_key]
        except KeyError:
            raise ConfigError("job_key", job_key, "has not reported an eval") from None

    def arrivals(self) -> dict:
        """``{job key: [seconds, ...]}``: when each recorded eval of each job arrived, on ``clock`` from the
        first eval of any job. :func:`~evalstop_gym.integrations.replay.replay_runs` takes them to put the
        simulator's checkpoints in the live order, which the noise-aware detectors' pooled estimate depends on."""
        return {key: list(times) for key, times in self._arrived.items()}

    def warn_if_short(self, planned_evals: int) -> None:
        """Warn when the stopper can never fire within ``planned_evals`` evals (k larger than the run)."""
        need = getattr(self.policy, "min_evals", lambda: 0)()
        if planned_evals < need:
            warnings.warn(f"stopper {self.name!r} {self.params} needs {need} evals to stop a run; this run plans "
                          f"{planned_evals}, so it can never stop it", stacklevel=3)

    @property
    def jobs(self) -> list:
        """Keys of every job seen, in the order of their first eval."""
        return list(self._views)

    def state(self) -> dict:
        """Everything this stopper has recorded, as JSON data (job keys as given: use str or int keys)."""
        return {"version": STATE_VERSION, "stopper": self.name, "params": self.params, "mode": self.mode,
                "evals": [list(entry) for entry in self._log]}

    def restore(self, state: dict) -> None:
        """Replay a :meth:`state` of a stopper with the same configuration into this fresh one (module docstring)."""
        if self._log:
            raise ConfigError("state", "restore", "needs a fresh LiveStopper (this one has recorded evals)")
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
            raise ConfigError("state", type(state).__name__, f"must be a LiveStopper.state() of version "
                                                             f"{STATE_VERSION}")
        saved = (state.get("stopper"), state.get("params"), state.get("mode"))
        if saved != (self.name, self.params, self.mode):
            raise ConfigError("state", saved, f"was saved by another stopper; this one is "
                                              f"{(self.name, self.params, self.mode)}")
        t = 0.0
        for key, t, *fields in state["evals"]:
            key = tuple(key) if isinstance(key, list) else key   # JSON made a tuple key a list
            self._record(key, Eval(*fields), t)
        self._shift = t - self.clock()   # the live clock goes on from the last saved time

    def __reduce__(self):
        """Pickled as its configuration and :meth:`state`; unpickling replays the evals into a fresh stopper
        (:meth:`restore`). Ray Tune keeps a ``Stopper`` in its experiment state this way, and a process restored
        on another machine has another monotonic clock: the saved times go on from the last one, not from it."""
        return _unpickled, (self.name, self.params, self.mode, self.metric, self.job_type, self.on_nonfinite,
                            self.clock, self.state())

    # -- internals ---------------------------------------------------------------------
    def _record(self, job_key: Hashable, e: Eval, now: float) -> bool:
        """Record the checked eval ``e`` of ``job_key`` at time ``now`` (seconds) and ask the stopper."""
        view = self._views.get(job_key)
        if view is None:
            view = self._open(job_key, e.job_type, now)
        self._log.append([job_key, now - self._t0, *e])
        if e.score is None:   # on_nonfinite="stop": the job ends at its best finite eval
            self._end(job_key, STOPPED)
            return True
        s = e.score if self.mode == "max" else -e.score
        if e.progress is not None:
            view.live_progress = e.progress
        i = len(view.eval_scores)
        if i:
            view.consecutive_declines = view.consecutive_declines + 1 if s < view.eval_scores[-1] else 0
        view.eval_items = e.eval_items or view.eval_items
        elapsed = max(now - self._started[job_key], 0.0)
        view._service_ticks = round(elapsed * TICKS_PER_HOUR / 3600)
        view.eval_scores.append(s)
        view.train_losses.append(math.nan if e.loss is None else e.loss)
        view.eval_attained_h.append(view._service_ticks / TICKS_PER_HOUR)
        if e.proxy is not None:
            if len(view.proxy_rewards) < i:   # the first proxy of a job reported late: earlier evals had none
                view.proxy_rewards.extend([math.nan] * (i - len(view.proxy_rewards)))
            view.proxy_rewards.append(e.proxy)
        elif len(view.proxy_rewards):
            view.proxy_rewards.append(math.nan)
        self._steps[job_key].append(e.step)
        self._arrived[job_key].append(now - self._t0)
        self.cluster.now_ticks = max(self.cluster.now_ticks, round((now - self._t0) * TICKS_PER_HOUR / 3600))
        self.cluster.now_h = self.cluster.now_ticks / TICKS_PER_HOUR
        if view.live_progress >= 1.0:
            self._end(job_key, COMPLETED)
            return False
        if self.policy.should_stop(view, self.cluster):
            self._end(job_key, STOPPED)
            return True
        return False

    def _open(self, job_key: Hashable, job_type: str, now: float) -> LiveJobView:
        job_id = len(self._views)   # the ids pooled detectors key on: one per job, in order of first eval
        view = LiveJobView(job_id, 0, job_type, 1, 0, 0, 0, self.cluster)
        view.live_progress = 0.0
        view.status = RUNNING
        view.start_h = 0.0
        self.cluster.running[job_id] = view
        self._views[job_key] = view
        self._started[job_key] = now
        if self._t0 is None:
            self._t0 = now
        self._steps[job_key] = []
        self._arrived[job_key] = []
        return view

    def _end(self, job_key: Hashable, status: str) -> None:
        view = self._views[job_key]
        view.status = status
        self.cluster.running.pop(view.job_id, None)
        self.cluster.finished += 1


def _unpickled(name: str, params: dict, mode: str, metric: str | None, job_type: str, on_nonfinite: str,
               clock: Callable[[], float], state: dict) -> LiveStopper:
    """A :class:`LiveStopper` rebuilt from what :meth:`LiveStopper.__reduce__` pickled."""
    live = LiveStopper(name, mode=mode, job_type=job_type, on_nonfinite=on_nonfinite, clock=clock, **params)
    live.metric = metric   # set after: the mode is resolved and its warning, if any, was given when it was made
    live.restore(state)
    return live


def _optional(value) -> float | None:
    """A loss or proxy reading as a float; None, a non-number or a non-finite value counts as not logged."""
    try:
        v = math.nan if value is None or isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def live_stopper(name: str = "evalstop", **params) -> LiveStopper:
    """A :class:`LiveStopper` for the registered stopper ``name`` with its ``params``
    (and ``mode``, ``metric``, ``job_type``, ``on_nonfinite``, ``clock``)."""
    return LiveStopper(name, **params)
