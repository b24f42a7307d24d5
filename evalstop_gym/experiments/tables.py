"""From per-run metrics to an experiment's rows, Markdown and CSV tables, and claim verdicts.

A row is one :class:`~evalstop_gym.experiments.spec.Point` aggregated over the
seeds: ``<metric>`` (mean) and ``<metric>_std`` for every metric of
:data:`~evalstop_gym.metrics.METRIC_KEYS`, and for a stopper arm with a
no-stopper baseline in the same experiment the paired gains
``<gain>_pct, <gain>_ci_lo, <gain>_ci_hi, <gain>_p_t, <gain>_p_wilcoxon`` for
``jct_gain`` (average JCT), ``waste_cut`` (compute waste), ``gpu_hours_cut``
(GPU-hours run) and ``jct_gain_kept`` (average JCT of the jobs the arm did not
stop, against the same jobs' JCT without a stopper: who pays or gains besides
the stopped jobs). Everything here
is a pure function of the results, so the same results give byte-identical
tables whatever order the runs finished in.
"""

from __future__ import annotations

import csv
import io
import json
import textwrap
from typing import Any, Mapping, Sequence

from tabulate import tabulate

from ..config import WorkloadConfig
from ..metrics import METRIC_KEYS
from ..report import fmt
from .runner import JOBS_KEY, RunSpec
from .spec import GAINS, Claim, Experiment
from .stats import paired_gain, summarize

GAIN_FIELDS = ("pct", "ci_lo", "ci_hi", "p_t", "p_wilcoxon")
CONSOLE_WIDTH = 120
ARM_WIDTH = 40          # an arm label longer than this wraps onto more lines of its cell

HEADERS = {
    "precision": "precision", "recall": "recall", "fpr": "FPR", "f1": "F1",
    "avg_jct_h": "avg JCT (h)", "p50_jct_h": "p50 JCT (h)", "p99_jct_h": "p99 JCT (h)",
    "avg_queue_h": "avg queue (h)", "utilization": "utilization", "makespan_h": "makespan (h)",
    "compute_waste_gpu_h": "waste (GPU-h)", "gpu_hours": "GPU-h",
    "detection_delay_evals": "delay (evals)", "delivered_quality": "delivered quality",
    "delivered_quality_regret": "quality regret",
    "jct_gain": "JCT gain vs none [95% CI]", "jct_gain_p": "JCT p (t / W)",
    "waste_cut": "waste cut vs none [95% CI]", "waste_cut_p": "waste p (t / W)",
    "jct_gain_kept": "JCT gain, jobs not stopped", "gpu_hours_cut": "GPU-h cut",
    "jct_gain_kept_p": "kept p (t / W)", "gpu_hours_cut_p": "GPU-h p (t / W)",
    "fragmentation_gpus": "fragmented GPUs", "spread_lost_gpu_h": "lost to spread (GPU-h)",
}
DIGITS = {"avg_jct_h": 2, "p50_jct_h": 2, "p99_jct_h": 1, "avg_queue_h": 2, "makespan_h": 1,
          "compute_waste_gpu_h": 0, "gpu_hours": 0, "detection_delay_evals": 2, "fragmentation_gpus": 2,
          "spread_lost_gpu_h": 0, "preemptions": 1}


def aggregate(exp: Experiment, results: Mapping[str, Mapping[str, Any]], base: WorkloadConfig,
              seeds: Sequence[int]) -> list[dict[str, Any]]:
    """One row per point of ``exp``; ``results`` maps run id to metrics and must hold every run."""
    def runs(point):
        return [results[RunSpec.of(point, base, s).run_id] for s in seeds]

    rows = []
    for point in exp.points:
        mine = runs(point)
        row: dict[str, Any] = {"experiment": exp.name, "x": point.x, "arm": point.arm,
                               "scheduler": point.scheduler, "stopper": point.stopper,
                               "params": json.dumps(dict(point.params), sort_keys=True),
                               **dict(point.workload), "seeds": len(seeds)}
        for m in METRIC_KEYS:
            s = summarize([r[m] for r in mine])
            row[m], row[f"{m}_std"] = s.mean, s.std
        baseline = exp.baseline_of(point)
        if baseline is not None:
            theirs = runs(baseline)
            for gain, metric in GAINS.items():
                if gain == "jct_gain_kept":
                    pairs = [kept_jct(t, m) for t, m in zip(theirs, mine)]
                    if any(p is None for p in pairs):
                        continue
                    g = paired_gain([p[0] for p in pairs], [p[1] for p in pairs])
                else:
                    g = paired_gain([r[metric] for r in theirs], [r[metric] for r in mine])
                for f in GAIN_FIELDS:
                    row[f"{gain}_{f}"] = getattr(g, "gain_pct" if f == "pct" else f)
        rows.append(row)
    return rows


def kept_jct(baseline: Mapping[str, Any], arm: Mapping[str, Any]) -> tuple[float, float] | None:
    """Mean JCT of the jobs ``arm`` did not stop, without a stopper and with it (``None``: no per-job data)."""
    b, a = baseline.get(JOBS_KEY), arm.get(JOBS_KEY)
    if b is None or a is None:
        return None
    kept = [i for i, s in enumerate(a["stopped"]) if not s]
    if not kept:
        return None
    return (sum(b["jct_h"][i] for i in kept) / len(kept), sum(a["jct_h"][i] for i in kept) / len(kept))


# -- formatting ------------------------------------------------------------------
def fmt_p(p: float | None) -> str:
    if p is None:
        return "n/a"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def no_gain_reason(row: Mapping[str, Any], gain: str) -> str:
    """What a gain cell says when there is no gain to show: why."""
    if row.get("stopper") == "none":
        return "baseline"          # the row the others are compared with
    if not any(f"{g}_pct" in row for g in GAINS):
        return f"n/a: no {row.get('scheduler')} row without a stopper to compare with"
    if gain == "jct_gain_kept":
        return "n/a: no per-job results, or every job stopped"
    return "n/a: undefined on every seed"


def fmt_gain_pct(row: Mapping[str, Any], gain: str) -> str:
    """A gain's mean alone (the console), or why there is none."""
    pct = row.get(f"{gain}_pct")
    return no_gain_reason(row, gain) if pct is None else fmt(pct, 1)


def fmt_cell(row: Mapping[str, Any], column: str) -> str:
    """One Markdown cell: mean ± std, a gain with its CI, or the two p-values; a gain's cells
    without a value say why (:func:`no_gain_reason`)."""
    if column in GAINS:
        pct = row.get(f"{column}_pct")
        if pct is None:
            return no_gain_reason(row, column)
        lo, hi = row.get(f"{column}_ci_lo"), row.get(f"{column}_ci_hi")
        ci = f" [{lo:.1f}, {hi:.1f}]" if lo is not None else ""
        return f"{pct:.1f}%{ci}"
    if column.endswith("_p") and column[:-2] in GAINS:
        if row.get(f"{column}_t") is None and row.get(f"{column}_wilcoxon") is None:
            if row.get("stopper") == "none":
                return "baseline"
            return "n/a: one seed" if row.get("seeds", 2) < 2 else "n/a"
        return f"{fmt_p(row.get(f'{column}_t'))} / {fmt_p(row.get(f'{column}_wilcoxon'))}"
    return fmt_value(column, row.get(column), row.get(f"{column}_std"))


def fmt_value(column: str, mean: Any, std: Any = None) -> str:
    if column.endswith("_pct"):
        return fmt(mean, 1)
    if column.endswith(("_p_t", "_p_wilcoxon")):
        return fmt_p(mean)
    d = DIGITS.get(column, 3)
    return fmt(mean, d) + (f" ± {std:.{d}f}" if std is not None and mean is not None else "")


def fmt_x(x: Any) -> str:
    return "" if x is None else f"{x:g}" if isinstance(x, float) else str(x)


def markdown_table(exp: Experiment, rows: Sequence[Mapping[str, Any]]) -> str:
    lead = ([exp.x_name] if exp.x_name else []) + ["arm"]
    body = [([fmt_x(r["x"])] if exp.x_name else []) + [r["arm"]] + [fmt_cell(r, c) for c in exp.columns]
            for r in rows]
    return tabulate(body, headers=lead + [HEADERS.get(c, c) for c in exp.columns], tablefmt="github",
                    disable_numparse=True)


def csv_table(exp: Experiment, rows: Sequence[Mapping[str, Any]]) -> str:
    """Every aggregated column, machine-readable: empty cells for undefined values.

    The sweep value ``x`` gets the swept variable's name, unless a column of
    that name exists already (a workload field or the scheduler).
    """
    keys: list[str] = []
    for r in rows:
        keys.extend(c for c in r if c not in keys)
    columns = [c for c in keys if not (c == "x" and (exp.x_name is None or exp.x_name in keys))]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([exp.x_name if c == "x" else c for c in columns])
    for r in rows:
        w.writerow(["" if v is None else repr(v) if isinstance(v, float) else v
                    for v in (r.get(c) for c in columns)])
    return buf.getvalue()


# -- claims ----------------------------------------------------------------------
def short_name(column: str) -> str:
    """``jct_gain_pct`` -> ``JCT gain %``, ``waste_cut_p_t`` -> ``p(t)``, ``fpr`` -> ``FPR``."""
    if column.endswith("_p_t"):
        return "p(t)"
    if column.endswith("_p_wilcoxon"):
        return "p(W)"
    if column.endswith("_pct"):
        return HEADERS[column[:-4]].split(" vs ")[0] + " %"
    return HEADERS.get(column, column)


def claim_verdicts(exp: Experiment, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """One verdict per claim (per matching row for ``each`` claims): paper, ours, target, holds."""
    out = []
    for claim in exp.claims:
        match = [r for r in rows if claim.where(r)]
        groups = [[r] for r in match] if claim.each else [match]
        for group in groups:
            out.append(_verdict(exp, claim, group))
    return out


# what a claim's verdict is, in the order the verdict block lists them
HOLDS, MARGINAL, DOCUMENTED, UNEXPECTED, NOT_JUDGED = (
    "holds", "marginal", "differs as documented", "differs unexpectedly", "not judged")
VERDICTS = (HOLDS, MARGINAL, DOCUMENTED, UNEXPECTED, NOT_JUDGED)
MARGINAL_P = (0.05, 0.10)   # a p-value in [0.05, 0.10) that alone fails a claim: marginal, not a difference


def _is_p(column: str) -> bool:
    return column.endswith(("_p_t", "_p_wilcoxon"))


def _verdict(exp: Experiment, claim: Claim, group: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    text, row = claim.text, ""
    if claim.each and group:
        r = group[0]
        row = r["arm"] + (f", {exp.x_name} {fmt_x(r['x'])}" if exp.x_name else "")
        text += f" [{row}]"
    target = "; ".join(f"{short_name(c.column)} {c.op} {c.value:g}" for c in claim.checks)
    target += f" ({claim.source})"
    base = {"experiment": exp.name, "claim": text, "group": claim.text, "row": row, "paper": claim.paper or "-",
            "target": target}
    if not group:
        return {**base, "ours": "not run", "holds": "n/a", "verdict": NOT_JUDGED, "why": ""}
    ours = []
    for c in claim.checks:
        vals = [r.get(c.column) for r in group]
        known = sorted(v for v in vals if v is not None)
        if not known:
            shown = "n/a"
        else:
            lo, hi = fmt_value(c.column, known[0]), fmt_value(c.column, known[-1])
            shown = lo if lo == hi else f"{lo}..{hi}"
        ours.append(f"{short_name(c.column)} {shown}")
    verdicts = [c.holds(r) for r in group for c in claim.checks]
    holds = "n/a" if any(v is None for v in verdicts) else "yes" if all(verdicts) else "no"
    failed = [(c, r.get(c.column)) for r in group for c in claim.checks if c.holds(r) is False]
    lo, hi = MARGINAL_P
    if holds != "no":
        verdict, why = (HOLDS if holds == "yes" else NOT_JUDGED), ""
    elif all(_is_p(c.column) and lo <= v < hi for c, v in failed):
        verdict = MARGINAL
        why = "; ".join(f"{short_name(c.column)} {fmt_p(v)}" for c, v in failed) + " (0.05 <= p < 0.10)"
        why += f": {claim.differs}" if claim.differs else ""
    else:
        verdict, why = (DOCUMENTED, claim.differs) if claim.differs else (UNEXPECTED, "")
    return {**base, "ours": "; ".join(ours), "holds": holds, "verdict": verdict, "why": why}


def verdict_of(v: Mapping[str, str]) -> str:
    """A verdict's kind (a verdict written by an older version has only ``holds``: read from that)."""
    return v.get("verdict") or {"yes": HOLDS, "no": UNEXPECTED}.get(v.get("holds", ""), NOT_JUDGED)


def verdict_block(verdicts: Sequence[Mapping[str, str]], width: int = CONSOLE_WIDTH) -> str:
    """Every claim under its verdict: how many hold, are marginal, differ as the docs explain (with that
    reason) or differ unexpectedly; rows of one claim (an ``each`` claim) are listed together."""
    by_kind: dict[str, dict[tuple[str, str], list[Mapping[str, str]]]] = {k: {} for k in VERDICTS}
    for v in verdicts:
        by_kind[verdict_of(v)].setdefault((v["experiment"], v.get("group", v["claim"])), []).append(v)
    counts = {k: sum(map(len, groups.values())) for k, groups in by_kind.items()}
    head = (f"Verdict on {len(verdicts)} claims: {counts[HOLDS]} hold, {counts[MARGINAL]} marginal, "
            f"{counts[DOCUMENTED]} differ as documented, {counts[UNEXPECTED]} differ unexpectedly"
            + (f", {counts[NOT_JUDGED]} not judged" if counts[NOT_JUDGED] else ""))
    lines = [head]
    indent = " " * 6
    for kind in VERDICTS:
        if not by_kind[kind]:
            continue
        lines += ["", f"{kind} ({counts[kind]}):"]
        for (exp, claim), group in by_kind[kind].items():
            if len(group) == 1 and not group[0].get("row"):
                detail = group[0]["ours"]
            else:
                detail = "; ".join(f"[{g.get('row') or g['claim']}] {g['ours']}" for g in group)
            paper = group[0]["paper"]
            lines.append(textwrap.fill(f"{exp}  {claim}" + (f" (paper: {paper})" if paper != "-" else "")
                                       + f": {detail}", width, subsequent_indent=indent))
            whys = list(dict.fromkeys(g["why"] for g in group if g.get("why")))
            lines += [textwrap.fill(f"why: {w}", width, initial_indent=indent, subsequent_indent=indent)
                      for w in whys]
    return "\n".join(lines)


def claims_table(verdicts: Sequence[Mapping[str, str]], with_experiment: bool = False) -> str:
    cols = (["experiment"] if with_experiment else []) + ["claim", "paper", "ours", "target", "holds"]
    return tabulate([[v[c] for c in cols] for v in verdicts], headers=cols, tablefmt="github",
                    disable_numparse=True)


# -- console -----------------------------------------------------------------------


def _table(headers: list[str], body: list[list[str]], widths: list[int | None]) -> str:
    return tabulate(body, headers=headers, tablefmt="simple", disable_numparse=True, maxcolwidths=widths,
                    maxheadercolwidths=widths)


def _blocks(headers: list[str], body: list[list[str]], keep: int, width: int,
            widths: list[int | None]) -> list[str]:
    """Plain-text tables of at most ``width`` characters holding every column: as many columns as fit,
    then the rest in further tables that repeat the first ``keep`` (the row's name). Long cells wrap
    onto more lines; nothing is cut."""
    out, start = [], keep
    while True:
        n = len(headers)
        while n > start + 1:
            cols = list(range(keep)) + list(range(start, n))
            text = _table([headers[i] for i in cols], [[r[i] for i in cols] for r in body],
                          [widths[i] for i in cols])
            if max(map(len, text.splitlines())) <= width:
                break
            n -= 1
        cols = list(range(keep)) + list(range(start, n))
        out.append(_table([headers[i] for i in cols], [[r[i] for i in cols] for r in body],
                          [widths[i] for i in cols]))
        if n >= len(headers):
            return out
        start = n


def console_text(exp: Experiment, rows: Sequence[Mapping[str, Any]], verdicts: Sequence[Mapping[str, str]],
                 full: str, width: int = CONSOLE_WIDTH) -> str:
    """What ``reproduce`` prints for an experiment: means only, gains without their intervals, every
    column (those that do not fit ``width`` characters in a further table under the first), long cells
    wrapped, the claims, and where the full table is (``full``); no Markdown image lines."""
    lead = ([exp.x_name] if exp.x_name else []) + ["arm"]
    cols = [c for c in exp.columns if not c.endswith("_p")]   # p-values stay in the full table
    headers = lead + [short_name(c + "_pct") if c in GAINS else HEADERS.get(c, c) for c in cols]
    body = [([fmt_x(r["x"])] if exp.x_name else []) + [r["arm"]]
            + [fmt_gain_pct(r, c) if c in GAINS else fmt(r.get(c), DIGITS.get(c, 3)) for c in cols]
            for r in rows]
    widths = [None] * (len(lead) - 1) + [ARM_WIDTH] + [14] * len(cols)
    parts = [textwrap.fill(f"{exp.name}: {exp.title}", width),
             *_blocks(headers, body, len(lead), width, widths),
             f"(standard deviations, intervals and p-values in {full})"]
    if verdicts:
        claims = [[v["claim"], v["ours"], v["holds"]] for v in verdicts]
        parts.append(_table(["claim", "ours", "holds"], claims, [62, 40, None]))
    return "\n".join(parts) + "\n"
