"""Build the shipped TRL curve library (evalstop_gym/data/trl_library.csv.gz and trl_library.json).

    nice -n 10 python tools/trl_library.py --work /tmp/trl_library --runs 48 --workers 2

runs ``evalstop-gym curves generate --backend trl`` into ``--work`` (resumable:
rerun the same command after an interruption), then writes the gzip'd curve
log and a metadata file with the exact command, the package versions, and
each run's CPU seconds. ``--pack-only`` packs what ``--work`` holds.
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
    p.add_argument("--pack-only", action="store_true", help="do not run; pack the finished library in --work")
    args = p.parse_args(argv)
    command = [sys.executable, "-m", "evalstop_gym.cli", "curves", "generate", "--backend", "trl", "--out",
               args.work, "--runs", str(args.runs), "--workers", str(args.workers), "--seed", str(args.seed)]
    shown = ["evalstop-gym", *command[3:]]
    if not args.pack_only:
        subprocess.run(command, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    with open(os.path.join(args.work, "runs.json")) as f:
        index = json.load(f)
    runs = []
    for r in index["runs"]:
        with open(os.path.join(args.work, "runs", r["name"] + ".json")) as f:
            runs.append(json.load(f))
    os.makedirs(DATA, exist_ok=True)
    with open(os.path.join(args.work, index["curve_log"]), "rb") as src, \
            gzip.GzipFile(os.path.join(DATA, "trl_library.csv.gz"), "wb", mtime=0) as dst:
        dst.write(src.read())   # mtime 0: the same runs give the same bytes
    cpu = [r["cpu_s"] for r in runs]
    meta = {"command": shlex.join(shown).replace(shlex.quote(args.work), "OUT"),
            "python": platform.python_version(),
            "packages": {name: metadata.version(name) for name in PACKAGES},
            "runs": len(runs), "cpu_s_total": round(sum(cpu), 1),
            "cpu_s_per_run": {"min": min(cpu), "median": sorted(cpu)[len(cpu) // 2], "max": max(cpu)},
            "note": "CPU seconds of each run's worker process (time.process_time), on a shared 2-core machine; "
                    "the first run of a worker also pays for importing torch / transformers / TRL",
            "settings": [{k: v for k, v in r.items() if k not in ("wall_s",)} for r in runs]}
    with open(os.path.join(DATA, "trl_library.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print(f"packed {len(runs)} runs, {sum(cpu):.0f} CPU s in all, into {DATA}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
