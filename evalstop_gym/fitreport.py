"""The fit report: a world's runs against its library's, per job type, on the shape of their gold curves.

Per run (a :class:`~evalstop_gym.curvelog.LoggedRun` with a ``gold`` column: the start and its ``E``
checkpoints; proxy: ``proxy_reward``), :func:`run_shape` measures

* **hacking**: the label (:func:`evalstop_gym.curvelog.label_gold` on the run's own ``E`` checkpoints), 0 or 1;
* **peak index**: the checkpoint of gold's first maximum (0: the start);
* **drop after the peak**: gold at its peak minus gold at the last checkpoint (score units);
* **end minus start**: gold at the last checkpoint minus gold at the start;
* **corr(proxy, gold)**: Pearson's correlation of proxy and gold over the checkpoints where both are logged
  (left out where either is constant, or the run has no proxy);
* **gold noise**: the label's own noise estimate of gold (:func:`evalstop_gym.label.curve_noise`, peak
  curvature left out);
* **lag-1 autocorrelation of gold steps**: Pearson's correlation of consecutive differences of gold (left
  out under 4 steps or where the steps are constant).

:func:`shape_table` gives each statistic's p10 / p50 / p90 in both sets of runs and the two-sample
Kolmogorov-Smirnov p-value (``scipy.stats.ks_2samp``, two-sided, exact where scipy chooses it) of the two
samples; for the 0/1 hacking indicator the KS distance is the difference of the two shares. A world is
sampled (:func:`world_runs`) on seeds no fit uses (:data:`REPORT_SEED`) and at the library's checkpoint
count, so the report measures the world, not the fit's own draws.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

STATISTICS = ("hacking", "peak index", "drop after the peak", "end minus start", "corr(proxy, gold)",
              "gold noise", "lag-1 autocorr of gold steps")
REPORT_TYPES = ("rlhf", "dpo")   # the job types with a proxy: LoRA runs have nothing to over-optimise
REPORT_SEED = 7919    # the world's samples: no fit draws from it (fit.FIT_SEED)
KS_BAR = 0.05         # a statistic matches when its KS p-value is above this


def _corr(a: np.ndarray, b: np.ndarray) -> float:
    if a.size < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return math.nan
    return float(np.corrcoef(a, b)[0, 1])


def run_shape(run) -> dict[str, float]:
    """The statistics of one logged run with gold (module docstring); NaN where one is undefined."""
    from .curvelog import label_gold
    from .label import curve_noise

    steps, gold = run.series("gold")
    evals = gold.size - 1
    top = int(np.argmax(gold))
    proxy = np.interp(steps, run.step, run.proxy_reward, left=math.nan, right=math.nan) \
        if np.isfinite(run.proxy_reward).any() else np.full(gold.shape, math.nan)
    both = np.isfinite(proxy)
    diffs = np.diff(gold)
    return {"hacking": float(label_gold(run, evals).hacking) if evals >= 1 else math.nan,
            "peak index": float(top),
            "drop after the peak": float(gold[top] - gold[-1]),
            "end minus start": float(gold[-1] - gold[0]),
            "corr(proxy, gold)": _corr(proxy[both], gold[both]),
            "gold noise": float(curve_noise(gold[None, :], np.array([top]))[0]),
            "lag-1 autocorr of gold steps": _corr(diffs[1:], diffs[:-1]) if diffs.size >= 4 else math.nan}


@dataclass(frozen=True)
class ShapeRow:
    """One statistic of one job type: quantiles (p10, p50, p90) and mean of the library's runs and the world's,
    how many runs each statistic is defined for, and the KS p-value (NaN with fewer than 2 values on a side)."""

    job_type: str
    statistic: str
    library_runs: int
    world_runs: int
    library: tuple[float, float, float]
    world: tuple[float, float, float]
    library_mean: float
    world_mean: float
    ks_p: float

    @property
    def matches(self) -> bool:
        return self.ks_p > KS_BAR


def _values(shapes: list[dict], name: str) -> np.ndarray:
    v = np.array([s[name] for s in shapes], dtype=float)
    return v[np.isfinite(v)]


def measure(library: dict, world: dict) -> dict[str, tuple[list[dict], list[dict]]]:
    """Each run's :func:`run_shape`, per job type of :data:`REPORT_TYPES` present in both (the type from a run's
    name, :func:`evalstop_gym.fit.job_type_of`): ``{type: (library's, world's)}``, measured once for the table
    and the figure."""
    from .fit import job_type_of

    out = {}
    for t in REPORT_TYPES:
        a = [run_shape(r) for n, r in library.items() if job_type_of(n) == t]
        b = [run_shape(r) for n, r in world.items() if job_type_of(n) == t]
        if a and b:
            out[t] = (a, b)
    return out


def shape_table(shapes: dict[str, tuple[list[dict], list[dict]]]) -> list[ShapeRow]:
    """Per job type of :func:`measure`'s ``shapes`` and statistic: a :class:`ShapeRow`."""
    from scipy.stats import ks_2samp

    rows = []
    for t, (a, b) in shapes.items():
        for name in STATISTICS:
            va, vb = _values(a, name), _values(b, name)
            if va.size == 0 or vb.size == 0:
                continue
            p = float(ks_2samp(va, vb).pvalue) if min(va.size, vb.size) >= 2 else math.nan
            rows.append(ShapeRow(t, name, int(va.size), int(vb.size),
                                 tuple(float(q) for q in np.quantile(va, [0.1, 0.5, 0.9])),
                                 tuple(float(q) for q in np.quantile(vb, [0.1, 0.5, 0.9])),
                                 float(va.mean()), float(vb.mean()), p))
    return rows


def world_runs(cal, library: dict, rlhf_exploitable: float, ref_evals: int, per_type: int = 400,
               seed: int = REPORT_SEED) -> dict:
    """``per_type`` runs of each job type of the library sampled from world ``cal`` at the library's checkpoint
    count ``E`` (the median over its runs' gold checkpoints), on ``seed``; the world's drift is per checkpoint
    of a ``ref_evals``-eval run (:func:`evalstop_gym.fit.at_evals`)."""
    from .fit import at_evals, job_type_of, sample_runs

    types = [t for t in REPORT_TYPES if any(job_type_of(n) == t for n in library)]
    evals = int(np.median([r.series("gold")[1].size - 1 for r in library.values()]))
    return sample_runs(at_evals(cal, evals, ref_evals), {t: per_type for t in types}, evals, seed,
                       rlhf_exploitable)


def _cell(row: ShapeRow, side: str) -> str:
    if row.statistic == "hacking":
        return f"share {getattr(row, side + '_mean'):.2f}"
    q = getattr(row, side)
    if row.statistic == "peak index":
        return " / ".join(f"{x:.0f}" for x in q)
    if "corr" in row.statistic:
        return " / ".join(f"{x:+.2f}" for x in q)
    return " / ".join(f"{x:.3f}" for x in q)


def format_report(rows: list[ShapeRow]) -> str:
    """A Markdown table of ``rows`` (the hacking row gives the two shares instead of quantiles)."""
    lines = ["| job type | statistic | library p10 / p50 / p90 | world p10 / p50 / p90 | runs (library / world) "
             "| KS p |", "|---|---|---|---|---|---|"]
    for r in rows:
        mark = "" if r.matches else " (below 0.05)"
        lines.append(f"| {r.job_type.upper()} | {r.statistic} | {_cell(r, 'library')} | {_cell(r, 'world')} "
                     f"| {r.library_runs} / {r.world_runs} | {r.ks_p:.3g}{mark} |")
    return "\n".join(lines)


def plot_shapes(shapes: dict[str, tuple[list[dict], list[dict]]], rows: list[ShapeRow], path: str) -> None:
    """A figure of :func:`shape_table`: per job type (rows) and statistic (columns), the library's and the world's
    empirical CDFs (the hacking shares as bars), each panel titled with its KS p-value (matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    types = [t for t in shapes if any(r.job_type == t for r in rows)]
    fig, axes = plt.subplots(len(types), len(STATISTICS), figsize=(2.3 * len(STATISTICS), 2.2 * len(types)),
                             squeeze=False)
    for i, t in enumerate(types):
        sides = dict(zip(("library", "world"), shapes[t]))
        by_name = {r.statistic: r for r in rows if r.job_type == t}
        for j, name in enumerate(STATISTICS):
            ax = axes[i][j]
            row = by_name.get(name)
            if name == "hacking" and row is not None:
                ax.bar(["library", "world"], [row.library_mean, row.world_mean], color=["C0", "C1"])
                ax.set_ylim(0, 1)
            else:
                for (side, feats), style in zip(sides.items(), ("-", "--")):
                    v = np.sort(_values(feats, name))
                    if v.size:
                        ax.step(v, np.arange(1, v.size + 1) / v.size, style, where="post", label=side)
            p = f"KS p {row.ks_p:.2g}" if row is not None else "n/a"
            ax.set_title(f"{t.upper()}: {name}\n{p}", fontsize=7)
            ax.tick_params(labelsize=6)
    axes[0][1].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
