"""Draw docs/calibration_curves.png (the paper's world) or docs/calibration_curves_realistic.png.

    python docs/calibration_figure.py [--calibration realistic] [--out PATH]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from evalstop_gym import WorkloadConfig, generate  # noqa: E402
from evalstop_gym.config import JOB_TYPES  # noqa: E402
from evalstop_gym.curves import progress_grid  # noqa: E402


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--calibration", default="paper", choices=("paper", "realistic"))
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    if a.calibration == "realistic":
        return realistic(a.out or str(Path(__file__).with_name("calibration_curves_realistic.png")))
    a.out = a.out or str(Path(__file__).with_name("calibration_curves.png"))
    cfg = WorkloadConfig(jobs=400, seed=5)
    w = generate(cfg)
    x = np.concatenate([[0.0], progress_grid(w.evals_per_job)])
    rlhf = w.job_type == JOB_TYPES.index("rlhf")
    hack = np.flatnonzero(w.hacking)[:3]
    healthy = np.flatnonzero(rlhf & ~w.hacking)[:3]
    fig, ax = plt.subplots(2, 2, figsize=(11, 8), constrained_layout=True)
    colors = plt.cm.tab10.colors

    def with_start(j, arr):
        return np.concatenate([[w.curves.start[j]], arr[j]])

    for sigma, axis in ((0.02, ax[0, 0]), (0.05, ax[0, 1])):
        for c, j in enumerate(list(hack) + list(healthy)):
            style = "-" if w.hacking[j] else "--"
            axis.plot(x, with_start(j, w.curves.gold), style, color=colors[c],
                      label=("hacking" if w.hacking[j] else "healthy") + f" job {j}")
            obs = w.curves.gold[j] + sigma * w.curves.eval_z[j]
            axis.plot(x[1:], obs, "o", ms=4, color=colors[c])
        axis.set(title=f"true score (lines), observed (dots), sigma={sigma}",
                 xlabel="progress", ylabel="eval score (0..1)")
        axis.legend(fontsize=7)
    for c, j in enumerate(list(hack) + list(healthy)):
        style = "-" if w.hacking[j] else "--"
        ax[1, 0].plot(x[1:], w.curves.proxy[j], style, color=colors[c])
        ax[1, 1].plot(x[1:], w.curves.loss[j], style, color=colors[c])
    ax[1, 0].set(title="proxy reward: rises, hacking (solid) or not (dashed)",
                 xlabel="progress", ylabel="proxy reward")
    ax[1, 1].set(title="training loss: falls for every run, hacking or not", xlabel="progress",
                 ylabel="training loss")
    fig.savefig(a.out, dpi=90)
    print(f"wrote {a.out}")


def realistic(out: str) -> None:
    """RLHF and DPO runs of the realistic world, each observed with its own eval-set noise."""
    w = generate(WorkloadConfig(jobs=400, seed=5, calibration="realistic"))
    x = np.concatenate([[0.0], progress_grid(w.evals_per_job)])
    colors = plt.cm.tab10.colors
    fig, ax = plt.subplots(2, 2, figsize=(11, 8), constrained_layout=True)
    groups = (("rlhf", ax[0, 0]), ("dpo", ax[0, 1]))
    for kind, axis in groups:
        of_type = w.job_type == JOB_TYPES.index(kind)
        jobs = list(np.flatnonzero(of_type & w.hacking)[:3]) + list(np.flatnonzero(of_type & ~w.hacking)[:3])
        for c, j in enumerate(jobs):
            style = "-" if w.hacking[j] else "--"
            axis.plot(x, np.concatenate([[w.curves.start[j]], w.curves.gold[j]]), style, color=colors[c],
                      label=f"{'hacking' if w.hacking[j] else 'healthy'} job {j}, n={w.eval_items[j]}")
            axis.plot(x[1:], w.observed[j], "o", ms=4, color=colors[c])
            if kind == "rlhf":
                ax[1, 0].plot(x[1:], w.curves.proxy[j], style, color=colors[c])
        axis.set(title=f"{kind.upper()}: true score (lines), observed (dots, noise from n)",
                 xlabel="progress", ylabel="eval score (0..1)")
        axis.legend(fontsize=7)
    ax[1, 0].set(title="RLHF proxy reward: keeps rising while a run over-optimises",
                 xlabel="progress", ylabel="proxy reward")
    grid = w.checkpoint_service_h / w.checkpoint_service_h[:, -1:]
    for c, j in enumerate(range(6)):
        ax[1, 1].plot(progress_grid(w.evals_per_job), grid[j], "o-", ms=3, color=colors[c])
    ax[1, 1].plot([0, 1], [0, 1], "k:", lw=1)
    ax[1, 1].set(title="share of the true length run at each eval (jittered speed, eval time)",
                 xlabel="eval index / evals", ylabel="service / true length")
    fig.savefig(out, dpi=90)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
