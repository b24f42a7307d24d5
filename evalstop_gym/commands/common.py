"""Flags shared by subcommands: workload knobs and policy choice."""

from __future__ import annotations

import argparse
from typing import Any

from ..api import DEFAULT_SCHEDULER
from ..config import CALIBRATIONS, PRESETS, WorkloadConfig

_DEFAULT = WorkloadConfig()


def add_workload_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("workload")
    g.add_argument("--workload", default=_DEFAULT.workload, metavar="NAME",
                   help=f"preset: {', '.join(PRESETS)} (default {_DEFAULT.workload})")
    g.add_argument("--jobs", type=int, default=_DEFAULT.jobs, help="number of jobs (default %(default)s)")
    g.add_argument("--gpus", type=int, default=_DEFAULT.gpus, help="cluster GPUs (default %(default)s)")
    g.add_argument("--load", type=float, default=_DEFAULT.load,
                   help="offered load, GPU demand over capacity (default %(default)s)")
    g.add_argument("--calibration", default=_DEFAULT.calibration, metavar="NAME",
                   help=f"world: {', '.join(CALIBRATIONS)} (default %(default)s; docs/calibration.md)")
    g.add_argument("--noise", type=float, default=None,
                   help="eval-score noise sigma added to every score (default: the calibration's, "
                        + ", ".join(f"{c.noise:g} in {n}" for n, c in CALIBRATIONS.items()) + ")")
    g.add_argument("--hacking-fraction", type=float, default=_DEFAULT.hacking_fraction,
                   help="fraction of RLHF runs that hack (default %(default)s)")
    g.add_argument("--evals-per-job", type=int, default=_DEFAULT.evals_per_job,
                   help="eval checkpoints per job (default %(default)s)")
    g.add_argument("--seed", type=int, default=_DEFAULT.seed, help="random seed (default %(default)s)")


def workload_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """WorkloadConfig fields from the flags; ``noise`` only if given (else the calibration's)."""
    out = dict(workload=args.workload, jobs=args.jobs, gpus=args.gpus, load=args.load,
               hacking_fraction=args.hacking_fraction, evals_per_job=args.evals_per_job, seed=args.seed,
               calibration=args.calibration)
    if args.noise is not None:
        out["noise"] = args.noise
    return out


def add_policy_flags(p: argparse.ArgumentParser) -> None:
    from baselines import SCHEDULERS, STOPPERS

    g = p.add_argument_group("policy")
    g.add_argument("--scheduler", default=DEFAULT_SCHEDULER, metavar="NAME",
                   help=f"base scheduler: {'|'.join(SCHEDULERS)} (default %(default)s)")
    g.add_argument("--stopper", default="none", metavar="NAME",
                   help=f"stopper: {'|'.join(STOPPERS)} (default %(default)s)")
    g.add_argument("--k", type=int, default=None, help="evalstop: consecutive declines to stop (default 2)")
    g.add_argument("--stop-progress", dest="p", type=float, default=None, metavar="P",
                   help="stopat: stop RLHF jobs at this fraction of training (default 0.65)")
    g.add_argument("--window", type=int, default=None,
                   help="lossplateau: evals the loss improvement is measured over (default 3); "
                        "smoothed: evals in the slope fit (default 6)")
    g.add_argument("--tolerance", type=float, default=None,
                   help="lossplateau: stop below this relative loss improvement (default 0.01)")
    g.add_argument("--patience", type=int, default=None,
                   help="patience: evals without a new best score before stopping (default 3)")
    g.add_argument("--min-delta", type=float, default=None,
                   help="patience: smallest score gain that counts as a new best (default 0)")
    g.add_argument("--threshold", type=float, default=None,
                   help="cusum: evidence to stop, in noise sigmas (default 2.5); "
                        "smoothed: slope standard errors below 0 to stop (default 0)")
    g.add_argument("--drift", type=float, default=None,
                   help="cusum: decline per eval ignored, in noise sigmas (default 0)")
    g.add_argument("--sigma", type=float, default=None,
                   help="cusum, smoothed: eval-noise sigma if known (default: estimated from observed scores)")


# stopper parameter flags (argparse dest names = the stoppers' keyword names); a new stopper adds its own
STOPPER_FLAGS = ("k", "p", "window", "tolerance", "patience", "min_delta", "threshold", "drift", "sigma")


def policy_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """Stopper parameters the user set; a flag the chosen stopper does not take is an error."""
    return {name: getattr(args, name) for name in STOPPER_FLAGS if getattr(args, name, None) is not None}
