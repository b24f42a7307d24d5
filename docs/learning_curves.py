"""Learning curves of `evalstop-gym train --tensorboard DIR` runs as one PNG.

    PYTHONPATH=. python3 docs/learning_curves.py OUT.png "label=TB_RUN_DIR" ["label=TB_RUN_DIR" ...]

Each TB_RUN_DIR is one run's folder under the --tensorboard directory (for example
``tb/ppo-EvalStop-StopControl-v0-seed0_1``), or a model folder written by ``train``
(its ``config.json`` keeps every validation round, so a run trained without
``--tensorboard`` gives its validation curve; it has no training curve). A
label ``GROUP/NAME`` draws the run in its group's colour, the group named once
in the legend. Left: mean training-episode return
(SB3's ``rollout/ep_rew_mean``, the last 100 episodes); right: mean validation
return (``eval/mean_reward``, the rounds model selection reads). Training and
validation episodes differ in length where a recipe trains on one-job episodes,
so the panels have their own scales. Reads the event files with TensorBoard's
own ``EventAccumulator``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

PANELS = (("rollout/ep_rew_mean", "training episode return (mean of last 100)"),
          ("eval/mean_reward", "validation return (mean of the rounds' episodes)"))


def scalars(run_dir: str, tag: str) -> tuple[list[int], list[float]]:
    """(steps, values) of one scalar of a run; empty if the run did not log it."""
    config = Path(run_dir) / "config.json"
    if config.is_file():   # a model folder: the validation rounds its config keeps
        rounds = json.loads(config.read_text(encoding="utf-8")).get("validation_rounds", [])
        if tag != "eval/mean_reward" or not rounds:
            return [], []
        return [r["timesteps"] for r in rounds], [r["mean_return"] for r in rounds]
    acc = EventAccumulator(run_dir, size_guidance={"scalars": 0})
    acc.Reload()
    if tag not in acc.Tags().get("scalars", []):
        return [], []
    events = acc.Scalars(tag)
    return [e.step for e in events], [e.value for e in events]


def main(argv: list[str]) -> int:
    if len(argv) < 2 or any("=" not in a for a in argv[1:]):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    out, runs = argv[0], [a.split("=", 1) for a in argv[1:]]
    curves = {tag: [(label, *scalars(run_dir, tag)) for label, run_dir in runs] for tag, _ in PANELS}
    panels = [(tag, title) for tag, title in PANELS if any(c[1] for c in curves[tag])]  # panels with data only
    if not panels:
        print("no run logged a curve", file=sys.stderr)
        return 1
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4), squeeze=False)
    # a label GROUP/NAME draws its run in its group's colour, the group named once in the legend
    groups = list(dict.fromkeys(label.split("/")[0] for label, _ in runs))
    colour = {g: f"C{i % 10}" for i, g in enumerate(groups)}
    for ax, (tag, title) in zip(axes[0], panels):
        named = set()
        for label, steps, values in curves[tag]:
            group = label.split("/")[0]
            if steps:
                ax.plot(steps, values, color=colour[group], label=None if group in named else group,
                        marker="o" if tag.startswith("eval") else None, ms=3, alpha=0.8)
                named.add(group)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("environment steps")
        ax.grid(alpha=0.3)
    for ax in axes[0]:   # each panel names its own groups (a model folder has no training curve)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
