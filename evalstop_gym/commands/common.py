"""Flags shared by subcommands: workload knobs and policy choice."""

from __future__ import annotations

import argparse
from typing import Any

from ..api import DEFAULT_SCHEDULER
from ..config import CALIBRATIONS, PRESETS, WorkloadConfig

_DEFAULT = WorkloadConfig()

# How many seeds one command may play (reproduce: per point; audit: worlds). Checked as the flag is read,
# before anything is allocated: 10,000 seeds of reproduce's 35-odd points are already days of CPU.
MAX_SEEDS = 10_000
MAX_SEED = 2**63 - 1   # numpy's seed and the run ids hold 64-bit integers


def seed_range(text: str, flag: str = "seeds") -> range:
    """``A-B`` (or ``A``) -> ``range(A, B + 1)``, with ``0 <= A <= B <= MAX_SEED`` and at most :data:`MAX_SEEDS`
    seeds; :class:`ConfigError` naming ``flag`` otherwise, before any list of seeds is made."""
    from ..config import ConfigError

    try:
        a, _, b = str(text).partition("-")
        lo, hi = int(a), int(b) if b else int(a)
    except ValueError:
        raise ConfigError(flag, text, "must be a range A-B of integers (or one integer)") from None
    if not 0 <= lo <= hi <= MAX_SEED:
        raise ConfigError(flag, text, f"must be a range A-B with 0 <= A <= B <= {MAX_SEED}")
    if hi - lo + 1 > MAX_SEEDS:
        raise ConfigError(flag, text, f"holds {hi - lo + 1} seeds, more than the {MAX_SEEDS} allowed")
    return range(lo, hi + 1)


def seed_count(value: int, flag: str = "seeds") -> int:
    """``value`` if it is a whole number of seeds in [1, :data:`MAX_SEEDS`]; :class:`ConfigError` naming ``flag``
    otherwise (a command checks it first, before any list of seeds or runs is made)."""
    from ..config import check_range

    check_range(flag, value, 1, MAX_SEEDS, integer=True)
    return value


class LazyChoices:
    """``choices`` for argparse read from ``module.NAME`` on first use, so a command run without
    the option does not import the module (the trace and curve readers: ~10 ms of start-up).

    argparse reads choices only to check a value given, to list them in an error or in ``--help``
    (``%(choices)s``, with an explicit ``metavar``: a default metavar would list them at once).
    """

    def __init__(self, module: str, name: str):
        self._where = (module, name)

    def _choices(self) -> tuple:
        import importlib

        module, name = self._where
        return getattr(importlib.import_module(module), name)

    def __contains__(self, value) -> bool:
        return value in self._choices()

    def __iter__(self):
        return iter(self._choices())


def add_workload_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("workload")
    g.add_argument("--workload", default=_DEFAULT.workload, metavar="NAME",
                   help=f"preset: {', '.join(PRESETS)} (default {_DEFAULT.workload})")
    g.add_argument("--jobs", type=int, default=_DEFAULT.jobs, help="number of jobs (default %(default)s)")
    g.add_argument("--gpus", type=int, default=None,
                   help=f"cluster GPUs (default {_DEFAULT.gpus}, or what --cluster / --nodes give)")
    g.add_argument("--load", type=float, default=_DEFAULT.load,
                   help="offered load, GPU demand over capacity (default %(default)s)")
    g.add_argument("--calibration", default=_DEFAULT.calibration, metavar="NAME|FILE",
                   help=f"world: {', '.join(CALIBRATIONS)} or a world file from evalstop-gym calibrate "
                        "(default %(default)s; docs/calibration.md)")
    g.add_argument("--noise", type=float, default=None,
                   help="eval-score noise sigma added to every score (default: the calibration's, "
                        f"{CALIBRATIONS['paper'].noise:g} in paper)")
    g.add_argument("--hacking-fraction", type=float, default=_DEFAULT.hacking_fraction,
                   help="fraction of RLHF runs that hack (default %(default)s)")
    g.add_argument("--evals-per-job", type=int, default=_DEFAULT.evals_per_job,
                   help="eval checkpoints per job (default %(default)s)")
    g.add_argument("--seed", type=int, default=_DEFAULT.seed, help="random seed (default %(default)s)")
    from ..cluster import CLUSTER_PRESETS, PLACEMENTS

    c = p.add_argument_group("cluster (docs/cluster.md; default: one flat pool of --gpus GPUs)")
    c.add_argument("--cluster", default=None, metavar="FILE|PRESET",
                   help=f"cluster spec: a YAML/JSON file, a preset ({', '.join(CLUSTER_PRESETS)}) or flat "
                        "(default: the calibration's; realistic and grounded: nodes of 8 GPUs)")
    c.add_argument("--nodes", type=int, default=None, help="nodes of --gpus-per-node GPUs each")
    c.add_argument("--gpus-per-node", type=int, default=None, help="GPUs per node (with --nodes, or --gpus)")
    c.add_argument("--placement", default=None, choices=PLACEMENTS,
                   help="placement policy on nodes (default: the spec's, else consolidate)")


def cluster_spec(args: argparse.Namespace):
    """The cluster spec the flags ask for, or None (the flat pool)."""
    from ..cluster import ClusterSpec, load_cluster, uniform
    from ..config import ConfigError

    spec = None
    if args.cluster is not None:
        if args.nodes is not None or args.gpus_per_node is not None:
            raise ConfigError("nodes", args.nodes, "give either --cluster or --nodes/--gpus-per-node, not both")
        if args.cluster == "flat":  # one pool of --gpus GPUs, whatever the calibration's default
            spec = ClusterSpec.flat(args.gpus if args.gpus is not None else _DEFAULT.gpus)
        else:
            spec = load_cluster(args.cluster)
    elif args.nodes is not None or args.gpus_per_node is not None:
        nodes, per = args.nodes, args.gpus_per_node
        if per is None or nodes is None:
            gpus = args.gpus if args.gpus is not None else _DEFAULT.gpus
            known, name = (nodes, "nodes") if per is None else (per, "gpus_per_node")
            if not isinstance(known, int) or known < 1 or gpus % known:
                raise ConfigError(name, known, f"must divide gpus={gpus} (or give both --nodes and --gpus-per-node)")
            nodes, per = (nodes, gpus // nodes) if per is None else (gpus // per, per)
        spec = uniform(nodes, per)
    if args.placement is not None:
        if spec is None:
            raise ConfigError("placement", args.placement, "applies to nodes: give --cluster or --nodes")
        spec = spec.with_placement(args.placement)
    if spec is not None and args.gpus is not None and args.gpus != spec.total_gpus:
        raise ConfigError("gpus", args.gpus, f"must equal the cluster's {spec.total_gpus} GPUs "
                                             f"({spec.describe()}), or be left out")
    return spec


def workload_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """WorkloadConfig fields from the flags; ``noise`` only if given (else the calibration's)."""
    spec = cluster_spec(args)
    gpus = spec.total_gpus if spec is not None else args.gpus if args.gpus is not None else _DEFAULT.gpus
    out = dict(workload=args.workload, jobs=args.jobs, gpus=gpus, load=args.load,
               hacking_fraction=args.hacking_fraction, evals_per_job=args.evals_per_job, seed=args.seed,
               calibration=args.calibration)
    if args.noise is not None:
        out["noise"] = args.noise
    if getattr(args, "estimate_error", None) is not None:
        out["estimate_error"] = args.estimate_error
    if spec is not None:
        out["cluster"] = spec
    return out


def add_policy_flags(p: argparse.ArgumentParser) -> None:
    import inspect

    from evalstop_gym.baselines import SCHEDULERS, STOPPERS

    def d(stopper: str, name: str):   # the default the stopper ships, so the help cannot fall behind it
        return f"default {inspect.signature(STOPPERS[stopper].__init__).parameters[name].default:g}"

    g = p.add_argument_group("policy")
    g.add_argument("--scheduler", default=DEFAULT_SCHEDULER, metavar="NAME",
                   help=f"base scheduler: {'|'.join(SCHEDULERS)} (default %(default)s)")
    g.add_argument("--stopper", default="none", metavar="NAME",
                   help=f"stopper: {'|'.join(STOPPERS)} (default %(default)s)")
    g.add_argument("--k", type=int, default=None, help=f"evalstop: consecutive declines to stop ({d('evalstop', 'k')})")
    g.add_argument("--stop-progress", dest="p", type=float, default=None, metavar="P",
                   help=f"stopat: stop RLHF jobs at this fraction of training ({d('stopat', 'p')})")
    g.add_argument("--window", type=int, default=None,
                   help=f"lossplateau: evals the loss improvement is measured over ({d('lossplateau', 'window')}); "
                        f"smoothed: evals in the slope fit ({d('smoothed', 'window')}); droptest: scores averaged "
                        f"({d('droptest', 'window')}); divergence: the same ({d('divergence', 'window')})")
    g.add_argument("--tolerance", type=float, default=None,
                   help=f"lossplateau: stop below this relative loss improvement ({d('lossplateau', 'tolerance')})")
    g.add_argument("--patience", type=int, default=None,
                   help=f"patience: evals without a new best score before stopping ({d('patience', 'patience')})")
    g.add_argument("--min-delta", type=float, default=None,
                   help=f"patience: a new best must beat the best by more than this ({d('patience', 'min_delta')})")
    g.add_argument("--threshold", type=float, default=None,
                   help=f"cusum: evidence to stop, in noise sigmas ({d('cusum', 'threshold')}); "
                        f"smoothed: slope standard errors below 0 to stop ({d('smoothed', 'threshold')})")
    g.add_argument("--drift", type=float, default=None,
                   help=f"cusum: decline per eval ignored, in noise sigmas ({d('cusum', 'drift')})")
    g.add_argument("--sigma", type=float, default=None,
                   help="cusum, smoothed, droptest, divergence: eval-noise sigma if known (default: estimated "
                        "from the observed scores of jobs with the same eval-set size)")


# stopper parameter flags (argparse dest names = the stoppers' keyword names); a new stopper adds its own
STOPPER_FLAGS = ("k", "p", "window", "tolerance", "patience", "min_delta", "threshold", "drift", "sigma")


def policy_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """Stopper parameters the user set; a flag the chosen stopper does not take is an error."""
    return {name: getattr(args, name) for name in STOPPER_FLAGS if getattr(args, name, None) is not None}
