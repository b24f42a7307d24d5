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
scores in the caller's units.
"""

from __future__ import annotations

import math
import time
from array import array
from typing import Callable, Hashable, NamedTuple

from ..baselines import make_policy
from ..config import JOB_TYPES, ConfigError, check_range
from ..timebase import TICKS_PER_HOUR
from ..view import COMPLETED, RUNNING, STOPPED, ClusterView, JobView

MODES = ("max", "min")


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


class LiveStopper:
    """A registered stopper driven by live eval results (module docstring).

    ``name`` and ``params`` are those of :func:`evalstop_gym.baselines.make_policy`
    (e.g. ``LiveStopper("evalstop", k=2)``); ``job_type`` (one of
    :data:`~evalstop_gym.config.JOB_TYPES`) is the default type of new jobs;
    ``clock`` (seconds) times the hours each eval came out at, which no stopper
    reads.
    """

    def __init__(self, name: str = "evalstop", *, mode: str = "max", job_type: str = "rlhf",
                 clock: Callable[[], float] = time.monotonic, **params):
        if mode not in MODES:
            raise ConfigError("mode", mode, f"must be one of {', '.join(MODES)}")
        if job_type not in JOB_TYPES:
            raise ConfigError("job_type", job_type, f"must be one of {', '.join(JOB_TYPES)}")
        self.name = name
        self.policy = make_policy("fifo", name, **params)
        self.policy.reset()
        self.mode, self.job_type, self.clock = mode, job_type, clock
        self.cluster = ClusterView(0)
        self._views: dict[Hashable, LiveJobView] = {}
        self._started: dict[Hashable, float] = {}
        self._steps: dict[Hashable, list[float | None]] = {}
        self._arrived: dict[Hashable, list[float]] = {}   # clock seconds since _t0 of each recorded eval
        self._t0: float | None = None   # clock at the first eval of any job: the cluster clock's zero

    def update(self, job_key: Hashable, score: float, *, eval_items: int = 0, loss: float | None = None,
               proxy: float | None = None, progress: float | None = None, step: float | None = None,
               job_type: str | None = None) -> bool:
        """Record one eval of ``job_key`` and return True if the job should stop now.

        ``score`` is the eval metric; ``eval_items`` the size of the eval set it
        was measured on (0: unknown); ``loss`` the latest training loss;
        ``proxy`` the latest proxy (reward-model) reward (a loss or proxy that
        is None or not finite counts as not logged); ``progress`` the fraction
        of the run done; ``step`` the training step (kept for :meth:`best`);
        ``job_type`` the job's type, read at its first eval. A job once
        stopped stays stopped: later calls return True and record nothing.
        """
        view = self._views.get(job_key)
        if view is not None and view.status == STOPPED:
            return True
        if view is not None and view.status == COMPLETED:
            raise ConfigError("job_key", job_key, "has finished (an eval with progress >= 1 was recorded); "
                                                  "use a new key for a new run")
        s = self._number("score", score)
        check_range("eval_items", eval_items, 0, integer=True)
        if progress is not None:
            check_range("progress", progress, 0.0, 1.0)
        if view is None:
            view = self._open(job_key, job_type or self.job_type)
        if progress is not None:
            view.live_progress = float(progress)
        i = len(view.eval_scores)
        if i:
            view.consecutive_declines = view.consecutive_declines + 1 if s < view.eval_scores[-1] else 0
        view.eval_items = eval_items or view.eval_items
        elapsed = max(self.clock() - self._started[job_key], 0.0)
        view._service_ticks = round(elapsed * TICKS_PER_HOUR / 3600)
        view.eval_scores.append(s)
        view.train_losses.append(math.nan if loss is None else self._number("loss", loss))
        view.eval_attained_h.append(view._service_ticks / TICKS_PER_HOUR)
        if proxy is not None:
            if len(view.proxy_rewards) < i:   # the first proxy of a job reported late: earlier evals had none
                view.proxy_rewards.extend([math.nan] * (i - len(view.proxy_rewards)))
            view.proxy_rewards.append(self._number("proxy", proxy))
        elif len(view.proxy_rewards):
            view.proxy_rewards.append(math.nan)
        self._steps[job_key].append(None if step is None else float(step))
        self._arrived[job_key].append(self.clock() - self._t0)
        self.cluster.now_ticks = max(self.cluster.now_ticks, round((self.clock() - self._t0) * TICKS_PER_HOUR / 3600))
        self.cluster.now_h = self.cluster.now_ticks / TICKS_PER_HOUR
        if view.live_progress >= 1.0:
            self._end(job_key, COMPLETED)
            return False
        if self.policy.should_stop(view, self.cluster):
            self._end(job_key, STOPPED)
            return True
        return False

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

    @property
    def jobs(self) -> list:
        """Keys of every job seen, in the order of their first eval."""
        return list(self._views)

    # -- internals ---------------------------------------------------------------------
    def _open(self, job_key: Hashable, job_type: str) -> LiveJobView:
        if job_type not in JOB_TYPES:
            raise ConfigError("job_type", job_type, f"must be one of {', '.join(JOB_TYPES)}")
        job_id = len(self._views)   # the ids pooled detectors key on: one per job, in order of first eval
        view = LiveJobView(job_id, 0, job_type, 1, 0, 0, 0, self.cluster)
        view.live_progress = 0.0
        view.status = RUNNING
        view.start_h = 0.0
        self.cluster.running[job_id] = view
        self._views[job_key] = view
        self._started[job_key] = self.clock()
        if self._t0 is None:
            self._t0 = self._started[job_key]
        self._steps[job_key] = []
        self._arrived[job_key] = []
        return view

    def _end(self, job_key: Hashable, status: str) -> None:
        view = self._views[job_key]
        view.status = status
        self.cluster.running.pop(view.job_id, None)
        self.cluster.finished += 1

    def _number(self, field: str, value) -> float:
        """``value`` as a float; the score must be finite, a non-finite loss or proxy counts as not logged."""
        try:
            v = math.nan if isinstance(value, bool) else float(value)   # numpy and torch scalars too
        except (TypeError, ValueError):
            v = math.nan
        if field != "score":
            return v if math.isfinite(v) else math.nan
        if not math.isfinite(v):
            raise ConfigError(field, value, "must be a finite number")
        return v if self.mode == "max" else -v

def live_stopper(name: str = "evalstop", **params) -> LiveStopper:
    """A :class:`LiveStopper` for the registered stopper ``name`` with its ``params``
    (and ``mode``, ``job_type``, ``clock``)."""
    return LiveStopper(name, **params)
