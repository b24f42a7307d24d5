"""Measure the figures docs/calibration.md quotes for the two worlds (seeds 0-9, rlhf-heavy, SRTF-Est).

* how well the public progress estimate ``a_d * T / d`` recovers a job's true
  length (``a_d``: attained hours when its ``d``-th of ``T`` evals came out);
* the share of GPU-hours spent on evals and on resumes (save + restore + warm-up);
* the waste-cut floor of EvalStop k=2: per caught hacking run, the evals from
  its true peak to its end (post-peak span) and to the stop (detection delay),
  and how the remaining waste splits between hacking and healthy runs.

    python3 docs/realistic_figures.py [--seeds 10]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evalstop_gym.baselines import make_policy  # noqa: E402
from evalstop_gym import WorkloadConfig, generate  # noqa: E402
from evalstop_gym.policy import apply_plan  # noqa: E402
from evalstop_gym.simulator import DONE, EVAL, Simulator  # noqa: E402
from evalstop_gym.timebase import TICKS_PER_HOUR  # noqa: E402


def run(cfg: WorkloadConfig, stopper: str = "none", **params):
    """One episode; returns the workload, outcome and relative errors of the progress estimate."""
    w = generate(cfg)
    sim, policy = Simulator(w), make_policy("srtf-est", stopper, **params)
    policy.reset()
    errors = []
    while (kind := sim.advance()) != DONE:
        if kind == EVAL:
            v = sim.decision_job
            if v.evals_done < v.evals_total:
                est = v.eval_attained_h[-1] * v.evals_total / v.evals_done
                errors.append((est - w.length_h[v.job_id]) / w.length_h[v.job_id])
            if policy.should_stop(v, sim.cluster):
                sim.stop(v.job_id)
        else:
            apply_plan(sim, policy.schedule(sim.cluster))
    return w, sim.outcome(), np.array(errors)


def pct(x, qs=(10, 50, 90)) -> str:
    return " / ".join(f"{v:.1%}" for v in np.percentile(x, qs))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=10)
    a = p.parse_args(argv)
    for cal in ("paper", "realistic"):
        errs, eval_share, restart_share = [], [], []
        span, delay, left_hack, left_healthy, cut = [], [], [], [], []
        for seed in range(a.seeds):
            cfg = WorkloadConfig(calibration=cal, seed=seed)
            w, out, e = run(cfg)
            errs.append(e)
            total = float(np.sum(out.service_ticks * w.gpus))
            if w.eval_h is not None:
                eval_share.append(float(np.sum(out.evals_seen * w.eval_h * w.gpus)) * TICKS_PER_HOUR / total)
            grid = w.checkpoint_ticks()
            last = grid[np.arange(w.n), np.maximum(out.evals_seen - 1, 0)]
            restart_share.append(float(np.sum((out.service_ticks - last) * w.gpus)) / total)
            none_waste = _waste(w, out)
            w2, out2, _ = run(cfg, "evalstop", k=2)
            peak = np.argmax(w2.curves.gold, axis=1)
            caught = w2.hacking & out2.stopped
            span.append(w2.evals_per_job - 1 - peak[caught])
            delay.append(out2.evals_seen[caught] - 1 - peak[caught])
            waste = _waste(w2, out2)
            left_hack.append(waste[w2.hacking].sum() / none_waste.sum())
            left_healthy.append(waste[~w2.hacking].sum() / none_waste.sum())
            cut.append(1 - waste.sum() / none_waste.sum())
        e = np.abs(np.concatenate(errs))
        print(f"== {cal}")
        print(f"progress estimate |error| of the true length, p10 / p50 / p90: {pct(e)} "
              f"(max {e.max():.2e}; {len(e)} checkpoints)")
        if eval_share:
            print(f"GPU-hours on evals: {np.mean(eval_share):.1%}; on resumes: {np.mean(restart_share):.1%}")
        s, d = np.concatenate(span), np.concatenate(delay)
        print(f"EvalStop k=2: waste cut {np.mean(cut):.1%}; caught hacking runs: post-peak span "
              f"{s.mean():.2f} evals, detection delay {d.mean():.2f} evals, so {1 - d.sum() / s.sum():.1%} of "
              f"their post-peak evals are saved; waste left: {np.mean(left_hack):.1%} of the no-stopper "
              f"waste on hacking runs, {np.mean(left_healthy):.1%} on healthy runs")
    return 0


def _waste(w, out) -> np.ndarray:
    """GPU-hours per job past its true best checkpoint (as :func:`evalstop_gym.metrics.compute_metrics`)."""
    at = np.where(out.peak_service_ticks >= 0, out.peak_service_ticks, out.service_ticks)
    return np.maximum(out.service_ticks - at, 0) * w.gpus / TICKS_PER_HOUR


if __name__ == "__main__":
    raise SystemExit(main())
