"""The scorecard: every metric per row and over the suite, each paired against the reference arms.

Every arm plays the same workloads (row x seed), so an arm and a reference form
pairs. Per row the pairs are the row's seeds; over the suite they are every
(row, seed). A size metric (:data:`~.play.RELATIVE`: JCT, makespan, waste,
GPU-hours) is compared as the mean per-workload % change of the arm against the
reference (negative: the arm is lower); a rate or score (precision, recall,
F1, FPR, regret, preemptions) as the mean difference arm - reference, in its
own unit. Each comes with a 95% t-interval and the two-sided t-test p of the
same per-workload values (:mod:`evalstop_gym.experiments.stats`), so a
change whose interval excludes 0 has p < 0.05 before correction. Over the
suite a comparison also gets a stratified bootstrap interval (rows kept,
seeds resampled within each row, as rliable does; it does not assume the
workloads are one normal sample) and the interquartile mean. Workloads where a metric is undefined
for either arm (no stop: no precision) are left out of that metric's pairs.

Verdicts (:func:`verdicts`): on the :data:`HEADLINE` metrics against every
reference, a policy is ``better`` or ``worse`` only if the Holm-adjusted p
is below 0.05; otherwise it is a ``tie``, whatever the means say. A results
file adjusts over the policy's own headline comparisons; the leaderboard
adjusts over every headline comparison on the page (:func:`board_verdicts`),
so a policy's verdict there does not depend on how many others were tried.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from .play import HIGHER_BETTER, METRICS, RELATIVE

HEADLINE = ("avg_jct_h", "compute_waste_gpu_h", "f1", "delivered_quality_regret")
ALPHA = 0.05
BOOTSTRAP_REPS = 2000   # resamples of the stratified bootstrap (seeded: the same interval on every machine)


def _mean(xs: Sequence[float | None]) -> float | None:
    v = [x for x in xs if x is not None]
    return sum(v) / len(v) if v else None


def _pairs(arm: Sequence[Any], ref: Sequence[Any], strata: Sequence[Any] | None = None):
    ok = [(r, a, s) for a, r, s in zip(arm, ref, strata or [None] * len(arm)) if a is not None and r is not None]
    return [r for r, _, _ in ok], [a for _, a, _ in ok], [s for *_, s in ok]


def per_workload(ref: Sequence[float], arm: Sequence[float], metric: str):
    """The per-workload values a comparison averages: % change for a size metric (0 where the reference is
    0, as :func:`~evalstop_gym.experiments.stats.paired_relative_change`), else the difference."""
    import numpy as np

    r, a = np.asarray(ref, dtype=float), np.asarray(arm, dtype=float)
    if metric not in RELATIVE:
        return a - r
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(r != 0, 100.0 * (a - r) / r, 0.0)


def stratified_bootstrap(values: Sequence[float], strata: Sequence[Any], *, reps: int = BOOTSTRAP_REPS,
                         seed: int = 0) -> list[float | None]:
    """95% percentile interval of the mean of ``values`` when each stratum (a row) is resampled on its own,
    with replacement, keeping its size (rliable's stratified bootstrap: rows stay rows, seeds vary)."""
    import numpy as np

    if len(values) < 2:
        return [None, None]
    rng = np.random.default_rng(seed)
    groups: dict[Any, list[float]] = {}
    for v, s in zip(values, strata):
        groups.setdefault(s, []).append(v)
    total = np.zeros(reps)
    for g in groups.values():   # in first-seen order: the same draws on every machine
        x = np.asarray(g, dtype=float)
        total += x[rng.integers(0, x.size, size=(reps, x.size))].sum(axis=1)
    lo, hi = np.percentile(total / len(values), [2.5, 97.5]).tolist()
    return [lo, hi]


def compare(arm: Sequence[float | None], ref: Sequence[float | None], metric: str,
            strata: Sequence[Any] | None = None) -> dict[str, Any]:
    """Paired comparison of ``arm`` against ``ref`` (same workloads, same order) on ``metric``.

    With ``strata`` (each workload's row) also the stratified bootstrap interval (``ci_boot``,
    :func:`stratified_bootstrap`) and the interquartile mean (``iqm``: the mean of the middle half of the
    per-workload values, robust to a few extreme rows) of the same per-workload values."""
    from scipy.stats import trim_mean

    from ..experiments.stats import paired_difference, paired_relative_change

    r, a, s = _pairs(arm, ref, strata)
    # the p-value tests the very per-workload values the interval is on (% changes for a size metric)
    d = (paired_relative_change if metric in RELATIVE else paired_difference)(r, a)
    out = {"unit": "%" if metric in RELATIVE else "abs", "n": d.n, "change": d.diff, "ci": [d.ci_lo, d.ci_hi],
           "p": d.p_t}
    if strata is not None:
        x = per_workload(r, a, metric)
        out["ci_boot"] = stratified_bootstrap(x.tolist(), s)
        out["iqm"] = float(trim_mean(x, 0.25)) if x.size else None
    return out


def scorecard(values: Mapping[str, Mapping[str, list]], references: Mapping[str, Mapping[str, Mapping[str, list]]],
              ) -> dict[str, Any]:
    """The scorecard of one arm.

    ``values``: row -> metric -> per-seed values; ``references``: reference label -> the same for it.
    """
    rows = list(values)
    out: dict[str, Any] = {
        "per_row": {row: {m: _mean(values[row][m]) for m in METRICS} for row in rows},
        "aggregate": {m: _mean([x for row in rows for x in values[row][m]]) for m in METRICS},
        "vs": {}}
    for label, ref in references.items():
        common = [row for row in rows if row in ref]
        strata = [row for row in common for _ in values[row][METRICS[0]]]
        out["vs"][label] = {
            "aggregate": {m: compare([x for row in common for x in values[row][m]],
                                     [x for row in common for x in ref[row][m]], m, strata) for m in METRICS},
            "per_row": {row: {m: compare(values[row][m], ref[row][m], m) for m in METRICS} for row in common}}
    return out


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm-Bonferroni adjusted p-values (``None`` stays ``None`` and does not count in the family)."""
    order = sorted((p, i) for i, p in enumerate(pvalues) if p is not None)
    m = len(order)
    out: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, (p, i) in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def _verdict(metric: str, change: float | None, p_holm: float | None) -> str:
    if p_holm is None or p_holm >= ALPHA or not change:
        return "tie"
    return "better" if (change < 0) != (metric in HIGHER_BETTER) else "worse"


def verdicts(card: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``better`` / ``worse`` / ``tie`` on each headline metric against each reference, Holm-corrected over the
    policy's own headline tests (a results file's family; the leaderboard widens it, :func:`board_verdicts`)."""
    tests = [(label, m, vs["aggregate"][m]) for label, vs in card["vs"].items() for m in HEADLINE]
    adjusted = holm([c["p"] for _, _, c in tests])
    return [{"reference": label, "metric": m, "change": c["change"], "unit": c["unit"], "ci": c["ci"],
             "p": c["p"], "p_holm": p_holm, "verdict": _verdict(m, c["change"], p_holm)}
            for (label, m, c), p_holm in zip(tests, adjusted)]


def board_verdicts(cards: Sequence[Mapping[str, Any]]) -> list[list[dict[str, Any]]]:
    """Each card's verdicts with Holm over every headline test of every card together (a page's family: all
    its policies x references x :data:`HEADLINE` metrics), in the cards' order; a test's ``p`` is unchanged,
    its ``p_holm`` and ``verdict`` are the board's."""
    tests = [(i, v) for i, card in enumerate(cards) for v in card["verdicts"]]
    adjusted = holm([v["p"] for _, v in tests])
    out: list[list[dict[str, Any]]] = [[] for _ in cards]
    for (i, v), p_holm in zip(tests, adjusted):
        out[i].append({**v, "p_holm": p_holm, "verdict": _verdict(v["metric"], v["change"], p_holm)})
    return out
