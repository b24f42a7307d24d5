"""Selfish tenants versus platform-enforced EvalStop: who pays when tenants do not stop?

Four tenants share a 64-GPU cluster (RLHF-heavy workload, SRTF-Est placement).
A *cooperative* tenant runs EvalStop(k=2) on its own jobs; a *selfish* tenant
never stops a job ("never"), or stops late ("late": EvalStop with k=4). In
some scenarios the platform enforces EvalStop(k=2) on every job whatever the
tenants do. Every scenario plays the same seeds (the same workloads), so
differences are paired.

Reported per scenario (mean +- sd over seeds): mean JCT of all jobs, of the
cooperative tenants' jobs and of the selfish tenants' jobs; the cooperative
tenants' JCT change against the all-cooperative scenario (paired, with the
Wilcoxon p-value); the cluster's compute waste (GPU-hours past each job's true
best checkpoint) and the hidden delivered quality of each group.

    python examples/selfish_tenants.py               # 10 seeds, about half a minute on 2 cores
    python examples/selfish_tenants.py --seeds 3     # a quick look

Writes ``selfish_tenants.md``, ``.csv`` and ``.png`` to ``--out``
(default ``results/selfish_tenants``) and prints the table.
"""

from __future__ import annotations

import argparse
import csv
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evalstop_gym.experiments.stats import paired_gain, summarize
from evalstop_gym.multiagent import tenants_v0
from evalstop_gym.multiagent.rules import EvalStopRule, never_stop, play
from evalstop_gym.report import format_table


@dataclass(frozen=True)
class Scenario:
    name: str
    selfish: int            # tenants 0 .. selfish-1 are selfish, the others cooperative
    behaviour: str = "never"  # of the selfish tenants: "never" stop, or stop "late"
    platform: str = "none"  # the platform's stopper


SCENARIOS = (
    Scenario("all cooperative", 0),
    Scenario("1 selfish (never)", 1),
    Scenario("2 selfish (never)", 2),
    Scenario("4 selfish (never)", 4),
    Scenario("1 selfish (late)", 1, "late"),
    Scenario("4 selfish (late)", 4, "late"),
    Scenario("2 selfish (never) + platform EvalStop", 2, "never", "evalstop"),
    Scenario("4 selfish (never) + platform EvalStop", 4, "never", "evalstop"),
)
BASELINE = "all cooperative"


def run_scenario(sc: Scenario, seeds, tenants: int, late_k: int, env_kwargs: dict) -> list[dict]:
    """Per seed: the cluster's metrics and, per tenant, its role, jobs, JCT, waste, quality and return."""
    selfish_rule = never_stop if sc.behaviour == "never" else EvalStopRule(late_k)
    env = tenants_v0.parallel_env(tenants=tenants, platform_stopper=sc.platform, **env_kwargs)
    agents = env.possible_agents
    rules = {a: selfish_rule if i < sc.selfish else EvalStopRule(2) for i, a in enumerate(agents)}
    out = []
    for seed in seeds:
        r = play(env, rules, seed=seed)
        out.append({"metrics": r["metrics"], "tenants": [
            {"role": "selfish" if i < sc.selfish else "cooperative", "return": r["returns"][a],
             **({k: m[k] for k in ("jobs", "avg_jct_h", "compute_waste_gpu_h", "delivered_quality")}
                if (m := r["tenant_metrics"][a]) is not None else {"jobs": 0})}
            for i, a in enumerate(agents)]})
    return out


def group(run: dict, members: range, key: str) -> float | None:
    """Job-weighted mean of a per-tenant metric over some tenants (``return``: mean per tenant)."""
    ts = [run["tenants"][i] for i in members]
    if key == "return":
        return float(np.mean([t["return"] for t in ts])) if ts else None
    jobs = sum(t["jobs"] for t in ts)
    return sum(t[key] * t["jobs"] for t in ts if t["jobs"]) / jobs if jobs else None


def pm(values, digits=2) -> str:
    s = summarize(values)
    if s.mean is None:
        return "-"
    return f"{s.mean:.{digits}f}" + (f" ± {s.std:.{digits}f}" if s.std is not None else "")


def coop_change(base_runs, runs, coop: range) -> str:
    """The cooperative tenants' JCT change (%) against the same tenants in the baseline, paired over seeds."""
    if not coop:
        return "-"
    g = paired_gain([group(b, coop, "avg_jct_h") for b in base_runs], [group(r, coop, "avg_jct_h") for r in runs])
    p = f", p={g.p_wilcoxon:.3f}" if g.p_wilcoxon is not None else ""
    return f"{-g.gain_pct:+.1f}%{p}"


COLUMNS = ("scenario", "JCT all (h)", "JCT coop (h)", "JCT selfish (h)", "coop JCT vs all-coop",
           "waste (GPU-h)", "quality coop", "quality selfish", "return/tenant coop", "return/tenant selfish")


def table_rows(scenarios, results: dict[str, list[dict]], tenants: int) -> list[dict]:
    base = results[BASELINE]
    rows = []
    for sc in scenarios:
        runs = results[sc.name]
        selfish, coop = range(sc.selfish), range(sc.selfish, tenants)

        def col(members, key, digits=2):
            return pm([group(r, members, key) for r in runs] if members else [], digits)

        rows.append(dict(zip(COLUMNS, (
            sc.name, pm([r["metrics"]["avg_jct_h"] for r in runs]), col(coop, "avg_jct_h"),
            col(selfish, "avg_jct_h"), "(baseline)" if sc.name == BASELINE else coop_change(base, runs, coop),
            pm([r["metrics"]["compute_waste_gpu_h"] for r in runs], 0), col(coop, "delivered_quality", 3),
            col(selfish, "delivered_quality", 3), col(coop, "return", 1), col(selfish, "return", 1)))))
    return rows


def plot(scenarios, results: dict[str, list[dict]], tenants: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = np.arange(len(scenarios))

    def stat(values_of):
        s = [summarize(values_of(sc)) for sc in scenarios]
        return (np.array([np.nan if v.mean is None else v.mean for v in s]),
                np.array([0.0 if v.std is None else v.std for v in s]))

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.8))
    for off, members, label, color in ((-0.2, lambda sc: range(sc.selfish, tenants), "cooperative tenants",
                                        "#4c72b0"),
                                       (0.2, lambda sc: range(sc.selfish), "selfish tenants", "#dd8452")):
        m, s = stat(lambda sc: [group(r, members(sc), "avg_jct_h") for r in results[sc.name]]
                    if members(sc) else [])
        ax1.bar(x + off, m, 0.4, yerr=s, label=label, color=color, capsize=3)
    m, _ = stat(lambda sc: [r["metrics"]["avg_jct_h"] for r in results[sc.name]])
    ax1.plot(x, m, "k_", markersize=22, mew=2, label="all jobs")
    ax1.set_ylabel("mean JCT (h)")
    ax1.set_title("Whose jobs wait longer? (bars: sd over workloads; the table pairs them)", fontsize=10)
    ax1.legend(fontsize=8)
    m, s = stat(lambda sc: [r["metrics"]["compute_waste_gpu_h"] for r in results[sc.name]])
    ax2.bar(x, m, 0.6, yerr=s, color="#8c8c8c", capsize=3)
    ax2.set_ylabel("compute waste (GPU-h)")
    ax2.set_title("Cluster waste: GPU-h past each job's true best checkpoint", fontsize=10)
    for ax in (ax1, ax2):
        ax.set_xticks(x)
        ax.set_xticklabels([sc.name for sc in scenarios], rotation=30, ha="right", fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10, help="seeds 0..N-1 (default 10)")
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--tenants", type=int, default=4)
    ap.add_argument("--scheduler", default="srtf-est")
    ap.add_argument("--workload", default="rlhf-heavy")
    ap.add_argument("--late-k", type=int, default=4, help="k of the late stoppers' EvalStop (default 4)")
    ap.add_argument("--out", default="results/selfish_tenants")
    args = ap.parse_args(argv)
    scenarios = [sc for sc in SCENARIOS if sc.selfish <= args.tenants]
    env_kwargs = {"jobs": args.jobs, "scheduler": args.scheduler, "workload": args.workload}
    seeds = range(args.seeds)
    results = {}
    for sc in scenarios:
        results[sc.name] = run_scenario(sc, seeds, args.tenants, args.late_k, env_kwargs)
        print(f"  {sc.name}: done", file=sys.stderr)
    rows = table_rows(scenarios, results, args.tenants)
    md = format_table(rows, COLUMNS)
    title = (f"Selfish tenants, {args.tenants} tenants, {args.workload}, {args.jobs} jobs, base scheduler "
             f"{args.scheduler}, seeds 0-{args.seeds - 1} (mean ± sd); cooperative = EvalStop(k=2) on own jobs, "
             f"late = EvalStop(k={args.late_k})")
    print(title)
    print(md)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "selfish_tenants.md").write_text(f"{title}\n\n{md}\n")
    fields = ("role", "jobs", "avg_jct_h", "compute_waste_gpu_h", "delivered_quality", "return")
    with open(out / "selfish_tenants.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["scenario", "seed", "tenant", *fields, "cluster_avg_jct_h", "cluster_waste_gpu_h"])
        for name, runs in results.items():
            for seed, r in zip(seeds, runs):
                for i, t in enumerate(r["tenants"]):
                    w.writerow([name, seed, i, *(t.get(k) for k in fields), r["metrics"]["avg_jct_h"],
                                r["metrics"]["compute_waste_gpu_h"]])
    plot(scenarios, results, args.tenants, out / "selfish_tenants.png")
    print(f"wrote {out}/selfish_tenants.md, .csv, .png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
