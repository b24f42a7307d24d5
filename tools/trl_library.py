"""Build the shipped TRL curve library (evalstop_gym/data/trl_library.csv.gz and trl_library.json).

    nice -n 10 python tools/trl_library.py --work /tmp/trl_library --runs 48 --workers 2 --dim 32

runs ``evalstop-gym curves generate --backend trl`` into ``--work`` (resumable:
rerun the same command after an interruption), then writes the gzip'd curve
log and a metadata file with the exact command, the package versions, and
each run's CPU seconds. ``--pack-only`` packs the runs ``--work`` holds that
have finished (all of them, or those that ended before an interruption).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shlex
import subprocess
import sys
from importlib import metadata

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "evalstop_gym", "data")
PACKAGES = ("torch", "transformers", "trl", "datasets", "accelerate", "tokenizers", "numpy")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", required=True, help="the library's working folder (runs, models)")
    p.add_argument("--runs", type=int, default=48)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dim", type=int, default=None, help="policy width (default: the backend's; the shipped "
                                                          "library: 32)")
    p.add_argument("--pack-only", action="store_true", help="do not run; pack the finished library in --work")
    args = p.parse_args(argv)
    command = [sys.executable, "-m", "evalstop_gym.cli", "curves", "generate", "--backend", "trl", "--out",
               args.work, "--runs", str(args.runs), "--workers", str(args.workers), "--seed", str(args.seed)]
    if args.dim is not None:
        command += ["--dim", str(args.dim)]
    shown = ["evalstop-gym", *command[3:]]
    if not args.pack_only:
        subprocess.run(command, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    from evalstop_gym.overopt.library import is_finished, library_settings

    # the finished runs in the library's order (all of them after a complete generate; after an
    # interrupted one, those that ended)
    runs_dir = os.path.join(args.work, "runs")
    from evalstop_gym.overopt.trl_backend import parameter_counts

    finished = [s for s in library_settings(args.runs, args.seed, backend_name="trl",
                                                  **({} if args.dim is None else {"dim": args.dim})) if is_finished(s, runs_dir)]
    runs, lines = [], []
    for s in finished:
        with open(os.path.join(runs_dir, s.name + ".json")) as f:
            runs.append({**json.load(f), "parameters": parameter_counts(s)})
        with open(os.path.join(runs_dir, s.name + ".csv")) as f:
            text = f.read().splitlines()
        lines += text if not lines else text[1:]   # one header
    os.makedirs(DATA, exist_ok=True)
    with gzip.GzipFile(os.path.join(DATA, "trl_library.csv.gz"), "wb", mtime=0) as dst:
        dst.write(("\n".join(lines) + "\n").encode())   # mtime 0: the same runs give the same bytes
    cpu = [r["cpu_s"] for r in runs]
    meta = {"command": shlex.join(shown).replace(shlex.quote(args.work), "OUT"),
            "runs_requested": args.runs,
            "python": platform.python_version(),
            "packages": {name: metadata.version(name) for name in PACKAGES},
            "runs": len(runs), "policy_parameters": sorted({r["parameters"]["policy"] for r in runs}),
            "reward_model_parameters": sorted({r["parameters"]["reward_model"] for r in runs} - {None}),
            "cpu_s_total": round(sum(cpu), 1),
            "cpu_s_per_run": {"min": min(cpu), "median": sorted(cpu)[len(cpu) // 2], "max": max(cpu)},
            "note": "CPU seconds of each run's worker process (time.process_time), on a shared 2-core machine; "
                    "the first run of a worker also pays for importing torch / transformers / TRL; parameters "
                    "counted on models built from each run's configs (the policy's reference model is a "
                    "frozen copy of the same size)",
            "settings": [{k: v for k, v in r.items() if k not in ("wall_s",)} for r in runs]}
    with open(os.path.join(DATA, "trl_library.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print(f"packed {len(runs)} runs, {sum(cpu):.0f} CPU s in all, into {DATA}")
    print(summary(runs))
    return 0


def summary(settings: list[dict], evals: int = 10) -> str:
    """Markdown tables of the packed library: runs by method and label (gold rule on ``evals``
    checkpoints) with peak positions and CPU seconds, and the same per setting."""
    import numpy as np

    from evalstop_gym.curvelog import label_run, resample
    from evalstop_gym.data import trl_library

    runs = trl_library()
    rows = []
    for s in settings:
        lab = label_run(runs[s["name"]], evals=evals)
        start, g = resample(runs[s["name"]], "gold", evals)
        rows.append({**s, "hacking": lab.hacking, "peak": lab.peak_progress, "start": start, "top": max(start, g.max()),
                     "end": g[-1], "kl_end": runs[s["name"]].extra["kl"][-1]})

    def line(cells):
        return "| " + " | ".join(str(c) for c in cells) + " |"

    out = [line(["method", "runs", "hacking", "healthy", "peak position of hacking runs (median, range)",
                 "CPU s per run (median)"]), line(["---"] * 6)]
    for m in ("grpo", "rloo", "dpo", "all"):
        sel = [r for r in rows if m in ("all", r["method"])]
        if not sel:
            continue
        peaks = [r["peak"] for r in sel if r["hacking"]]
        shown = f"{np.median(peaks):.2f} ({min(peaks):.1f}-{max(peaks):.1f})" if peaks else "-"
        out.append(line([m.upper() if m != "all" else "all", len(sel), sum(r["hacking"] for r in sel),
                         sum(not r["hacking"] for r in sel), shown,
                         f"{np.median([r['cpu_s'] for r in sel]):.1f}"]))
    out += ["", line(["method", "pairs", "KL coef / beta", "lr", "RM width", "runs", "hacking", "gold start",
                      "gold peak", "gold end", "final KL (nats)"]), line(["---"] * 11)]
    groups: dict = {}
    for r in rows:
        key = (r["method"], r["pairs"], r["kl_coef"], r["lr"], r["rm_dim"] if r["method"] != "dpo" else "-")
        groups.setdefault(key, []).append(r)
    order = {"grpo": 0, "rloo": 1, "dpo": 2}
    for key in sorted(groups, key=lambda k: (order[k[0]], k[1], k[2], k[3], str(k[4]))):
        g = groups[key]
        out.append(line([key[0].upper(), key[1], f"{key[2]:g}", f"{key[3]:g}", key[4], len(g),
                         sum(r["hacking"] for r in g)]
                        + [f"{np.mean([r[c] for r in g]):.2f}" for c in ("start", "top", "end")]
                        + [f"{np.mean([r['kl_end'] for r in g]):.1f}"]))
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
