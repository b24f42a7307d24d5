"""Build a TRL curve library and pack it (the shipped one: evalstop_gym/data/trl_library.csv.gz and .json).

    nice -n 10 python tools/trl_library.py --work /tmp/trl_library --runs 48 --workers 2
    nice -n 19 python tools/trl_library.py --work /tmp/trl_varied --grid varied --workers 2
    nice -n 19 python tools/trl_library.py --work /tmp/trl_pilot --grid varied --pilot --data /tmp/trl_pilot/packed

runs the TRL backend's library generator (``evalstop_gym.overopt.generate_library``,
what ``evalstop-gym curves generate --backend trl`` runs) over a grid into
``--work`` (resumable: rerun the same command after an interruption), then
writes into ``--data`` (default: the package's data folder) the gzip'd curve
log and a manifest with the exact command, the package versions, and each
run's settings (task, width, KL coefficient, learning rate, seed, ...),
parameter counts and CPU seconds.

Grids (``evalstop_gym.overopt.trl_backend.GRIDS``): ``shipped``, the 24 points
of the shipped library (copy task, one width); ``varied``, two tasks x two
policy widths x 24 points, with runs long enough for the cliff and the plateau.
``--pilot`` runs only the grid's pilot points (GRPO on 128 pairs with and
without a KL penalty, every task and width) and prints, beside the library's
tables, the full library's CPU time projected from them. ``--pack-only``
packs the runs ``--work`` holds that have finished.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shlex
import sys
from importlib import metadata

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "evalstop_gym", "data")
PACKAGES = ("torch", "transformers", "trl", "datasets", "accelerate", "tokenizers", "numpy")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", required=True, help="the library's working folder (runs, models)")
    p.add_argument("--grid", choices=("shipped", "varied"), default="shipped",
                   help="which grid (default %(default)s; module docstring)")
    p.add_argument("--runs", type=int, default=None,
                   help="runs: grid point i %% G, seed i // G (default: 48 for shipped, one per point for varied)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dim", type=int, default=None, help="policy width of every run (default: the grid's; the "
                                                          "shipped library: 80)")
    p.add_argument("--pilot", action="store_true", help="only the grid's pilot points, and the projection")
    p.add_argument("--data", default=DATA, help="where the packed library goes (default: the package's data)")
    p.add_argument("--pack-only", action="store_true", help="do not run; pack the finished library in --work")
    args = p.parse_args(argv)
    os.environ["HF_HUB_OFFLINE"] = "1"
    from evalstop_gym.config import check_range
    from evalstop_gym.overopt.library import generate_library, is_finished, library_settings
    from evalstop_gym.overopt.trl_backend import GRIDS, parameter_counts, pilot_points

    full = GRIDS[args.grid]
    grid = pilot_points(full) if args.pilot else full
    runs = args.runs if args.runs is not None else (48 if args.grid == "shipped" and not args.pilot else len(grid))
    check_range("runs", runs, 1, integer=True)
    overrides = {} if args.dim is None else {"dim": args.dim}
    if not args.pack_only:
        generate_library(args.work, runs, seed=args.seed, workers=args.workers, grid=grid, backend_name="trl",
                         progress=_progress, **overrides)
    # the finished runs in the library's order (all of them after a complete run; after an interrupted
    # one, those that ended)
    runs_dir = os.path.join(args.work, "runs")
    finished = [s for s in library_settings(runs, args.seed, grid, "trl", **overrides) if is_finished(s, runs_dir)]
    settings, lines = [], []
    for s in finished:
        with open(os.path.join(runs_dir, s.name + ".json")) as f:
            settings.append({**json.load(f), "parameters": parameter_counts(s)})
        with open(os.path.join(runs_dir, s.name + ".csv")) as f:
            text = f.read().splitlines()
        lines += text if not lines else text[1:]   # one header
    if not settings:
        print(f"no finished runs in {runs_dir}", file=sys.stderr)
        return 1
    os.makedirs(args.data, exist_ok=True)
    log_path = os.path.join(args.data, "trl_library.csv.gz")
    with gzip.GzipFile(log_path, "wb", mtime=0) as dst:
        dst.write(("\n".join(lines) + "\n").encode())   # mtime 0: the same runs give the same bytes
    cpu = [r["cpu_s"] for r in settings]
    sft = sft_models(args.work)
    shown = ["python", "tools/trl_library.py", *(sys.argv[1:] if argv is None else argv)]
    meta = {"command": shlex.join(shown).replace(shlex.quote(args.work), "OUT"),
            "grid": args.grid, "pilot": args.pilot, "runs_requested": runs,
            "python": platform.python_version(),
            "packages": {name: metadata.version(name) for name in PACKAGES},
            "runs": len(settings), "tasks": sorted({r["task"] for r in settings}),
            "policy_parameters": sorted({r["parameters"]["policy"] for r in settings}),
            "reward_model_parameters": sorted({r["parameters"]["reward_model"] for r in settings} - {None}),
            "cpu_s_total": round(sum(cpu) + sum(m["cpu_s"] for m in sft), 1),
            "cpu_s_per_run": {"min": min(cpu), "median": sorted(cpu)[len(cpu) // 2], "max": max(cpu)},
            "sft_models": sft,
            "note": "CPU seconds of each run's worker process (time.process_time), on a shared 2-core machine; "
                    "the first run of a worker also pays for importing torch / transformers / TRL; each SFT "
                    "model is built once before the runs that share it (sft_models: its CPU seconds; in "
                    "cpu_s_total, not in any run's cpu_s; none listed if the folder's models predate the "
                    "record); parameters counted on models built from each run's configs (the policy's "
                    "reference model is a frozen copy of the same size)",
            "settings": [{k: v for k, v in r.items() if k not in ("wall_s",)} for r in settings]}
    with open(os.path.join(args.data, "trl_library.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print(f"packed {len(settings)} runs, {meta['cpu_s_total']:.0f} CPU s in all ({sum(cpu):.0f} in the runs, "
          f"the rest in {len(sft)} SFT models), into {args.data}")
    from evalstop_gym.curvelog import read_curve_log

    logged = read_curve_log(log_path, "csv")
    print(summary(settings, logged))
    if args.pilot:
        print()
        print(projection(settings, sft, library_settings(len(full), args.seed, full, "trl", **overrides)))
    return 0


def sft_models(work: str) -> list[dict]:
    """The SFT models built in ``work/models``: each one's settings and the CPU seconds it took (models
    without a recorded ``cpu_s`` left out)."""
    out = []
    models = os.path.join(work, "models")
    for name in sorted(os.listdir(models)) if os.path.isdir(models) else ():
        path = os.path.join(models, name, "sft.json")
        if name.startswith("sft-") and os.path.exists(path):
            with open(path) as f:
                record = json.load(f)
            if "cpu_s" in record:
                out.append(record)
    return out


def _progress(done: int, total: int) -> None:
    print(f"{done}/{total} runs finished", file=sys.stderr, flush=True)


def _line(cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def shape_rows(settings: list[dict], logged: dict, evals: int = 10) -> list[dict]:
    """Each run's settings with its label (the gold rule on ``evals`` checkpoints) and the shape of its gold
    curve on that grid: start, peak, its position (share of the run), end, and the fall from the peak."""
    from evalstop_gym.curvelog import label_run, resample

    rows = []
    for s in settings:
        run = logged[s["name"]]
        lab = label_run(run, evals=evals)
        start, g = resample(run, "gold", evals)
        top = max(start, float(g.max()))
        rows.append({**s, "hacking": lab.hacking, "peak": lab.peak_progress, "start": start, "top": top,
                     "end": float(g[-1]), "fall": top - float(g[-1]), "kl_end": run.extra["kl"][-1]})
    return rows


def summary(settings: list[dict], logged: dict, evals: int = 10) -> str:
    """Markdown tables of a packed library (``logged``: its runs by name): by task, width and method, the
    runs, labels (gold rule on ``evals`` checkpoints), where gold peaks and how far it falls, with and
    without a KL penalty; then the same per grid setting."""
    import numpy as np

    rows = shape_rows(settings, logged, evals)

    def med(sel, key):
        return f"{np.median([r[key] for r in sel]):.2f}" if sel else "-"

    out = [_line(["task", "width", "method", "KL penalty", "runs", "hacking", "gold start", "gold peak",
                  "peak position (median)", "fall after the peak (median)", "gold end (median)",
                  "CPU s per run (median)"]), _line(["---"] * 12)]
    order = {"grpo": 0, "rloo": 1, "dpo": 2}
    keys = sorted({(r["task"], r["dim"], r["method"], r["kl_coef"] > 0 or r["method"] == "dpo") for r in rows},
                  key=lambda k: (k[0] != "copy", k[0], k[1], order[k[2]], k[3]))
    for task, dim, method, penalised in keys:
        sel = [r for r in rows if (r["task"], r["dim"], r["method"]) == (task, dim, method)
               and (r["kl_coef"] > 0 or method == "dpo") == penalised]
        out.append(_line([task, dim, method.upper(), "beta" if method == "dpo" else ("yes" if penalised else "no"),
                          len(sel), sum(r["hacking"] for r in sel), med(sel, "start"), med(sel, "top"),
                          med(sel, "peak"), med(sel, "fall"), med(sel, "end"), med(sel, "cpu_s")]))
    out += ["", _line(["task", "width", "method", "pairs", "KL coef / beta", "lr", "RM width", "runs", "hacking",
                       "gold start", "gold peak", "gold end", "final KL (nats)"]), _line(["---"] * 13)]
    groups: dict = {}
    for r in rows:
        key = (r["task"], r["dim"], r["method"], r["pairs"], r["kl_coef"], r["lr"],
               r["rm_dim"] if r["method"] != "dpo" else "-")
        groups.setdefault(key, []).append(r)
    for key in sorted(groups, key=lambda k: (k[0] != "copy", k[0], k[1], order[k[2]], *k[3:6], str(k[6]))):
        g = groups[key]
        out.append(_line([key[0], key[1], key[2].upper(), key[3], f"{key[4]:g}", f"{key[5]:g}", key[6], len(g),
                          sum(r["hacking"] for r in g)]
                         + [f"{np.mean([r[c] for r in g]):.2f}" for c in ("start", "top", "end")]
                         + [f"{np.mean([r['kl_end'] for r in g]):.1f}"]))
    return "\n".join(out)


def projection(pilot: list[dict], sft: list[dict], library: list) -> str:
    """The full library's CPU time projected from pilot runs and their SFT models: each library run costs the
    mean CPU seconds of the pilot runs of its task and width, and each SFT model the library needs (one per
    seed, task and width) what the pilot's of that task and width cost. Pilot runs are GRPO with a reward
    model; DPO runs, which fit none and generate nothing, cost less, so the projection errs high."""
    import numpy as np

    per, sft_cost = {}, {}
    for r in pilot:
        per.setdefault((r["task"], r["dim"]), []).append(r["cpu_s"])
    for m in sft:
        sft_cost.setdefault((m["task"], m["dim"]), []).append(m["cpu_s"])
    missing = sorted({(s.task, s.dim) for s in library} - (set(per) & set(sft_cost)))
    if missing:
        return f"no projection: the pilot has no run or no SFT model of task / width {missing}"
    cells = [_line(["task", "width", "pilot runs", "CPU s per pilot run (mean)", "library runs", "SFT models",
                    "CPU s per SFT model", "projected CPU s"]), _line(["---"] * 8)]
    total = 0.0
    for key in sorted(per):
        n = sum((s.task, s.dim) == key for s in library)
        models = len({s.seed for s in library if (s.task, s.dim) == key})
        run_s, sft_s = float(np.mean(per[key])), float(np.mean(sft_cost[key]))
        total += n * run_s + models * sft_s
        cells.append(_line([key[0], key[1], len(per[key]), f"{run_s:.1f}", n, models, f"{sft_s:.1f}",
                            f"{n * run_s + models * sft_s:.0f}"]))
    cells.append(f"\nprojected: {len(library)} runs, {total:.0f} CPU s = {total / 3600:.2f} CPU-hours "
                 f"({total / 3600 / 2:.2f} h of wall time on 2 cores with 2 workers, if nothing else runs)")
    return "\n".join(cells)


if __name__ == "__main__":
    sys.exit(main())
