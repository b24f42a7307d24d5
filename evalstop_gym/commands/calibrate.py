"""``evalstop-gym calibrate``: fit a world to a curve log and write it as a world file (evalstop_gym.fit)."""

from __future__ import annotations

import argparse
import dataclasses
import os

from ..fit import FIT_SEED
from ..fitreport import REPORT_SEED

ORDER = 47
# Runs per job type the report samples. A KS p-value of the log against a world sample of m runs varies with the
# sample; as m grows it settles on the test of the log against the world's own distribution, which is the
# question. Measured on the TRL library (96 runs) against grounded over ten seeds: the smallest p of the 14 rows
# spans 0.009-0.12 at 400 runs a type and 0.037-0.064 at 10,000 (about 20 s a report on 2 cores)
REPORT_SAMPLES = 10_000


def add_parser(sub) -> None:
    from ..config import CALIBRATIONS

    p = sub.add_parser("calibrate", help="fit a world (world.yaml) to logged runs",
                       description="Fit the latent-cause curve model (KL growth and penalty, gold optimum and "
                                   "gain, drift, proxy, loss) and the eval noise to the runs of a curve log "
                                   "(CSV / JSONL / TensorBoard / trainer_state.json; each run should log kl, and "
                                   "ideally gold and eval_items) and write the world file OUT; print the fit "
                                   "quality: per-feature quantiles, real runs against the fitted world's samples, "
                                   "and the fit report: the shape of gold (share hacking, peak, drop, end minus "
                                   "start, proxy-gold correlation, noise, step autocorrelation) per job type with "
                                   "KS p-values, the world sampled on held-out seeds at the log's checkpoint count. "
                                   "What a log cannot tell (costs, speed, cluster) comes from --base. Use the file "
                                   "anywhere a calibration is named: --calibration OUT (docs/calibration.md).")
    p.add_argument("--curves", required=True, metavar="PATH",
                   help="the runs to fit: a curve log, a trainer_state.json, or a folder of logs (runs without "
                        "gold or kl are listed as skipped, with why)")
    p.add_argument("--curves-format", default="auto", metavar="FORMAT",
                   help="auto, csv, jsonl or tensorboard (default %(default)s)")
    p.add_argument("--out", required=True, metavar="FILE.yaml", help="world file to write")
    p.add_argument("--base", default="realistic", metavar="NAME|FILE",
                   help=f"calibration giving what the log cannot: {', '.join(CALIBRATIONS)} or a world file "
                        "(default %(default)s)")
    p.add_argument("--description", default=None,
                   help="the world's one-line description (default: says what it was fitted to)")
    p.add_argument("--figure", default=None, metavar="FILE.png",
                   help="also draw the fit report: the logged runs' and the world's distributions side by side "
                        "(matplotlib)")
    p.add_argument("--samples", type=int, default=REPORT_SAMPLES, metavar="N",
                   help="runs per job type sampled from the fitted world for the quality table and the fit report "
                        "(default %(default)s: enough that the report's KS p-values are the world's, not its "
                        "sample's; 400 gives a quick look)")
    p.add_argument("--evals", type=int, default=10, metavar="E",
                   help="checkpoint grid of the gold label in the table, and the grid the drift is stored for "
                        "(default %(default)s, the workload's evals per job)")
    p.add_argument("--seed", type=int, default=REPORT_SEED,
                   help=f"seed of the fitted world's samples, held out: not {FIT_SEED}, the fit's own "
                        "(default %(default)s)")
    p.set_defaults(func=run)


def source_digest(path: str) -> str:
    """SHA-256 of a file's bytes; of a directory, of its files' relative paths and digests, sorted."""
    import hashlib

    from ..trace_cache import file_digest

    if not os.path.isdir(path):
        return file_digest(path) or ""
    h = hashlib.sha256()
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for f in sorted(files):
            full = os.path.join(root, f)
            h.update(f"{os.path.relpath(full, path)}\0{file_digest(full)}\n".encode())
    return h.hexdigest()


def command_line(args: argparse.Namespace) -> str:
    parts = ["evalstop-gym calibrate", f"--curves {args.curves}", f"--out {args.out}", f"--base {args.base}"]
    if args.curves_format != "auto":
        parts.append(f"--curves-format {args.curves_format}")
    if args.description is not None:
        parts.append(f"--description {args.description!r}")
    if args.evals != 10:
        parts.append(f"--evals {args.evals}")
    return " ".join(parts)


def fitted_runs(args: argparse.Namespace) -> dict:
    """The runs of ``--curves`` that a world can be fitted to (gold and kl logged); the others, and every log
    refused, listed on stdout with why (an error stays one line on stderr)."""
    import sys

    from .. import fit
    from .curves import load_runs

    runs = load_runs(args.curves, args.curves_format, out=sys.stdout)
    usable = {}
    for name, run in runs.items():
        why = fit.skip_reason(run)
        if why:
            print(f"skipped: run {name!r}: {why}")
        else:
            usable[name] = run
    return usable or runs   # none usable: fit_world says what every run lacks


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from .. import __version__, fit, fitreport
    from ..checks import UsageError, check_range
    from ..config import calibration_of
    from ..files import atomic_open
    from ..worldfile import dump_world, is_world_path, rounded

    if not is_world_path(args.out):
        raise UsageError(f"--out {args.out}: a world file is named .yaml or .yml")
    check_range("samples", args.samples, 10, 100_000, integer=True)
    check_range("evals", args.evals, 3, 1000, integer=True)
    if args.seed == FIT_SEED:
        raise UsageError(f"--seed {args.seed}: the fit samples its own runs on seed {FIT_SEED}; the report's samples "
                         "must be held out (any other seed)")
    base = calibration_of(args.base)
    runs = fitted_runs(args)
    description = args.description or (f"fitted by evalstop-gym calibrate to the runs of "
                                       f"{os.path.basename(os.fspath(args.curves))}; costs, speed and cluster "
                                       f"from {args.base}")
    result = fit.fit_world(runs, base, description, ref_evals=args.evals)
    result = dataclasses.replace(result, calibration=rounded(result.calibration))
    types = sorted({f.job_type for f in result.fits})
    evals = int(max(f.evals for f in result.fits))
    share = result.rlhf_exploitable if result.rlhf_exploitable == result.rlhf_exploitable else 0.6
    samples = fit.sample_runs(result.calibration, {t: args.samples for t in types}, evals, args.seed, share)
    # the world is held to every run it was fitted to, the ones the per-run fit refused too (a run that collapses
    # to its floor within two evals leaves too few points to fit): leaving them out would flatter the world
    library = runs
    rows = fit.feature_table(library, samples, args.evals)
    provenance = {
        "source": os.fspath(args.curves), "sha256": source_digest(os.fspath(args.curves)),
        "command": command_line(args), "version": __version__, "base": args.base,
        "runs": len(result.fits), "runs_in_log": len(runs),
        "rlhf_exploitable": round(share, 4),
        "fitted": list(fit.FITTED), "from_base": list(result.from_base), "notes": list(result.notes),
    }
    header = (f"A world fitted by `{provenance['command']}` (evalstop-gym {__version__}); regenerate it with that "
              "command.\nFields under provenance.from_base come from the base calibration: a curve log cannot "
              "identify them.")
    with atomic_open(args.out, "w", field="out") as f:
        f.write(dump_world(result.calibration, provenance, header))
    print(f"Fitted {len(result.fits)} of {len(runs)} runs of {args.curves} (base {args.base}); wrote {args.out}")
    for note in result.notes:
        print(f"  note: {note}")
    print(f"  RLHF runs with an exploitable proxy: {share:.2f} (a workload's hacking_fraction; "
          "the world file does not hold it)")
    print(f"Fit quality: real runs against {args.samples} samples per job type of the fitted world "
          f"(hacking share: the gold rule on {args.evals} checkpoints)")
    print(fit.format_table(rows))
    world = fitreport.world_runs(result.calibration, library, share, args.evals, args.samples, args.seed)
    shapes = fitreport.measure(library, world)
    shape = fitreport.shape_table(shapes)
    evals = int(np.median([r.series("gold")[1].size - 1 for r in library.values()]))
    print(f"\nFit report: the logged runs against {args.samples} runs per job type of the world (seed {args.seed}, "
          f"{evals} checkpoints); KS p > {fitreport.KS_BAR} on {sum(r.matches for r in shape)} of {len(shape)}")
    print(fitreport.format_report(shape))
    if args.figure:
        fitreport.plot_shapes(shapes, shape, args.figure)
        print(f"wrote {args.figure}")
    return 0

