"""Results files of ``bench``: written, read back, compared, and shown as Markdown.

A results file carries the suite's name and hash, the rows it played and
skipped, the package version and the fingerprint of every input of a score
(:mod:`.fingerprint`: code, data files, library versions), with the commit and
date it was made on. Two files are
comparable only if all of these agree; :func:`check_comparable` refuses the
pair otherwise, naming what differs.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import PurePath, PurePosixPath
from typing import Any, Mapping, Sequence

from ..config import UsageError
from .policies import LEARNED_KIND
from .score import HEADLINE, board_verdicts

FORMAT = 1
IDENTITY = ("suite", "suite_hash", "rows", "skipped", "version", "code")   # what two comparable files share


def save(result: Mapping[str, Any], path: str | os.PathLike) -> None:
    """Write ``result`` as strict JSON, all or nothing (:func:`~evalstop_gym.files.write_atomic`)."""
    from ..files import write_atomic

    write_atomic(path, json.dumps(result, indent=1, sort_keys=True, allow_nan=False) + "\n", field="results")


def load(path: str | os.PathLike, suite_name: str | None = None) -> dict[str, Any]:
    """A results file, checked for its size and schema (:mod:`.schema`), format and suite (if given);
    :class:`ConfigError` (one line) otherwise. Reading it imports nothing: the policies it names are text
    until a caller plays one (:func:`~.policies.check_file_names`, :func:`~.policies.file_policy`)."""
    from .schema import read_results

    data = read_results(path)
    if data["format"] != FORMAT:
        raise UsageError(f"{path}: not a bench results file of format {FORMAT} (format {data['format']})")
    if suite_name is not None and data["suite"] != suite_name:
        raise UsageError(f"{path}: played suite {data['suite']!r}, not {suite_name!r}")
    return data


def differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """What keeps two results from being comparable (empty: comparable)."""
    return [f"{k}: {a.get(k)!r} vs {b.get(k)!r}" for k in IDENTITY if a.get(k) != b.get(k)]


def check_comparable(named: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
    """Raise :class:`UsageError` unless every results file is comparable with the first."""
    (first_name, first), *rest = named
    for name, other in rest:
        diff = differences(first, other)
        if diff:
            raise UsageError(f"{name} is not comparable with {first_name}: " + "; ".join(diff))


def _num(v: Any, unit: str = "") -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v + 0.0:+.1f}%" if unit == "%" else f"{v + 0.0:.3g}"
    return str(v)


def change_text(c: Mapping[str, Any]) -> str:
    """``-12.3% [-15.0, -9.6]`` or ``+0.021 [0.010, 0.032]``."""
    if c["change"] is None:
        return "-"
    change, (lo, hi) = c["change"] + 0.0, c["ci"]   # + 0.0: no "-0.0"
    ci = "" if lo is None else (f" [{lo + 0.0:+.1f}, {hi + 0.0:+.1f}]" if c["unit"] == "%"
                                else f" [{lo + 0.0:+.3f}, {hi + 0.0:+.3f}]")
    return (f"{change:+.1f}%" if c["unit"] == "%" else f"{change:+.3f}") + ci


SHOWN = ("avg_jct_h", "p50_jct_h", "p99_jct_h", "makespan_h", "compute_waste_gpu_h", "gpu_hours", "precision",
         "recall", "f1", "fpr", "delivered_quality_regret", "preemptions")


def markdown(result: Mapping[str, Any]) -> str:
    """The scorecards of a results dict as Markdown."""
    refs = result["references"]
    parts = [f"# evalstop-gym bench: suite {result['suite']} ({result['suite_hash']})", "",
             f"Package {result['version']}, code {result['code']}; rows played: {len(result['rows'])}"
             + ("; skipped: " + "; ".join(f"{k} ({v})" for k, v in result["skipped"].items())
                if result["skipped"] else "") + ".",
             "References: " + "; ".join(f"{k} = {v}" for k, v in refs.items()) + ".",
             "Changes are paired over every (row, seed): % change for sizes, difference for rates and scores, "
             "with 95% t-intervals; verdicts need Holm-adjusted p < 0.05 over the policy's headline tests "
             f"({', '.join(HEADLINE)} against every reference), otherwise tie.", ""]
    if result.get("tuning"):
        t = result["tuning"]
        parts += [f"Tuned on validation seeds ({t['trials']} trials per family, rule: {t['rule']}); best: "
                  f"{t['best']['label']}.", ""]
    for card in result["policies"]:
        parts += [f"## {card['label']}", "", f"`--policy {card['policy']}` ({card['kind']})", "",
                  "| metric | suite mean | " + " | ".join(f"vs {r}" for r in card["vs"]) + " |",
                  "|---|---:|" + "---:|" * len(card["vs"])]
        for m in SHOWN:
            parts.append(f"| {m} | {_num(card['aggregate'][m])} | "
                         + " | ".join(change_text(vs["aggregate"][m]) for vs in card["vs"].values()) + " |")
        parts += ["", "| reference | metric | change [95% CI] | p | p (Holm) | verdict |", "|---|---|---|---:|---:|---|"]
        for v in card["verdicts"]:
            parts.append(f"| {v['reference']} | {v['metric']} | {change_text(v)} | {_num(v['p'])} | "
                         f"{_num(v['p_holm'])} | {v['verdict']} |")
        parts += ["", "Per row (mean over seeds; JCT change vs no stopper):", "",
                  "| row | avg JCT h | waste GPU-h | F1 | FPR | regret | preemptions | JCT vs no stopper |",
                  "|---|---:|---:|---:|---:|---:|---:|---|"]
        first_ref = next(iter(card["vs"].values()))
        for row, m in card["per_row"].items():
            parts.append(f"| {row} | {_num(m['avg_jct_h'])} | {_num(m['compute_waste_gpu_h'])} | {_num(m['f1'])} | "
                         f"{_num(m['fpr'])} | {_num(m['delivered_quality_regret'])} | {_num(m['preemptions'])} | "
                         f"{change_text(first_ref['per_row'][row]['avg_jct_h'])} |")
        parts.append("")
    return "\n".join(parts)


def policy_command(result: Mapping[str, Any], card: Mapping[str, Any], tuning_file: str | None = None) -> str:
    """The command that scores this one policy as ``result`` scored it (runs are per policy, so alone it
    gives the same numbers), in paths a reader has: the tuned reference from ``tuning_file`` (a results file
    that holds the same tuning, such as a shipped one under docs/leaderboard/) rather than the folder it was
    first read from, and a saved model as :func:`model_path` names it."""
    tuned = result.get("tuned_from")
    if tuned not in (None, "--tune") and tuning_file is not None:
        tuned = tuning_file
    policy = model_path(card["policy"]) if card["kind"] == LEARNED_KIND else card["policy"]
    return (f"evalstop-gym bench --suite {result['suite']} --policy {shlex.quote(policy)}"
            + ("" if tuned is None else " --tune" if tuned == "--tune" else f" --tuned {shlex.quote(tuned)}"))


def model_path(path: str) -> str:
    """A saved model's ``--policy`` path as a reader can use it: as given if relative; else from the last
    ``runs`` folder on it, which ``evalstop-gym train --out runs/NAME`` writes into (docs/learned.md trains
    every shipped recipe so, and ``--leaderboard-run`` trains them so in a folder of its own); else the
    model's folder (or file) name alone. Never the folder of the machine that scored it."""
    p = PurePath(path)
    if not p.is_absolute():
        return path
    parts = p.parts[1:]
    runs = [i for i, part in enumerate(parts[:-1]) if part == "runs"]
    return str(PurePosixPath(*parts[runs[-1]:])) if runs else p.name


def quality_worse(card: Mapping[str, Any]) -> bool:
    """Whether the policy's regret verdict against EvalStop k=2 is ``worse`` (Holm-corrected)."""
    from .arms import EVALSTOP_K2

    return any(v["reference"] == EVALSTOP_K2 and v["metric"] == "delivered_quality_regret" and v["verdict"] == "worse"
               for v in card["verdicts"])


def robust_text(c: Mapping[str, Any]) -> str:
    """``[-36.6, -31.5], IQM -34.0%``: a comparison's stratified bootstrap interval and IQM (``-`` before them)."""
    boot, iqm = c.get("ci_boot"), c.get("iqm")
    if not boot or boot[0] is None:
        return "-"
    pct = c["unit"] == "%"
    lo, hi = (f"{x + 0.0:+.1f}" if pct else f"{x + 0.0:+.3f}" for x in boot)
    return f"[{lo}, {hi}]" + ("" if iqm is None else f", IQM {iqm + 0.0:+.1f}{'%' if pct else ''}")


def same_results(entries: list) -> tuple[list, dict[str, list[str]]]:
    """``entries`` with each group of policies whose every metric agrees on every workload kept once (the
    first; the same decisions give the same metrics), and label -> the labels it stands for."""
    kept, twins, seen = [], {}, {}
    for card, command in entries:
        key = json.dumps(card["per_seed"], sort_keys=True)
        if key in seen:
            twins.setdefault(seen[key], []).append(card["label"])
        else:
            seen[key] = card["label"]
            kept.append((card, command))
    return kept, twins


def clone_rows(result: Mapping[str, Any]) -> list[str]:
    """The rows of ``result`` that a clone plays: those that replay no file outside the package (a trace; a
    trace's shape ships in it)."""
    from .suite import SUITES

    outside = {r.name for r in SUITES.get(result["suite"], ()) if r.trace is not None and not r.trace.shipped}
    return [r for r in result["rows"] if r not in outside]


def _over_rows(card: Mapping[str, Any], result: Mapping[str, Any], rows: Sequence[str]) -> dict[str, Any]:
    """The card's JCT change vs no stopper over ``rows`` only (paired per workload, as the scorecard pairs)."""
    from .arms import NO_STOPPER
    from .score import compare

    ref = result["reference_values"][NO_STOPPER]
    mine = [r for r in rows if r in card["per_seed"]]
    return compare([x for r in mine for x in card["per_seed"][r]["avg_jct_h"]],
                   [x for r in mine for x in ref[r]["avg_jct_h"]], "avg_jct_h")


def _knobs(params: dict) -> str:
    return ", ".join(f"{k} {v:g}" for k, v in params.items())


def _tried(tuning: Mapping[str, Any]) -> str:
    """How many trials each family got and which schedulers its trials tried (a joint search may leave some out)."""
    return "Trials per family, and the schedulers they tried: " + "; ".join(
        f"{fam} {len(f['every_trial'])} ({', '.join(sorted({t['scheduler'] for t in f['every_trial']}))})"
        for fam, f in tuning["families"].items()) + "."


def _part(result: Mapping[str, Any], name: str) -> str:
    return (result.get("fingerprint") or {}).get(name, "?")


def leaderboard(paths: Sequence[str | os.PathLike], command: str = "") -> str:
    """``docs/leaderboard.md``: every policy of every results file, ranked by suite-mean JCT change vs no stopper.

    The files must be comparable (:func:`check_comparable`); a policy scored in several files
    appears once (the first file's row). ``command``: the one command that wrote the files and this
    page (``bench --leaderboard-run``), named at the top. A file holding a learned family's tuning
    (:func:`~.tune.tune_learned`, ``learned_tuning``) has it listed trial by trial.
    """
    from .arms import EVALSTOP_K2, NO_STOPPER, TUNED_BEST

    named = [(str(p), load(p)) for p in paths]
    if not named:
        raise UsageError("--leaderboard needs at least one results file")
    check_comparable(named)
    first = named[0][1]
    seen, entries = set(), []
    for name, data in named:
        # the tuning as one of these files holds it (a results file scored with --tuned carries its tuning)
        tuning_file = next((n for n, d in named if d.get("tuning") and d.get("tuning") == data.get("tuning")), None)
        for card in data["policies"]:
            if card["label"] not in seen:
                seen.add(card["label"])
                entries.append((card, policy_command(data, card, tuning_file)))
    tuned = {d["references"].get(TUNED_BEST) for _, d in named} - {None}
    if len(tuned) > 1:
        raise UsageError(f"the files hold different tuned-best references ({', '.join(sorted(tuned))}): score "
                         "every policy against one tuning (bench --tuned FILE)")
    tuning = next((d["tuning"] for _, d in named if d.get("tuning")), None)
    learned_tuning = next((d["learned_tuning"] for _, d in named if d.get("learned_tuning")), None)
    # the page's verdicts: Holm over every headline test of every policy it lists (its family), not one
    # policy's; the quality bar and the order below read them
    board = board_verdicts([card for card, _ in entries])
    entries = [({**card, "verdicts": v}, command) for (card, command), v in zip(entries, board)]
    family = sum(map(len, board))
    entries.sort(key=lambda e: (quality_worse(e[0]), e[0]["vs"][NO_STOPPER]["aggregate"]["avg_jct_h"]["change"] or 0.0))
    refs = [NO_STOPPER, *(r for r in first["references"] if r != NO_STOPPER)]
    n_rows = len(first["rows"])
    lines = [f"# Leaderboard: suite {first['suite']} ({first['suite_hash']})", "",
             (f"Generated by `{command}` (tuning, every scored policy and this page; docs/bench.md); "
              if command else "Generated by `evalstop-gym bench --leaderboard FILE...` from bench results files; ")
             + "do not edit by hand.",
             f"Package {first['version']}, fingerprint {first['code']} (code {_part(first, 'code')}, data "
             f"{_part(first, 'data')}), commit {first.get('commit', 'unknown')}"
             + (" with uncommitted changes" if first.get("uncommitted_changes") else "")
             + f", played {first.get('date', '(date not recorded)')}; "
             + ", ".join(f"{k} {v}" for k, v in (first.get("versions") or {}).items())
             + f"; {n_rows} rows"
             + (f", skipped: {', '.join(first['skipped'])}" if first["skipped"] else "") + ". "
             "Columns: suite means over every (row, seed); changes are paired over every (row, seed) with 95% "
             "t-intervals (JCT: % change); a verdict against a reference needs Holm-adjusted p < 0.05, otherwise it "
             f"is a tie, with Holm over the whole page: its family is every headline test of every policy listed "
             f"({family} tests: each policy's {', '.join(HEADLINE)} against each reference), so a verdict does not "
             "depend on how many policies were tried (a results file's own scorecards adjust over one policy's "
             "tests). Ranked by JCT change vs no stopper, first the policies "
             f"whose delivered-quality regret is not significantly worse than {EVALSTOP_K2}'s (the quality bar the "
             "tuner selects by), then the rest (marked *below the bar*); policies scored on fewer rows than the suite "
             "follow, unranked.", ""]
    if tuning:
        lines += [f"Tuned best: **{tuning['best']['label']}**, chosen on validation seeds by the rule fixed in "
                  f"`evalstop_gym/bench/tune.py` ({tuning['trials']} trials per family, {len(tuning['families'])} "
                  + ("families: each scheduler and stopper pair on its own)." if tuning.get("per_scheduler") else
                     "families, each a stopper whose trials also pick the scheduler). " + _tried(tuning)), ""]
    else:
        lines += [f"No results file holds a tuning: the {TUNED_BEST} column is empty (run `bench --tune`).", ""]
    outside = {k: v for _, d in named for k, v in (d.get("outside_tuning") or {}).items()}
    if outside:
        lines += ["Outside policies tuned over their declared search spaces with the families' rule and validation "
                  "seeds: " + "; ".join(f"{k}: {t['budget']} trials over {', '.join(t['searched'])}, best "
                                        f"**{t['best']['label']}**" for k, t in outside.items()) + ".", ""]
    if learned_tuning:
        b = learned_tuning["best"]
        lines += [f"Learned family **{learned_tuning['family']}**: its {', '.join(learned_tuning['searched'])} "
                  f"tuned with {learned_tuning['trials']} trials (each a training run) and the families' "
                  f"rule, on validation seeds of the {len(learned_tuning['rows'])} rows a saved model plays; best "
                  f"{_knobs(b['params'])} (score {b['score']:.4f}), scored as **{b['label']}**. Trials: "
                  + "; ".join(f"{_knobs(t['params'])}: {t['score']:.4f}{'' if t['feasible'] else ' (above the regret cap)'}"
                              for t in learned_tuning["every_trial"]) + ".", ""]
    models = [card for card, _ in entries if card["kind"] == LEARNED_KIND]
    entries, twins = same_results(entries)
    ranked = [e for e in entries if len(e[0]["per_row"]) == n_rows]
    subset = [e for e in entries if len(e[0]["per_row"]) < n_rows]
    if models:
        lines += ["A saved model plays the synthetic rows whose cluster it runs on (a learned scheduler trained on "
                  "nodes of GPUs does not run on the flat pool): its changes are paired with the references on "
                  "those rows and its means are over them. One that plays fewer rows than the suite (marked *n of "
                  "N rows*) is measured on other workloads than the full-suite policies, so it is listed after "
                  "them, in the same order but without a rank. Rows played: "
                  + "; ".join(f"{c['label']}: {len(c['per_row'])}" for c in models) + ".", ""]
    else:
        lines += ["No learned policy is listed: none of these results files scores a saved model. "
                  "`evalstop-gym bench --policy MODEL_FOLDER` scores one (on the synthetic rows it runs on) against the "
                  "same references.", ""]
    clone = clone_rows(first)
    if clone != first["rows"]:
        lines += [f"Rows {', '.join(r for r in first['rows'] if r not in clone)} replay a file the package does not "
                  f"ship (docs/bench.md, *The suite*): a clone without it plays {len(clone)} rows, so the column "
                  f"*JCT vs no stopper, {len(clone)} rows* gives each policy's figure over the rows every clone "
                  "plays, which a clone reproduces.", ""]
    lines += ["Ranks order test-seed figures; no policy was selected by them. The one selection is the tuned best, "
              "on validation seeds. *JCT vs no stopper* gives the t-interval, then the stratified bootstrap "
              "interval (rows kept, seeds resampled within each row) and the interquartile mean of the "
              "per-workload changes. Each row's command names the results file (listed below) that holds the "
              "tuning, and a saved model by the folder its training command writes (`runs/NAME`: docs/learned.md).",
              ""]
    extra = [f"JCT vs no stopper, {len(clone)} rows"] if clone != first["rows"] else []
    lines += ["| # | policy | avg JCT h | " + " | ".join(f"JCT vs {r}" for r in refs)
              + " | JCT vs no stopper: bootstrap, IQM | " + "".join(f"{x} | " for x in extra)
              + "waste GPU-h | F1 | FPR | regret | preemptions | verdicts (JCT) | command |",
              "|---:|---|---:|" + "---|" * (len(refs) + 1 + len(extra)) + "---:|---:|---:|---:|---:|---|---|"]
    for rank, (card, command) in [*enumerate(ranked, 1), *(("-", e) for e in subset)]:
        agg = card["aggregate"]
        jct = " | ".join(change_text(card["vs"][r]["aggregate"]["avg_jct_h"]) if r in card["vs"] else "-"
                         for r in refs)
        v = ", ".join(f"{x['reference']}: {x['verdict']}" for x in card["verdicts"] if x["metric"] == "avg_jct_h")
        below = " (*below the bar*)" if quality_worse(card) else ""
        part = f" (*{len(card['per_row'])} of {n_rows} rows*)" if len(card["per_row"]) < n_rows else ""
        same = (" (*same results on every workload:* " + "; ".join(twins[card["label"]]) + ")"
                if card["label"] in twins else "")
        where = " (*played in process*)" if card.get("process") == "in-process" else ""
        over = [change_text(_over_rows(card, first, clone))] if extra else []
        lines.append(f"| {rank} | {card['label']}{part}{below}{same}{where} | {_num(agg['avg_jct_h'])} | {jct} | "
                     f"{robust_text(card['vs'][NO_STOPPER]['aggregate']['avg_jct_h'])} | "
                     + "".join(f"{x} | " for x in over)
                     + f"{_num(agg['compute_waste_gpu_h'])} | {_num(agg['f1'])} | {_num(agg['fpr'])} | "
                     f"{_num(agg['delivered_quality_regret'])} | {_num(agg['preemptions'])} | {v} | `{command}` |")
    lines += ["", "The results files, and the commands that wrote them:", ""]
    lines += [f"- `{name}`: `{d.get('command') or '(not recorded)'}`" for name, d in named]
    return "\n".join(lines) + "\n"
