"""One PNG per experiment: a panel per plotted column, the paper's figures as reference lines.

Sweeps over a number (noise, base rate, k, evals per job, load) are drawn as
lines, one per arm; everything else as bars. Error bars are the standard
deviation over seeds for metrics and the 95% CI for gains. Figures are built
on the Agg canvas directly (no pyplot, no global backend switch).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from matplotlib.figure import Figure

from .tables import HEADERS, fmt_x
from .spec import Experiment

# meaningless without a stopper (nothing is ever stopped): not plotted for the none arm
DETECTION_ONLY = {"precision", "recall", "fpr", "f1", "detection_delay_evals"}
LABELS = {**HEADERS, "jct_gain_pct": "JCT gain vs none (%)", "waste_cut_pct": "waste cut vs none (%)"}
# one colour per method (stopper) in every figure; variants of a method in one figure (E6's noise levels)
# differ by line style or hatch. Methods outside this list share the two remaining colours.
METHOD_COLORS = {name: f"C{i}" for i, name in enumerate(
    ("none", "stopat", "lossplateau", "evalstop", "patience", "cusum", "smoothed", "learned"))}
VARIANTS = (("-", ""), ("--", "//"), (":", ".."), ("-.", "xx"))


def arm_styles(rows: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, tuple[str, str]]]:
    """``arm -> (colour, (line style, hatch))``: the colour is the method's, the same in every figure."""
    out, seen = {}, {}
    for r in rows:
        arm, method = r["arm"], r["stopper"]
        if arm not in out:
            n = seen[method] = seen.get(method, -1) + 1
            color = METHOD_COLORS.get(method) or f"C{8 + sum(map(ord, method)) % 2}"
            out[arm] = (color, VARIANTS[n % len(VARIANTS)])
    return out


def _value(row: Mapping[str, Any], column: str) -> tuple[float | None, tuple[float, float]]:
    """The plotted value and its (below, above) error bar."""
    y = row.get(column)
    if y is None:
        return None, (0.0, 0.0)
    if column.endswith("_pct"):
        stem = column[:-4]
        lo, hi = row.get(f"{stem}_ci_lo"), row.get(f"{stem}_ci_hi")
        return y, (0.0, 0.0) if lo is None else (y - lo, hi - y)
    std = row.get(f"{column}_std") or 0.0
    return y, (std, std)


def _is_numeric_sweep(exp: Experiment, rows: Sequence[Mapping[str, Any]]) -> bool:
    xs = [r["x"] for r in rows if r["x"] is not None]
    return exp.x_name is not None and bool(xs) and all(isinstance(x, (int, float)) for x in xs)


def _lines(ax, rows, column: str, styles) -> None:
    for arm, (color, (line, _)) in styles.items():
        pts = [(r["x"], *_value(r, column)) for r in rows if r["arm"] == arm and r["x"] is not None]
        pts = [p for p in pts if p[1] is not None]
        if pts:
            xs, ys, errs = zip(*pts)
            ax.errorbar(xs, ys, yerr=list(zip(*errs)), marker="o", ms=3, capsize=2, label=arm, color=color,
                        ls=line)


def _bars(ax, exp: Experiment, rows, column: str, styles) -> None:
    if exp.x_name is None:   # one bar per arm
        groups = {r["arm"]: {None: r} for r in rows}
    else:                    # a group of bars per sweep value, one bar per arm
        groups = {}
        for r in rows:
            groups.setdefault(fmt_x(r["x"]), {})[r["arm"]] = r
    series = list(dict.fromkeys(arm for g in groups.values() for arm, r in g.items()
                                if _value(r, column)[0] is not None)) or [None]
    width = 0.8 / len(series)
    for i, arm in enumerate(series):
        bars = []   # (position, value, below, above, color, hatch)
        for j, (name, group) in enumerate(groups.items()):
            y, (below, above) = _value(group[arm], column) if arm in group else (None, (0, 0))
            if y is not None:
                color, (_, hatch) = styles[name if arm is None else arm]
                bars.append((j + (i - (len(series) - 1) / 2) * width, y, below, above, color, hatch))
        if bars:
            xs, ys, lo, hi, cs, hs = zip(*bars)
            ax.bar(xs, ys, width=width, yerr=[lo, hi], capsize=2, color=cs, hatch=hs, edgecolor="white",
                   label=arm)
    ax.set_xticks(range(len(groups)))
    tilt = exp.x_name is None or max(len(str(g)) for g in groups) > 8  # long names would overlap
    ax.set_xticklabels(list(groups), rotation=30 if tilt else 0, ha="right" if tilt else "center", fontsize=7)


def plot_experiment(exp: Experiment, rows: Sequence[Mapping[str, Any]], path: str | Path) -> None:
    """Write ``exp``'s figure to ``path`` (PNG)."""
    n = len(exp.plot)
    fig = Figure(figsize=(3.4 * n, 3.6), layout="constrained")
    axes = fig.subplots(1, n, squeeze=False)[0]
    numeric = _is_numeric_sweep(exp, rows)
    styles = arm_styles(rows)
    for ax, column in zip(axes, exp.plot):
        shown = [r for r in rows if not (column in DETECTION_ONLY and r["stopper"] == "none")]
        if numeric:
            _lines(ax, shown, column, styles)
            ax.set_xlabel(exp.x_name)
        else:
            _bars(ax, exp, shown, column, styles)
        for ref_col, value, label in exp.plot_refs:
            if ref_col != column:
                continue
            if isinstance(value, tuple):
                ax.axhspan(*value, color="gray", alpha=0.15, label=label)
            else:
                ax.axhline(value, color="gray", ls="--", lw=1, label=label)
        ax.set_title(LABELS.get(column, column), fontsize=9)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    for ax in axes[1:]:   # reference lines may live in later panels
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    if labels:
        fig.legend(handles, labels, loc="outside right center", fontsize=7)
    fig.suptitle(f"{exp.name}: {exp.title}", fontsize=10)
    from ..files import atomic_open

    with atomic_open(path, "wb", field="plot") as f:   # all or nothing, a full disk in one line
        fig.savefig(f, format=os.path.splitext(os.fspath(path))[1][1:] or "png", dpi=100, metadata={"Software": None})
