"""Evaluate policies, hand-coded by name or learned by path, on held-out seeds.

    >>> from evalstop_gym.agents.evaluate import evaluate
    >>> result = evaluate(["evalstop", "models/stop"], seeds=10, base=WorkloadConfig(noise=0.05))
    >>> print(result.table)

Every policy plays the same workloads (seeds ``first_seed .. first_seed +
seeds - 1``, held-out test seeds only, see :mod:`evalstop_gym.agents.seeds`), and the rows
are aggregated by the experiment suite's own code
(:func:`evalstop_gym.experiments.tables.aggregate`), so the table is the one
``reproduce`` prints: mean ± std over seeds, and paired gains against a
no-stopper row on the same scheduler when one is listed.

Policies are read as ``evalstop-gym bench --policy`` reads them
(:func:`evalstop_gym.bench.policies.parse_policy`): ``STOPPER`` (over
``scheduler``), ``SCHEDULER`` (no stopper), ``SCHEDULER+STOPPER``, each
optionally with parameters ``NAME:k=3`` / ``srtf-est+cusum:threshold=3,drift=0.5``;
``module:Class`` (a user's Scheduler or Stopper); or the path of a saved model
(its folder or its ``model.zip``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from evalstop_gym.api import DEFAULT_SCHEDULER
from evalstop_gym.config import ConfigError, WorkloadConfig, check_range
from evalstop_gym.experiments.spec import LEARNED

COLUMNS = ("avg_jct_h", "compute_waste_gpu_h", "precision", "recall", "fpr", "f1", "delivered_quality_regret",
           "jct_gain")


def policy_point(p):
    """The experiment Point of a :class:`~evalstop_gym.bench.policies.BenchPolicy` (the bench's parser's)."""
    from evalstop_gym.experiments.spec import Arm, Point

    return Point.of(Arm(p.label, p.stopper, p.params), p.scheduler)


_LOADED: dict[str, Any] = {}


def loaded(path: str):
    """The model at ``path`` (a :class:`~evalstop_gym.agents.policy.LearnedPolicy`), loaded once per process."""
    from .policy import LearnedPolicy

    return _LOADED.get(path) or _LOADED.setdefault(path, LearnedPolicy.load(path))


def cannot_run(params: dict[str, Any], workload) -> str | None:
    """Why the models of a learned arm (its ``params``: ``model``, optionally ``stop_model``) cannot run on
    ``workload``'s cluster (their inputs would change shape: a learned scheduler trained on nodes, on the flat
    pool), or ``None``."""
    from .policy import policy_env

    for key in ("model", "stop_model"):
        if key in params:
            try:
                policy_env(loaded(params[key]), workload)[0].close()
            except ConfigError as e:
                return e.allowed
    return None


def run_learned(spec) -> dict[str, Any]:
    """Metrics of one learned run (a :class:`~evalstop_gym.experiments.runner.RunSpec` with stopper ``learned``)."""
    from evalstop_gym.workload import generate

    return learned_on(spec.scheduler, dict(spec.params), generate(spec.config))


def learned_on(scheduler: str, params: dict[str, Any], workload) -> dict[str, Any]:
    """Metrics of a learned arm on a ready workload, on that workload's cluster.

    ``params``: ``model`` (a stop-policy, run over ``scheduler``, or a learned
    scheduler, ``scheduler == "learned"``) and optionally ``stop_model`` (a
    stop-policy answering the learned scheduler's checkpoints).
    """
    from .combined import learned_metrics

    pol = loaded(params["model"])
    over = scheduler if scheduler != LEARNED and pol.env_id.endswith("StopControl-v0") else None
    stop = loaded(params["stop_model"]) if "stop_model" in params else None
    return learned_metrics(pol, workload, over, stop)


def run_learned_specs(specs: Sequence, store, limit: int | None = None,
                      on_done: Callable[[], None] | None = None) -> int:
    """Run learned specs in this process (torch), appending each result to ``store``; ``reproduce`` uses it."""
    from evalstop_gym.experiments.runner import record

    done = 0
    for spec in specs[:limit] if limit is not None else specs:
        store.add(record(spec, run_learned(spec)))
        done += 1
        if on_done is not None:
            on_done()
    return done


@dataclass
class Evaluation:
    rows: list[dict[str, Any]]
    table: str                  # Markdown, as reproduce prints it
    experiment: Any
    seeds: list[int]
    per_seed: dict[str, list[dict[str, Any]]]   # arm label -> metrics of each seed


def evaluate(policies: Sequence[str], *, scheduler: str = DEFAULT_SCHEDULER, seeds: int = 10, first_seed: int = 0,
             base: WorkloadConfig | None = None) -> Evaluation:
    """Every policy on the same held-out seeds; rows and table as in ``reproduce``."""
    from evalstop_gym.bench.play import BenchSpec
    from evalstop_gym.bench.policies import LEARNED_KIND, parse_policies
    from evalstop_gym.experiments.runner import RunSpec
    from evalstop_gym.experiments.spec import Experiment
    from evalstop_gym.experiments.tables import aggregate, markdown_table

    from .seeds import check_test_seeds

    if not policies:
        raise ConfigError("policy", None, "name at least one policy")
    check_range("seeds", seeds, 1, integer=True)
    check_test_seeds(first_seed, seeds)
    base = base or WorkloadConfig()
    parsed = [(policy_point(p), p) for p in parse_policies(policies, scheduler)]
    points = [point for point, _ in parsed]
    exp = Experiment("evaluate", "Evaluation", "How do these policies compare on held-out seeds?", None,
                     tuple(points), COLUMNS, ())
    seed_list = list(range(first_seed, first_seed + seeds))
    results: dict[str, dict[str, Any]] = {}
    per_seed: dict[str, list[dict[str, Any]]] = {}
    for point, (_, policy) in zip(points, parsed):
        for s in seed_list:
            # a bench run (a user class's too), or a learned one in this process
            spec = BenchSpec(policy.scheduler, policy.stopper, policy.params, base.replace(seed=s),
                             source=policy.source)
            m = run_learned(spec) if policy.kind == LEARNED_KIND else spec.play()
            results[RunSpec.of(point, base, s).run_id] = m
            per_seed.setdefault(point.arm, []).append(m)
    rows = aggregate(exp, results, base, seed_list)
    return Evaluation(rows, markdown_table(exp, rows), exp, seed_list, per_seed)


# -- command line (`evalstop-gym evaluate`) --------------------------------------------
HELP = "compare policies by name or saved model on held-out seeds"
DESCRIPTION = ("Run each policy (a hand-coded one by name, or a model saved by `train` by path) on the same "
               "held-out seeds and print reproduce's metrics table: mean ± std over seeds of average JCT, "
               "compute waste, precision, recall, FPR, F1 and delivered-quality regret. To judge models against "
               "the best hand-coded policies chosen on validation seeds, with verdicts: `evalstop-gym targets`.")


def add_arguments(p) -> None:
    from evalstop_gym.commands.common import MAX_SEEDS, add_workload_flags

    p.add_argument("--policy", action="append", required=True, metavar="NAME_OR_PATH",
                   help="a hand-coded policy (STOPPER, SCHEDULER, SCHEDULER+STOPPER, optionally NAME:k=3), "
                        "module:Class, or a saved model (folder or model.zip), as bench --policy reads them; "
                        "repeat to compare several")
    p.add_argument("--scheduler", default=DEFAULT_SCHEDULER, metavar="NAME",
                   help="base scheduler of stopper names and of learned stop-policies (default %(default)s)")
    p.add_argument("--seeds", type=int, default=10,
                   help=f"held-out seeds --seed .. --seed+N-1 (default %(default)s, at most {MAX_SEEDS})")
    p.add_argument("--json", action="store_true", help="print the rows as one JSON list instead of the table")
    p.add_argument("--out", default=None, metavar="DIR", help="also write DIR/evaluate.md and evaluate.csv")
    add_workload_flags(p)


def run(args) -> int:
    from evalstop_gym.commands.common import seed_count, workload_kwargs
    from evalstop_gym.experiments.tables import csv_table

    wl = workload_kwargs(args)
    first = wl.pop("seed")
    ev = evaluate(args.policy, scheduler=args.scheduler, seeds=seed_count(args.seeds), first_seed=first,
                  base=WorkloadConfig(**wl))
    setup = (f"{base_text(WorkloadConfig(**wl))}; held-out seeds {ev.seeds[0]}-{ev.seeds[-1]} (n = {len(ev.seeds)}); "
             "cells: mean ± std over seeds")
    if args.out:
        from evalstop_gym.experiments.suite import prepare_out

        out = prepare_out(args.out)
        from evalstop_gym.files import write_atomic

        write_atomic(out / "evaluate.md", f"{setup}\n\n{ev.table}\n")
        write_atomic(out / "evaluate.csv", csv_table(ev.experiment, ev.rows))
    print(json.dumps(ev.rows, allow_nan=False) if args.json else f"{setup}\n\n{ev.table}")
    return 0


def base_text(cfg: WorkloadConfig) -> str:
    from evalstop_gym.report import noise_text

    return (f"{cfg.calibration} calibration, workload {cfg.workload}: {cfg.jobs} jobs on {cfg.gpus} GPUs, load "
            f"{cfg.load:g}, {noise_text(cfg)}, {cfg.hacking_fraction:.0%} of RLHF runs drawn to hack, "
            f"{cfg.evals_per_job} evals per job")
