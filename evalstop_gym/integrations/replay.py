"""Live runs replayed in the simulator, their evals in the order they arrived live.

A stopper that reads one job's own evals (``evalstop``, ``patience``,
``stopat``, ``lossplateau``) decides a job's eval alike whatever other jobs
did. The noise-aware detectors (``cusum``, ``smoothed``, ``droptest``,
``divergence``) pool their noise estimate over every job the stopper watches
(:mod:`evalstop_gym.baselines.noise`), so a decision also depends on which of
the other jobs' evals came before it: on a live platform the order the results
reached the stopper (Ray's wall-clock scheduling), in a simulator replay the
order of the simulator's clock. :func:`replay_runs` makes the two orders one: every
job runs on its own slot from time 0 and its ``i``-th checkpoint comes out at
its ``i``-th eval's live arrival time (seconds from any common zero, e.g.
:meth:`LiveStopper.arrivals <evalstop_gym.integrations.live.LiveStopper.arrivals>`),
put one tick (1 ms) after the eval before it where two would coincide. The
simulator then asks the stopper about the evals in the live order, and every
registered stopper, pooled ones included, decides each eval as it did live.
A job stopped live has no arrival times after its stop; its later evals come at
its mean interval so far (they matter only if the replay does not stop it).

Without arrival times the simulator's own clock sets the order: every job
starts at 0 and its evals are evenly spaced over one common length, so the
stopper sees every job's first eval, then every job's second, and so on.

Why not an order-free noise estimate instead: any estimate pooled over jobs
depends on which of the other jobs' evals exist when a job is judged, which
live is the wall clock's to say; only a job's own evals are order-free, and a
job of 6 evals has 4 second differences, far below the
:data:`~evalstop_gym.baselines.noise.MIN_DIFFERENCES` the pooled estimate waits
for. A user who knows the eval noise passes ``sigma`` and the eval test no
longer pools (``divergence``'s proxy test still does).

:func:`judge` is the offline verdict on one logged run: its evals fed one by
one, in step order, to the same rule object as live
(:func:`~evalstop_gym.integrations.live.live_stopper`), one stopper per run (a
pooled noise estimate learns from that run alone; other runs are other
tenants' and their order is unknown). The ``progress`` of an eval is its step
over the run's planned ``max_steps`` where the log records it, else unknown; so
the eval at ``max_steps`` is the run's end and is not asked about, as live,
while the last eval of a run stopped early (a stopped log) is judged.

A run's evals are its logged eval scores at steps after 0 (the curve log's
step-0 row is the pre-training eval, which no hook reports), with the training
loss and proxy reward logged on the same row, as a Tune trial reports them.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, NamedTuple, Sequence

import numpy as np

from ..baselines import make_policy
from ..config import JOB_TYPES, ConfigError
from ..policy import Stopper, drive
from ..simulator import Simulator
from ..timebase import TICKS_PER_HOUR
from ..workload import Workload, workload_from_jobs


class Verdict(NamedTuple):
    """What a stopper would have done to one logged run (scores in the run's units, steps in its steps)."""

    stopper: str                 # the stopper and its parameters, e.g. "evalstop k=2"
    evals: int
    stop_eval: int | None        # 1-based index of the eval it stopped at; None if it never fired
    stop_step: float | None
    best_step: float             # the kept best (at the stop; the run's best if it never fired)
    best_score: float
    final_score: float           # the run's last eval
    evals_saved: int
    steps_saved_share: float     # (last step - stop step) / last step; 0 if it never fired
    false_stop: bool | None      # a later eval beat the kept best (None if it never fired)
    delivered_loss: float        # how much worse the delivered score is than the final one (>0: worse)


def _latest(steps: np.ndarray, values: np.ndarray, at: float) -> float | None:
    i = int(np.searchsorted(steps, at, side="right")) - 1
    return float(values[i]) if i >= 0 else None


def judge(steps, scores, stopper: str = "evalstop", *, mode: str = "max", max_steps: float | None = None,
          loss=None, proxy=None, label: str | None = None, **params) -> Verdict:
    """Feed one run's evals (``steps`` ascending, ``scores``) to ``live_stopper(stopper, mode=mode,
    **params)`` and report its :class:`Verdict` (module docstring). ``loss`` / ``proxy`` are optional
    ``(steps, values)`` of the training loss and proxy reward; each eval gets the latest at its step."""
    from .live import live_stopper

    steps, scores = np.asarray(steps, dtype=float), np.asarray(scores, dtype=float)
    if steps.size != scores.size or steps.size < 1:
        raise ConfigError("scores", scores.size, "one score per step, at least one")
    live = live_stopper(stopper, mode=mode, job_type="rlhf" if proxy is not None else "lora", **params)
    stop = None
    for i, (step, score) in enumerate(zip(steps, scores)):
        kw = {}
        if max_steps:
            kw["progress"] = min(max(step / max_steps, 0.0), 1.0)
        if loss is not None:
            kw["loss"] = _latest(*loss, step)
        if proxy is not None:
            kw["proxy"] = _latest(*proxy, step)
        if live.update("run", float(score), step=float(step), **kw):
            stop = i
            break
    sign = 1.0 if mode == "max" else -1.0
    final = float(scores[-1])
    last = float(steps[-1])
    if stop is None:
        b = int(np.argmax(sign * scores))   # first of equal bests
        return Verdict(label or stopper, scores.size, None, None, float(steps[b]), float(scores[b]), final, 0,
                       0.0, None, 0.0)
    best = live.best("run")
    later = sign * scores[stop + 1:]
    return Verdict(label or stopper, scores.size, stop + 1, float(steps[stop]), float(best.step), best.score,
                   final, scores.size - stop - 1, float((last - steps[stop]) / last) if last > 0 else 0.0,
                   bool(np.any(later > sign * best.score)), sign * (final - best.score))


class Replay(NamedTuple):
    """What the simulator's replay decided."""

    stops: dict          # run name -> step of the eval it was stopped at, None if it ran to its end
    order: list          # (run name, step) of every eval the stopper was asked about, in the simulator's order


def run_evals(run) -> np.ndarray:
    """Row indices of ``run``'s evals: rows at a step after 0 with a finite eval score."""
    return np.flatnonzero((run.step > 0) & np.isfinite(run.eval_score))


def replay_workload(runs: Mapping, arrivals: Mapping[str, Sequence[float]] | None = None, *,
                    eval_items: int = 0, job_type: str = "rlhf") -> tuple[Workload, list[str]]:
    """A workload of one job per run (in the order of ``runs``), noise 0, each on its own slot, its
    checkpoints at the run's ``arrivals`` (seconds) or, without them, evenly spaced over 1 h; and the run
    names by job id."""
    if not runs:
        raise ConfigError("runs", {}, "a replay needs at least one run")
    if job_type not in JOB_TYPES:
        raise ConfigError("job_type", job_type, f"must be one of {', '.join(JOB_TYPES)}")
    names = list(runs)
    rows = {n: run_evals(runs[n]) for n in names}
    counts = {n: r.size for n, r in rows.items()}
    if len(set(counts.values())) != 1 or min(counts.values()) < 1:
        raise ConfigError("runs", counts, "every run must log the same number (>= 1) of evals after step 0")
    e = counts[names[0]]
    jobs = []
    for n in names:
        run, r = runs[n], rows[n]
        if job_type == "rlhf" and not np.isfinite(run.proxy_reward[r]).all():
            raise ConfigError(f"run {n}.proxy_reward", run.proxy_reward[r].tolist(),
                              "an RLHF job's replay needs a proxy at every eval (replay it as another job_type)")
        scores = run.eval_score[r]
        jobs.append({"job_type": job_type, "gold": scores, "observed": scores, "loss": run.train_loss[r],
                     "proxy": run.proxy_reward[r] if job_type == "rlhf" else np.zeros(e)})
    w = workload_from_jobs(jobs, total_gpus=len(jobs), evals_per_job=e)
    w = dataclasses.replace(w, eval_items=np.full(w.n, eval_items, dtype=np.int64), noise=0.0)
    if arrivals is not None:
        ticks = arrival_ticks([arrivals.get(n, ()) for n in names], e, names)
        hours = ticks / TICKS_PER_HOUR
        w = dataclasses.replace(w, ckpt_service_h=hours, length_h=hours[:, -1].copy(),
                                est_length_h=hours[:, -1].copy())
    w.validate()
    return w, names


def arrival_ticks(times: list[Sequence[float]], evals: int, names: list[str]) -> np.ndarray:
    """``(jobs, evals)`` int64 ticks, strictly increasing over all jobs in the order of the arrival
    ``times`` (seconds; a job's missing trailing evals at its mean interval so far)."""
    full = np.empty((len(times), evals))
    for j, t in enumerate(times):
        t = np.asarray(t, dtype=float)
        if t.size < 1 or t.size > evals or not np.isfinite(t).all() or t[0] < 0 or np.any(np.diff(t) <= 0):
            raise ConfigError(f"arrivals[{names[j]!r}]", t.tolist(),
                              f"must be 1 to {evals} increasing finite seconds >= 0, one per eval")
        step = t[-1] / t.size if t.size == 1 else (t[-1] - t[0]) / (t.size - 1)
        full[j] = np.concatenate([t, t[-1] + max(step, 1.0) * np.arange(1, evals - t.size + 1)])
    ticks = np.rint(full * TICKS_PER_HOUR / 3600).astype(np.int64)
    flat = ticks.ravel()   # a view: nudging it nudges ticks
    last = 0
    for at in np.lexsort((np.arange(flat.size), full.ravel())):   # by arrival time, ties by job then eval
        last = flat[at] = max(flat[at], last + 1)
    return ticks


class _Asked(Stopper):
    """The wrapped policy's decisions, recorded: each run's stop step and every eval asked about."""

    rule_name = "asked"

    def __init__(self, base, runs, names):
        super().__init__(base)
        self.steps = [runs[n].step[run_evals(runs[n])] for n in names]
        self.names, self.stops, self.order = names, {}, []

    def should_stop(self, job, cluster):
        decision = self.base.should_stop(job, cluster)
        name = self.names[job.job_id]
        at = int(self.steps[job.job_id][len(job.eval_scores) - 1])
        self.order.append((name, at))
        if decision:
            self.stops.setdefault(name, at)
        return decision


def replay_runs(runs: Mapping, stopper: str, arrivals: Mapping[str, Sequence[float]] | None = None, *,
           eval_items: int = 0, job_type: str = "rlhf", **params) -> Replay:
    """Replay ``runs`` (``{name: LoggedRun}``, e.g. :func:`~evalstop_gym.curvelog.read_curve_log`) in the
    simulator under the registered ``stopper`` with ``params``, each run's checkpoints at its live
    ``arrivals`` (``{name: seconds of each eval}``; module docstring). ``eval_items`` and ``job_type`` are
    what the live stopper was told."""
    w, names = replay_workload(runs, arrivals, eval_items=eval_items, job_type=job_type)
    policy = _Asked(make_policy("fifo", stopper, **params), runs, names)
    drive(Simulator(w), policy)
    return Replay({n: policy.stops.get(n) for n in names}, policy.order)
