"""Readable tables of metrics (tabulate)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from tabulate import tabulate

from .metrics import METRIC_KEYS


def noise_text(cfg) -> str:
    """How a :class:`~evalstop_gym.config.WorkloadConfig`'s eval scores are noised, in words."""
    if cfg.world.eval_items:
        return f"eval noise from each job's eval-set size plus sigma {cfg.noise:g}"
    return f"eval noise sigma {cfg.noise:g}"


def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def format_metrics(metrics: Mapping[str, Any], title: str = "") -> str:
    """One episode's metrics as a two-column table."""
    keys = [*METRIC_KEYS, *sorted(k for k in metrics if k.startswith("utilization_"))]
    rows = [(k, fmt(metrics[k])) for k in keys if k in metrics]
    # cells are printed as fmt wrote them: tabulate's own number parsing would turn 2235.306 into 2235.31
    table = tabulate(rows, headers=("metric", "value"), tablefmt="github", disable_numparse=True,
                     colalign=("left", "right"))
    return f"{title}\n{table}" if title else table


def format_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], fmt_: str = "github") -> str:
    """Rows of dicts as a table with the given columns (Markdown by default)."""
    return tabulate([[fmt(r.get(c)) for c in columns] for r in rows], headers=list(columns), tablefmt=fmt_)
