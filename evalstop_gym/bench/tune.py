"""One tuner for every policy family, the same budget for each, on validation seeds only.

A family is a registered stopper (``none`` included) over any registered base
scheduler: its search space is the scheduler (categorical) and the stopper's
parameters in :data:`SPACES` (parameters a stopper takes but that are not
listed keep their defaults; a listed name the stopper does not take is an
error, so a renamed parameter cannot silently leave the space). Every family gets :data:`FAMILY_BUDGET` trials of Optuna's TPE sampler
(seed 0), so the result is the same on every machine and a rerun reuses its
runs (``tune.jsonl``). Trials play every playable row of the suite on
:data:`VALIDATION_SEEDS` validation seeds each (:meth:`~.suite.Row.validation_seeds`,
guarded by :func:`evalstop_gym.seeds.check_seeds`); no test seed is played.

The selection rules, fixed here before anything is tuned (:class:`Rule`):

* :data:`JCT` (the bench's, :data:`RULE`, :func:`objective`): the lowest mean
  per-workload ratio of average JCT to SRTF-Est without a stopper on the same
  workload, among trials whose mean delivered-quality regret is no worse than
  SRTF-Est + EvalStop k=2's on the same workloads; a trial above that regret
  scores its ratio + 1. The tuned best is the family whose best trial scores
  lowest.
* :data:`F1` (a detector's, for ``targets``' target (b), :func:`f1_objective`):
  the highest mean per-episode F1 from counts (:func:`evalstop_gym.metrics.f1_counts`);
  ties: less mean compute waste.

Ties between trials of one family go to the earlier trial.

A learned recipe is a family too (:func:`tune_learned`): its selection knob
(:data:`LEARNED_SPACE`, the weight of time against delivered quality in its
reward) gets :data:`BUDGET` trials, the same sampler and rule; each trial is a training run,
played on the validation seeds of the rows a saved model plays (the synthetic
ones), against the same reference arms on the same workloads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..config import ConfigError, check_range
from ..experiments.runner import ResultStore
from .play import COUNTS
from .policies import builtin
from .space import optuna_module as _optuna
from .suite import Row

# Trials per hand-coded family and per outside policy (bench --tune). 100: with the compiled path and each
# validation workload drawn once per process, a whole tuning of suite v3 at 100 trials a family took 0.41 of the
# CPU that 16 trials took on the Python path drawing every workload (52.9 against 130.4 CPU s, one process;
# benchmarks/bench_tune_cpu.py --new-budget 100; docs/bench.md, *Fair comparators*). 16 was the smallest budget
# at which the joint search found srtf-progress + cusum (drift 0.3, threshold 1.0) on suite v2.
FAMILY_BUDGET = 100
# Trials of a learned family (each a training run, about 4 min), whose published figures were tuned with it
# (``targets``' selection, evalstop_gym.agents.selection, tunes each hand-coded family with FAMILY_BUDGET)
BUDGET = 12
VALIDATION_SEEDS = 2       # validation workloads per row
RULE = ("lowest mean ratio of average JCT to SRTF-Est without a stopper, per validation workload, among trials "
        "whose mean delivered-quality regret is no worse than SRTF-Est + EvalStop k=2's; others score ratio + 1")

# name -> (low, high, step): the grid a stopper parameter is searched on (an int step: an integer parameter)
SPACES: dict[str, dict[str, tuple[float, float, float]]] = {
    "evalstop": {"k": (1, 5, 1)},
    "stopat": {"p": (0.3, 0.95, 0.05)},
    "lossplateau": {"window": (1, 6, 1), "tolerance": (0.0, 0.05, 0.005)},
    "patience": {"patience": (1, 6, 1), "min_delta": (0.0, 0.05, 0.005)},
    "cusum": {"threshold": (0.5, 6.0, 0.25), "drift": (0.0, 1.0, 0.05)},
    "smoothed": {"window": (3, 10, 1), "threshold": (0.0, 0.05, 0.005)},
    "droptest": {"window": (1, 5, 1), "z": (0.5, 4.0, 0.25), "min_drop": (0.0, 0.15, 0.01)},
    "divergence": {"window": (1, 5, 1), "z": (0.5, 4.0, 0.25), "min_drop": (0.0, 0.15, 0.01),
                   "fast_z": (0.5, 4.0, 0.25), "fast_min_drop": (0.0, 0.1, 0.01), "proxy_z": (0.5, 4.0, 0.25),
                   "lag": (1, 4, 1)},
}


# A learned stop-policy recipe's selection knob, searched as a stopper's parameters are: the weight w of the
# time terms against delivered quality (weight 100) in its training reward, jct_h and queue_h at -w each. The
# shipped recipes sit at w = 1 (ppo-realistic.yml) and w = 0.175 (ppo-realistic-quality.yml).
LEARNED_SPACE: dict[str, tuple[float, float, float]] = {"time_weight": (0.025, 1.0, 0.025)}


def validation_rows(rows: Sequence[Row], n: int = VALIDATION_SEEDS) -> list[Row]:
    """The rows with their test seeds replaced by ``n`` validation seeds each."""
    from dataclasses import replace

    return [replace(r, seeds=tuple(r.validation_seeds(n))) for r in rows]


def objective(arm: dict[str, dict[str, list]], none: dict[str, dict[str, list]],
              evalstop: dict[str, dict[str, list]]) -> tuple[float, bool]:
    """The selection rule on row -> metric -> per-seed values: ``(score, feasible)``; lower is better."""
    ratios = [a / b for row in none for a, b in zip(arm[row]["avg_jct_h"], none[row]["avg_jct_h"])]
    regret = [x for row in arm for x in arm[row]["delivered_quality_regret"]]
    cap = [x for row in evalstop for x in evalstop[row]["delivered_quality_regret"]]
    feasible = sum(regret) / len(regret) <= sum(cap) / len(cap) + 1e-12
    score = sum(ratios) / len(ratios)
    return (score if feasible else score + 1.0), feasible


def f1_objective(arm: dict[str, dict[str, list]], none: dict[str, dict[str, list]],
                 evalstop: dict[str, dict[str, list]]) -> tuple[float, bool, float]:
    """The detector rule on row -> metric -> per-seed values: ``(-mean F1, True, mean waste)``; lower is better.

    F1 is per episode from its counts (an episode with no hacking run and no stop has none and is left out;
    with none at all the score is 0). The reference arms are not used: F1 is absolute."""
    from ..metrics import f1_counts

    runs = [dict(zip(COUNTS, c)) for row in arm.values() for c in zip(*(row[m] for m in COUNTS))]
    f1 = [x for x in map(f1_counts, runs) if x is not None]
    waste = [x for row in arm.values() for x in row["compute_waste_gpu_h"]]
    return (-sum(f1) / len(f1) if f1 else 0.0), True, sum(waste) / len(waste)


@dataclass(frozen=True)
class Rule:
    """A selection rule: its text (as results record it) and its score of a trial, ``(score, feasible, tie)``,
    lower first on ``score`` then ``tie``."""

    name: str
    text: str
    score: Callable[..., tuple[float, bool, float]]


JCT = Rule("jct", RULE, lambda arm, none, evalstop: (*objective(arm, none, evalstop), 0.0))
F1 = Rule("f1", "highest mean F1 per validation episode (from its counts: 0 where a stopper stops no hacking run); "
          "ties: less mean compute waste", f1_objective)


def _budget(budget: int | None, default: int | None = None) -> int:
    """``budget``, else ``default``, else :data:`FAMILY_BUDGET` (read at the call), checked."""
    budget = (FAMILY_BUDGET if default is None else default) if budget is None else budget
    check_range("budget", budget, 1, 1000, integer=True)
    return budget


def _references(val: Sequence[Row], store: ResultStore, kw: dict) -> tuple:
    """``(no stopper, EvalStop k=2, their runs on val)``: the arms the rule scores a trial against.

    Every trial plays the same validation workloads: they are drawn here once, in this process, so the local
    pool's workers (forked from it at every round) find them drawn (:func:`~.play.warm_workloads`)."""
    from .arms import play
    from .play import warm_workloads

    none, evalstop = builtin("srtf-est"), builtin("srtf-est", "evalstop", k=2)
    if kw["backend"] == "local":
        warm_workloads(val, none)
    return none, evalstop, play([none, evalstop], val, store, **kw)


def _bar(total: int, progress: bool):
    import sys

    from tqdm import tqdm

    return tqdm(total=total, desc="tune", unit="trial", file=sys.stderr, disable=not progress)


def tune_families(rows: Sequence[Row], store: ResultStore, *, budget: int | None = None, families: Sequence[str] | None = None,
                  schedulers: Sequence[str] | None = None, rule: Rule = JCT,
                  validation: int | None = VALIDATION_SEEDS, backend: str = "local", workers: int = 1,
                  ray_address: str | None = None, progress: bool = True, per_scheduler: bool = False) -> dict[str, Any]:
    """Tune every family with the same budget by ``rule``; return each family's best trial and the best of them.

    ``per_scheduler``: each (scheduler, stopper) pair is a family of its own, its stopper's parameters
    searched over that scheduler alone with the whole budget (keys ``SCHEDULER+STOPPER``), instead of one
    study per stopper that searches the scheduler too: ``len(schedulers)`` times the trials, and no scheduler
    left untried.

    ``schedulers``: the base schedulers a trial may pick (default: every registered one). ``validation``:
    validation seeds per row (:meth:`Row.validation_seeds`); ``None``: each row's own seeds, which must be
    validation seeds (``targets`` plays its declared validation workloads so).
    """
    from ..baselines import SCHEDULERS, STOPPERS, stopper_params
    from ..seeds import check_seeds
    from .arms import play

    optuna = _optuna()
    budget = _budget(budget)
    families = list(STOPPERS) if families is None else list(families)
    schedulers = list(SCHEDULERS) if schedulers is None else list(schedulers)
    for f in families:
        if f not in STOPPERS:
            raise ConfigError("families", f, f"must be among {', '.join(STOPPERS)}")
    for name in schedulers:
        if name not in SCHEDULERS:
            raise ConfigError("schedulers", name, f"must be among {', '.join(SCHEDULERS)}")
    if not families or not schedulers:
        raise ConfigError("families" if not families else "schedulers", [], "must name at least one")
    if validation is None:
        val = list(rows)
        for r in val:
            check_seeds("validation", r.seeds)
    else:
        val = validation_rows(rows, validation)
    kw = dict(backend=backend, workers=workers, ray_address=ray_address, progress=False)
    none, evalstop, base = _references(val, store, kw)

    # Every family's study is its own TPE sequence; round i asks each study for its trial i and plays all
    # of them in one sweep (one worker pool, longest runs first) before telling any result. Each study
    # sees exactly the history it would see tuned alone, so the tuning does not depend on the batching.
    pairs = {f"{sched}+{fam}": (sched, fam) for fam in families for sched in schedulers} if per_scheduler else \
        {fam: (None, fam) for fam in families}
    studies = {key: optuna.create_study(sampler=optuna.samplers.TPESampler(seed=0)) for key in pairs}
    spaces = {fam: SPACES.get(fam, {}) for fam in families}
    for fam, space in spaces.items():
        unknown = sorted(set(space) - set(stopper_params(fam)))
        if unknown:
            raise ConfigError(f"SPACES[{fam!r}]", unknown, f"are not parameters of stopper {fam!r} (it takes: "
                                                           f"{', '.join(stopper_params(fam))})")
    tried: dict[str, list[dict[str, Any]]] = {key: [] for key in pairs}
    bar = _bar(budget * len(pairs), progress)
    for _ in range(budget):
        asked = []
        for key, study in studies.items():
            trial = study.ask()
            sched, fam = pairs[key]
            sched = sched or trial.suggest_categorical("scheduler", schedulers)
            params = {k: (trial.suggest_int(k, lo, hi, step=step) if isinstance(step, int) else
                          round(trial.suggest_float(k, lo, hi, step=step), 6))   # 0.30000000000000004 -> 0.3
                      for k, (lo, hi, step) in spaces[fam].items()}
            asked.append((key, fam, trial, sched, params, builtin(sched, fam, **params)))
        values = play(list({pol.label: pol for *_, pol in asked}.values()), val, store, **kw)
        for key, fam, trial, sched, params, pol in asked:
            score, feasible, tie = rule.score(values[pol.label], base[none.label], base[evalstop.label])
            studies[key].tell(trial, score)
            tried[key].append({"stopper": fam, "scheduler": sched, "params": params, "score": score, "tie": tie,
                               "feasible": feasible, "label": pol.label})
        bar.update(len(asked))
    bar.close()
    out: dict[str, Any] = {}
    for key, trials in tried.items():
        out[key] = {**min(trials, key=lambda t: (t["score"], t["tie"])), "searched": sorted(spaces[pairs[key][1]]),
                    "every_trial": trials}
    best = min(out.values(), key=lambda f: (f["score"], f["tie"]))
    return {"rule": rule.text, "trials": budget, "validation_seeds_per_row": validation, "per_scheduler": per_scheduler,
            "rows": [r.name for r in val], "families": out, "best": best}


def tune_learned(rows: Sequence[Row], store: ResultStore, train: Callable[[dict[str, float]], Any], *,
                 budget: int | None = None, backend: str = "local", workers: int = 1,
                 ray_address: str | None = None, progress: bool = True) -> dict[str, Any]:
    """Tune a learned recipe's :data:`LEARNED_SPACE` with a family's budget, sampler and :data:`RULE`.

    ``train(params)`` trains the recipe with those knob values and returns the saved model's folder (the
    caller's: the bench does not import the learned layer); each trial's model plays the validation seeds
    of the synthetic rows of ``rows``, as do the reference arms it is scored against. Returns the tuning in
    the shape of one family of :func:`tune_families`, with every trial and the best trial's ``model``.
    """
    from .arms import play
    from .policies import parse_policy

    optuna = _optuna()
    budget = _budget(budget, BUDGET)
    val = [r for r in validation_rows(rows) if r.synthetic]
    if not val:
        raise ConfigError("rows", [r.name for r in rows], "hold no synthetic row, the only rows a saved model plays")
    kw = dict(backend=backend, workers=workers, ray_address=ray_address, progress=False)
    none, evalstop, base = _references(val, store, kw)
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=0))
    trials = []
    bar = _bar(budget, progress)
    for _ in range(budget):
        trial = study.ask()
        params = {k: round(trial.suggest_float(k, lo, hi, step=step), 6) for k, (lo, hi, step) in LEARNED_SPACE.items()}
        model = str(train(params))
        pol = parse_policy(model)
        score, feasible = objective(play([pol], val, store, **kw)[pol.label], base[none.label], base[evalstop.label])
        study.tell(trial, score)
        trials.append({"params": params, "score": score, "feasible": feasible, "model": model, "label": pol.label})
        bar.update()
    bar.close()
    best = trials[study.best_trial.number]
    return {"rule": RULE, "trials": budget, "validation_seeds_per_row": VALIDATION_SEEDS, "rows": [r.name for r in val],
            "searched": sorted(LEARNED_SPACE), "best": best, "every_trial": trials}


def tune_outside(policy, space: dict[str, str], rows: Sequence[Row], store: ResultStore, *,
                 budget: int | None = None, rule: Rule = JCT, validation: int = VALIDATION_SEEDS,
                 in_process: bool = False, backend: str = "local", workers: int = 1, ray_address: str | None = None,
                 progress: bool = True) -> tuple[dict[str, Any], Any]:
    """Tune an outside policy's declared ``space`` (:func:`~.space.declared_space`) as a family is tuned: the same
    budget, sampler (TPE, seed 0), validation seeds, reference arms and rule. Returns ``(tuning, policy)``:
    the tuning as results record it (budget, validation seeds, every trial, the best) and the best trial's
    :class:`~.policies.BenchPolicy`."""
    import json
    from dataclasses import replace

    from .arms import play

    optuna = _optuna()
    budget = _budget(budget)
    val = validation_rows(rows, validation)
    kw = dict(backend=backend, workers=workers, ray_address=ray_address, progress=False, in_process=in_process)
    none, evalstop, base = _references(val, store, kw)
    dists = {k: optuna.distributions.json_to_distribution(v) for k, v in space.items()}
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=0))
    head = " + ".join([policy.scheduler, *([policy.stopper] if policy.stopper != "none" else [])])
    trials, tried = [], []
    bar = _bar(budget, progress)
    for _ in range(budget):
        trial = study.ask(dists)
        params = {**dict(policy.params), **trial.params}
        pol = replace(policy, params=tuple(sorted(params.items())),
                      label=head + "".join(f" {k}={v}" for k, v in sorted(params.items())),
                      text=f"{policy.scheduler}+{policy.stopper}:"
                           + ",".join(f"{k}={json.dumps(v)}" for k, v in sorted(params.items())))
        score, feasible, tie = rule.score(play([pol], val, store, **kw)[pol.label], base[none.label],
                                          base[evalstop.label])
        study.tell(trial, score)
        trials.append({"params": params, "score": score, "tie": tie, "feasible": feasible, "label": pol.label,
                       "policy": pol.text})
        tried.append(pol)
        bar.update()
    bar.close()
    best = min(range(budget), key=lambda i: (trials[i]["score"], trials[i]["tie"]))
    return {"rule": rule.text, "budget": budget, "validation_seeds_per_row": validation,
            "validation_seeds": {r.name: list(r.seeds) for r in val}, "searched": sorted(space),
            "every_trial": trials, "best": trials[best]}, tried[best]
