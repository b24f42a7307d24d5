"""Learned policies vs EvalStop vs the baselines on the same held-out seeds: a table and a plot.

Give the models saved by ``evalstop-gym train`` (or by
``examples/train_stop_policy.py``): a stop-policy (``--stop-model``) is
compared with every hand-coded stopper over SRTF-Est at the chosen noise; a
learned scheduler (``--scheduler-model``) with every base scheduler plus
EvalStop at the default noise. Either may be left out.

    python examples/train_stop_policy.py                  # writes runs/stop-policy
    evalstop-gym train --env EvalStop-Cluster-v0 --algo maskable-ppo --out runs/scheduler
    python examples/compare_policies.py --stop-model runs/stop-policy --scheduler-model runs/scheduler

Writes ``compare_policies.png`` (and prints the Markdown tables); a few
seconds per ten seeds and policy.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from evalstop_gym.agents.evaluate import evaluate
from evalstop_gym.baselines import SCHEDULERS, STOPPERS
from evalstop_gym import WorkloadConfig

STOP_PANELS = ("f1", "precision", "recall", "avg_jct_h")
SCHED_PANELS = ("avg_jct_h", "p99_jct_h")
TITLES = {"f1": "F1", "precision": "precision", "recall": "recall", "avg_jct_h": "avg JCT (h)",
          "p99_jct_h": "p99 JCT (h)"}


def bars(axes, rows, panels):
    import numpy as np

    labels = [r["arm"] for r in rows]
    colors = ["tab:red" if lab.startswith("learned") else "tab:blue" for lab in labels]
    for ax in axes[len(panels):]:
        ax.axis("off")
    for ax, col in zip(axes, panels):
        vals = [r[col] if r[col] is not None else np.nan for r in rows]
        errs = [r.get(f"{col}_std") or 0.0 for r in rows]
        ax.barh(range(len(rows)), vals, xerr=errs, color=colors, capsize=2)
        ax.set_yticks(range(len(rows)), labels if ax is axes[0] else [""] * len(rows), fontsize=7)
        ax.invert_yaxis()
        ax.set_title(TITLES[col], fontsize=8)
        ax.tick_params(axis="x", labelsize=7)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--stop-model", default=None, metavar="PATH")
    p.add_argument("--scheduler-model", default=None, metavar="PATH")
    p.add_argument("--noise", type=float, default=0.05, help="eval noise of the stop-policy comparison")
    p.add_argument("--seeds", type=int, default=10, help="held-out seeds 0..N-1")
    p.add_argument("--plot", default="compare_policies.png")
    args = p.parse_args()
    if not (args.stop_model or args.scheduler_model):
        p.error("give --stop-model and/or --scheduler-model (see the docstring for how to train them)")

    sections = []
    if args.stop_model:
        policies = [args.stop_model, *(s for s in STOPPERS if s != "none"), "srtf-est"]
        res = evaluate(policies, seeds=args.seeds, base=WorkloadConfig(noise=args.noise))
        sections.append((f"Stop-policies over srtf-est, sigma {args.noise:g}", res.rows, STOP_PANELS))
        print(f"\n## Stop-policies over srtf-est, sigma {args.noise:g}, held-out seeds 0-{args.seeds - 1}\n")
        print(res.table)
    if args.scheduler_model:
        policies = [args.scheduler_model, *(f"{s}+evalstop" for s in SCHEDULERS)]
        res = evaluate(policies, seeds=args.seeds, base=WorkloadConfig())
        sections.append(("Schedulers, all with EvalStop k=2", res.rows, SCHED_PANELS))
        print(f"\n## Schedulers with EvalStop k=2, default workload, held-out seeds 0-{args.seeds - 1}\n")
        print(res.table)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    width = max(len(panels) for _, _, panels in sections)
    fig = plt.figure(figsize=(3.2 * width + 1.5, 3.4 * len(sections)), layout="constrained")
    for sub, (title, rows, panels) in zip(fig.subfigures(len(sections), 1, squeeze=False)[:, 0], sections):
        sub.suptitle(f"{title} (red: learned; mean ± std over held-out seeds)", fontsize=9)
        bars(list(sub.subplots(1, width, squeeze=False)[0]), rows, panels)
    fig.savefig(args.plot, dpi=120)
    print(f"\nwrote {Path(args.plot).resolve()}")


if __name__ == "__main__":
    main()
