"""``evalstop-gym audit``: can a job's public data before its peak tell its hidden label? (evalstop_gym.audit)"""

from __future__ import annotations

import argparse
import json

ORDER = 45
CONFIG_FIELDS = ("config_auc", "with_config_auc", "pre_peak_config_auc", "pre_peak_with_config_auc")


def add_parser(sub) -> None:
    from ..config import CALIBRATIONS, PRESETS

    p = sub.add_parser("audit", help="leak audit: early public features vs the hidden hacking label",
                       description="Within each job type, each public feature's rank AUC for the hidden "
                                   "hacking label at evals 1, 2 and 3, and a small classifier's cross-validated "
                                   "AUC over all of them (docs/audit.md); and what each job's public configuration "
                                   "tells, alone and beside them. A synthetic world (--calibration) is "
                                   "sampled over --seeds; a curve log (--curves) is labelled by the gold rule, "
                                   "its configuration read from the manifest beside it.")
    p.add_argument("--calibration", default="paper", metavar="NAME|FILE",
                   help=f"world: {', '.join(CALIBRATIONS)} or a world file (.yaml) (default %(default)s)")
    p.add_argument("--curves", default=None, metavar="FILE",
                   help="audit the runs of this curve log (needs a gold column) instead of a world")
    p.add_argument("--preset", "--workload", dest="workload", default="rlhf-heavy", metavar="NAME",
                   help=f"workload preset: {', '.join(PRESETS)} (default %(default)s)")
    p.add_argument("--seeds", default="700-739", metavar="A-B",
                   help="world seeds, a range A-B (default %(default)s: never used to tune anything)")
    p.add_argument("--jobs", type=int, default=200, help="jobs per workload (default %(default)s)")
    p.add_argument("--evals-per-job", type=int, default=10, help="evals per job (default %(default)s)")
    p.add_argument("--noise", type=float, default=None, help="eval noise sigma (default: the calibration's)")
    p.add_argument("--hacking-fraction", type=float, default=None, metavar="F",
                   help="share of RLHF runs with an exploitable proxy (default: the workload's, 0.6)")
    p.add_argument("--no-classifier", action="store_true", help="single-feature AUCs only (no scikit-learn)")
    p.add_argument("--features", action="store_true", help="also list every feature's AUC")
    p.add_argument("--no-config", action="store_true",
                   help="leave out what each job's configuration tells (its classifiers triple the run time)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar on stderr (also off when stderr is not a terminal)")
    p.set_defaults(func=run)


def parse_seeds(text: str) -> range:
    from .common import seed_range   # bounded: at most MAX_SEEDS seeds, checked before any is listed

    return seed_range(text)


def run(args: argparse.Namespace) -> int:
    from .. import audit as au
    from ..config import WorkloadConfig
    from ..experiments.progress import progress_bar

    if args.curves is not None:
        runs = au.log_runs(args.curves, evals=args.evals_per_job)
        what = f"curve log {args.curves} (labels by the gold rule on {args.evals_per_job} checkpoints)"
    else:
        kw = dict(workload=args.workload, jobs=args.jobs, evals_per_job=args.evals_per_job,
                  calibration=args.calibration)
        if args.noise is not None:
            kw["noise"] = args.noise
        if args.hacking_fraction is not None:
            kw["hacking_fraction"] = args.hacking_fraction
        cfg = WorkloadConfig(**kw)
        seeds = parse_seeds(args.seeds)
        runs = au.world_runs(cfg, progress_bar(len(seeds), "audit: workloads", "seed", not args.quiet, seeds))
        what = (f"calibration {args.calibration}, {args.workload}, {args.jobs} jobs x seeds "
                f"{seeds.start}-{seeds.stop - 1}, noise {cfg.noise:g}, hacking fraction {cfg.hacking_fraction:g}")
    # one (job type, eval) at a time, in au.audit's order: the classifier's cross-validation is the long part
    steps = [(t, i) for t in au.JOB_TYPES if t in runs for i in au.AUDIT_EVALS]
    rows = [r for t, i in progress_bar(len(steps), "audit: classifiers", "step", not args.quiet, steps)
            for r in au.audit({t: runs[t]}, evals=(i,), classifier=not args.no_classifier, config=not args.no_config)]
    shares = au.labelled(runs)
    if args.json:
        pre = au.best_pre_peak_auc(rows)

        def num(v):
            return v if v == v else None

        print(json.dumps({"source": what, "labelled": {t: {"hacking": h, "runs": n} for t, (h, n) in shares.items()},
                          "best_early_auc": au.best_early_auc(rows),
                          "best_pre_peak_auc": num(pre),
                          **{f"best_{f}": num(au.best_of(rows, f)) for f in CONFIG_FIELDS},
                          "rows": [{**{k: getattr(r, k) for k in ("job_type", "eval", "runs", "hacking",
                                                                    "best_feature", "best_feature_auc",
                                                                    "classifier_auc", "pre_peak_runs",
                                                                    "pre_peak_hacking")},
                                    "pre_peak_auc": num(r.pre_peak_auc),
                                    **{f: num(getattr(r, f)) for f in CONFIG_FIELDS},
                                    **({"feature_aucs": r.feature_aucs} if args.features else {})}
                                   for r in rows]}, sort_keys=True))
        return 0
    print(f"Leak audit: {what}")
    h, n = shares["all"]
    print(f"labelled hacking: {h} of {n} runs ({100.0 * h / n:.1f}%); "
          + ", ".join(f"{t} {hh} of {nn}" for t, (hh, nn) in shares.items() if t != "all"))
    print(au.table(rows))
    pre = au.best_pre_peak_auc(rows)
    print(f"best early AUC: {au.best_early_auc(rows):.3f} (all runs: a visible decline counts, so detection too)")
    print("best pre-peak AUC: " + (f"{pre:.3f}" if pre == pre else "n/a (too few runs of a label before their peak)")
          + " (runs not yet past their peak: the leak figure)")
    if any(r.config_auc == r.config_auc for r in rows):
        print("What each job's public configuration (KL coefficient, learning rate, data and model size) tells:")
        print(au.config_table(rows))
        for f, what_it_is in (("config_auc", "configuration alone"), ("with_config_auc", "configuration + curves"),
                              ("pre_peak_config_auc", "pre-peak, configuration alone"),
                              ("pre_peak_with_config_auc", "pre-peak, configuration + curves")):
            v = au.best_of(rows, f)
            print(f"best AUC, {what_it_is}: " + (f"{v:.3f}" if v == v else "n/a"))
    if args.features:
        for r in rows:
            top = sorted(r.feature_aucs.items(), key=lambda kv: -kv[1])
            print(f"{r.job_type} eval {r.eval}: " + ", ".join(f"{k} {v:.2f}" for k, v in top))
    return 0
