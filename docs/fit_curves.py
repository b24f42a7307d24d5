"""Fit the realistic calibration's curve shapes to a curve log (any CSV / JSONL / TensorBoard log).

Labels each run with the curve-log rule (:func:`evalstop_gym.curvelog.label_run`),
then measures, on progress ``x`` in (0, 1] (step over the run's last step):

* healthy runs: least-squares fit of ``b + G (1 - exp(-x / tau))`` (tau on a
  grid, b and G linear), giving the saturation scale ``tau``, the total gain
  relative to the run's start, the plateau jitter (sd of residuals over the
  second half of the run, where the fit is flat), and how often a residual
  dips below ``-2`` jitter sds (transient dips);
* hacking runs: progress of the smoothed peak, and the drop from the smoothed
  peak to the end relative to the gain to the peak.

It prints the quartiles of each and the ranges the realistic calibration
would take (interquartile ranges), so the fit re-runs on any log:

    python3 -m evalstop_gym.cli curves generate --out /tmp/lib --runs 48
    python3 docs/fit_curves.py /tmp/lib/curves.csv
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evalstop_gym.curvelog import label_run, read_curve_log, smooth  # noqa: E402

TAUS = np.geomspace(0.01, 3.0, 200)


def fit_saturating(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float, np.ndarray]:
    """Best ``(b, G, tau, residuals)`` of ``y ~ b + G (1 - exp(-x / tau))``."""
    best = None
    for tau in TAUS:
        a = np.column_stack([np.ones_like(x), 1.0 - np.exp(-x / tau)])
        coef, *_ = np.linalg.lstsq(a, y, rcond=None)
        r = y - a @ coef
        sse = float(r @ r)
        if best is None or sse < best[0]:
            best = (sse, float(coef[0]), float(coef[1]), float(tau), r)
    return best[1], best[2], best[3], best[4]


def quartiles(v) -> str:
    if len(v) == 0:
        return "n/a"
    q = np.percentile(v, [25, 50, 75])
    return f"{q[0]:.3f} / {q[1]:.3f} / {q[2]:.3f}  (n={len(v)})"


def fit(path: str, fmt: str = "auto") -> dict[str, list[float]]:
    runs = read_curve_log(path, fmt)
    out: dict[str, list[float]] = {k: [] for k in (
        "tau", "gain", "jitter", "jitter_rel", "dip_rate", "overfit_drop", "peak", "drop_rel")}
    for run in runs.values():
        steps, s = run.series("eval_score")
        if s.size < 6:
            continue
        x = (steps - steps[0]) / (steps[-1] - steps[0])
        lab = label_run(run)
        if lab.hacking:
            sm = smooth(s, round(0.1 * s.size))
            p = int(np.argmax(sm))
            out["peak"].append(float(x[p]))
            gain = float(sm[p] - s[0])
            if gain > 0:
                out["drop_rel"].append(float((sm[p] - sm[-1]) / gain))
            continue
        b, g, tau, r = fit_saturating(x[1:], s[1:])
        late = r[x[1:] >= 0.5]
        jitter = float(np.std(late, ddof=1)) if late.size > 2 else float("nan")
        out["tau"].append(tau)
        out["gain"].append(float(b + g * (1 - np.exp(-1 / tau)) - s[0]))
        out["jitter"].append(jitter)
        out["jitter_rel"].append(jitter / max(abs(g), 1e-9))
        out["dip_rate"].append(float(np.mean(r < -2 * jitter)) if jitter > 0 else 0.0)
        sm = smooth(s, round(0.1 * s.size))
        out["overfit_drop"].append(float(sm.max() - sm[-1]))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("path", help="curve log: .csv, .jsonl or a directory")
    p.add_argument("--format", default="auto")
    a = p.parse_args(argv)
    res = fit(a.path, a.format)
    print(f"curve log {a.path}: {len(res['tau'])} healthy, {len(res['peak'])} hacking runs")
    print("quantity                          q25 / median / q75")
    labels = {
        "tau": "healthy saturation tau (x of run)", "gain": "healthy gain (score)",
        "jitter": "healthy plateau jitter sd (score)", "jitter_rel": "jitter / gain",
        "dip_rate": "share of checkpoints dipping >2sd", "overfit_drop": "healthy end-vs-peak drop (score)",
        "peak": "hacking peak progress", "drop_rel": "hacking end drop / gain to peak",
    }
    for k, text in labels.items():
        print(f"{text:<34}{quartiles(res[k])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
