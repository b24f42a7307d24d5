"""``evalstop-gym replay``: what each stopper would have done to logged runs (docs/replay.md)."""

from __future__ import annotations

import argparse
import json
import os

ORDER = 46

# transformers' EarlyStoppingCallback(early_stopping_patience=2) is the shipped patience rule at patience=2:
# an eval that does not beat the best so far adds one to the wait, a new best resets it, stop at the 2nd.
DEFAULT_STOPPERS = ("evalstop:k=2", "patience:patience=2", "cusum", "smoothed", "droptest", "divergence",
                    "lossplateau")


def add_parser(sub) -> None:
    p = sub.add_parser("replay", help="what each stopper would have done to your logged runs",
                       description="Read training logs (trainer_state.json files or output folders, "
                                   "TensorBoard, CSV / JSONL curve logs, Lightning metrics.csv, Ray Tune "
                                   "progress.csv / result.json, MLflow mlruns/, W&B CSV exports), feed each "
                                   "run's evals to each stopper as live, and report where it would have "
                                   "stopped, what it kept, and whether the run later beat it.")
    p.add_argument("--curves", required=True, nargs="+", metavar="PATH",
                   help="log files, folders or globs (a folder is searched; each run once)")
    p.add_argument("--metric", default=None, metavar="NAME",
                   help="the metric to judge (any logged key; default: the run's own, else the eval loss, "
                        "else its only eval metric)")
    p.add_argument("--mode", choices=("auto", "min", "max"), default="auto",
                   help="which way the metric improves (default %(default)s: the run's own, else by name)")
    p.add_argument("--stopper", action="append", default=None, metavar="NAME[:k=v,...]",
                   help="a stopper and its parameters, repeatable (default: " + ", ".join(DEFAULT_STOPPERS) + ")")
    p.add_argument("--json", action="store_true", help="print a JSON list, one object per run")
    p.add_argument("--plot", default=None, metavar="DIR", help="draw each run's curve with stops and kept "
                                                                "bests marked, one PNG per run")
    p.set_defaults(func=run)


def parse_stopper(spec: str) -> tuple[str, dict, str]:
    """``NAME[:k=v,...]`` as ``(name, params, label)``; values are numbers where they read as numbers."""
    from ..baselines import STOPPERS, stopper_params
    from ..config import ConfigError

    name, _, rest = spec.partition(":")
    name = name.strip()
    if name not in STOPPERS or name == "none":
        raise ConfigError("stopper", name, f"must be one of {', '.join(s for s in STOPPERS if s != 'none')}")
    params = {}
    for item in filter(None, (x.strip() for x in rest.split(","))):
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or key not in stopper_params(name):
            raise ConfigError("stopper", spec, f"parameters are k=v pairs among {', '.join(stopper_params(name))}")
        value = value.strip()
        for cast in (int, float):
            try:
                params[key] = cast(value)
                break
            except ValueError:
                continue
        else:
            params[key] = {"true": True, "false": False, "none": None}.get(value.lower(), value)
    label = name + "".join(f" {k}={v}" for k, v in params.items())
    return name, params, label


def replay_run(run, choice, stoppers) -> list:
    """:func:`~evalstop_gym.integrations.replay.judge` of ``run`` on ``choice`` under each stopper."""
    from ..integrations.replay import judge
    from ..logs.metric import TRAIN_LOSS_KEYS, training_series

    steps, scores = run.series[choice.metric]
    return [judge(steps, scores, name, mode=choice.mode, max_steps=run.max_steps, label=label,
                  loss=training_series(run, TRAIN_LOSS_KEYS), proxy=training_series(run, ("proxy_reward",)),
                  **params)
            for name, params, label in stoppers]


def plot_runs(out_dir: str, judged: list) -> list[str]:
    """One PNG per judged run: its metric by step, each stopper's stop (a vertical line) and kept best (a
    marker). Returns the paths written."""
    import re

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..files import prepare_out

    prepare_out(out_dir, field="plot")
    paths = []
    for run, choice, verdicts in judged:
        steps, scores = run.series[choice.metric]
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.plot(steps, scores, "o-", color="0.3", ms=3, label=choice.metric)
        colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for i, v in enumerate(verdicts):
            if v.stop_step is None:
                continue
            c = colours[i % len(colours)]
            ax.axvline(v.stop_step, color=c, ls="--", lw=1, label=f"{v.stopper}: stop at eval {v.stop_eval}")
            ax.plot([v.best_step], [v.best_score], "*", color=c, ms=12)
        ax.set_xlabel("step")
        ax.set_ylabel(f"{choice.metric} ({'lower' if choice.mode == 'min' else 'higher'} is better)")
        ax.set_title(run.name, fontsize=9)
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = os.path.join(out_dir, re.sub(r"[^A-Za-z0-9._-]+", "_", run.name).strip("_") + ".png")
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths


def _fmt(x, digits=4):
    return "-" if x is None else f"{x:.{digits}g}" if isinstance(x, float) else str(x)


def run(args: argparse.Namespace) -> int:
    from ..logs import LogError, read_logs
    from ..logs.metric import choose
    from ..report import format_table

    stoppers = [parse_stopper(s) for s in (args.stopper or DEFAULT_STOPPERS)]
    runs, refused = read_logs(args.curves)
    judged, out = [], []
    for r in runs:
        try:
            c = choose(r, args.metric, args.mode)
        except LogError as e:
            refused.append(e)
            continue
        verdicts = replay_run(r, c, stoppers)
        judged.append((r, c, verdicts))
        out.append({"run": r.name, "source": r.source, "metric": c.metric, "mode": c.mode,
                    "metric_from": c.metric_from, "mode_from": c.mode_from, "note": c.note,
                    "evals": int(r.series[c.metric][0].size),
                    "stops": [{"stopper": v.stopper, "stop_eval": v.stop_eval, "stop_step": v.stop_step,
                               "best_step": v.best_step, "best_score": v.best_score, "final_score": v.final_score,
                               "evals_saved": v.evals_saved, "steps_saved_share": v.steps_saved_share,
                               "false_stop": v.false_stop, "delivered_loss": v.delivered_loss}
                              for v in verdicts]})
    if args.plot:
        for path in plot_runs(args.plot, judged):
            if not args.json:
                print(f"wrote {path}")
    if args.json:
        print(json.dumps(out, indent=1))
        return 0 if out else 2
    print(f"{len(judged)} runs judged, {len(refused)} refused")
    for e in refused:
        print(f"  refused: {e}")
    for r, c, verdicts in judged:
        extra = f"; note: {c.note}" if c.note else ""
        notes = "".join(f"; {n}" for n in r.notes)
        print(f"\n{r.name} ({r.fmt}): {c.metric}, {c.mode} ({c.metric_from}; mode: {c.mode_from}), "
              f"{verdicts[0].evals} evals{extra}{notes}")
        rows = [{"stopper": v.stopper, "stop eval": f"{v.stop_eval}/{v.evals}" if v.stop_eval else "never",
                 "stop step": _fmt(v.stop_step), "kept best": f"{_fmt(v.best_score)} @ {_fmt(v.best_step)}",
                 "final": _fmt(v.final_score), "evals saved": v.evals_saved,
                 "steps saved": f"{v.steps_saved_share:.0%}", "false stop": "-" if v.false_stop is None
                 else "yes" if v.false_stop else "no", "loss vs final": _fmt(v.delivered_loss)} for v in verdicts]
        print(format_table(rows, list(rows[0])))
    if judged:
        print(f"\ntotals over {len(judged)} runs")
        rows = []
        for i, (_, _, label) in enumerate(stoppers):
            vs = [v[i] for _, _, v in judged]
            fired = [v for v in vs if v.stop_eval]
            rows.append({"stopper": label, "fired": len(fired), "false stops": sum(bool(v.false_stop) for v in fired),
                         "evals saved": sum(v.evals_saved for v in vs),
                         "mean steps saved": f"{sum(v.steps_saved_share for v in vs) / len(vs):.0%}"})
        print(format_table(rows, list(rows[0])))
    print("no hacking labels: a stop is judged against the run's own later evals (false stop), not a gold score")
    return 0 if judged else 2
