"""Learned policies against the best hand-coded ones, fairly: the targets and the generalisation table.

    >>> from evalstop_gym.agents.targets import targets
    >>> report = targets(WorkloadConfig(calibration="realistic"), scheduler_model="runs/scheduler",
    ...                  stop_model="runs/stop", generalisation=True)
    >>> print(report.markdown())

The protocol (``docs/evaluation.md``):

1. **Selection, on validation seeds only** (:mod:`evalstop_gym.agents.selection`):
   every policy family tuned with the bench tuner's budget, by rules fixed in
   code: the scheduler x stopper pair by the bench's JCT rule (at no more
   regret than SRTF-Est + EvalStop k=2), and the stopper with the highest F1
   over the default base scheduler.
2. **Targets, on held-out test seeds** (``0 ..``; every arm plays the same
   workloads, so arms pair per seed):

   (a) the learned scheduler with the learned stop-policy answering its
       checkpoints has an average JCT at least :data:`TARGET_JCT_GAIN_PCT`
       percent lower than the chosen pair (mean per-seed change), significant,
       no more preemptions per episode than SRTF-Est + EvalStop k=2, and a mean
       delivered-quality regret no worse than the pair's;
   (b) the learned stop-policy, over the default base scheduler, has a mean
       F1 higher than the chosen detector's, significant, at equal or lower
       mean compute waste.

   The paired comparisons are the bench's (:func:`evalstop_gym.bench.score.compare`:
   a % change for JCT and waste, a difference for F1 and regret, each with its
   95% t-interval and paired t-test p). "Significant" is the bench's rule: the
   Holm-adjusted p (:func:`evalstop_gym.bench.score.holm`, over the two claims
   of one world, (a)'s JCT and (b)'s F1) below 0.05; otherwise it is
   a tie, and a tie misses the target (:mod:`evalstop_gym.agents.verdicts`).
3. **Generalisation**: both comparisons again, with the same models and the
   same chosen policies, on other worlds (:func:`generalisation_settings`): a
   larger cluster, the other workload presets, other eval noise, a replayed
   trace. A model that cannot run in a world (its inputs are sized by the
   cluster) gets a row saying why.

Generated worlds' runs are stored in ``<out>/runs.jsonl`` with the selection's
and reused on the next call; a replayed trace's runs are played again.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from evalstop_gym.api import DEFAULT_SCHEDULER
from evalstop_gym.config import PRESETS, ConfigError, WorkloadConfig, check_range

from .selection import VALIDATION_FIRST, RUNS_FILE, Selection, rows_with_f1, select
from .verdicts import REGRET, TARGET_JCT_GAIN_PCT, Arms, Judgement, Runs, Verdict, judge

PREEMPTION_REFERENCE = ("srtf-est", "evalstop")   # (a): at most this pair's preemptions per episode
LARGE_CLUSTER = {"gpus": 128, "jobs": 400}    # generalisation: twice the default cluster and workload
NOISE_LEVELS = (0.02, 0.05)                   # generalisation: Gaussian eval noise added on top of the world's
ARM_COLUMNS = ("avg_jct_h", "preemptions", "f1", "compute_waste_gpu_h", REGRET)


# -- arms and worlds -----------------------------------------------------------------
def learned_points(scheduler_model: str | None, stop_model: str | None, scheduler: str = DEFAULT_SCHEDULER):
    """``(learned scheduler point, learned stop-policy point)``, ``None`` for a model not given.

    Each model is read as ``bench --policy`` reads a saved model folder
    (:func:`evalstop_gym.bench.policies.parse_policy`: its config only, no
    torch); a model of the wrong kind is a one-line error naming its flag.
    """
    from evalstop_gym.bench.policies import is_model_path, parse_policy
    from evalstop_gym.experiments.spec import LEARNED, Arm, Point

    def policy_of(path: str, flag: str, want_stop: bool):
        if not is_model_path(path):
            raise ConfigError(flag, path, "no such model folder (expected a folder or a .zip saved by "
                              "`evalstop-gym train`)")
        try:
            p = parse_policy(path, scheduler)
        except ConfigError as e:
            raise ConfigError(flag, path, e.allowed) from None
        if (p.scheduler != LEARNED) != want_stop:
            kind = p.label.split(" over ")[0]   # what the model is, not where it would run
            raise ConfigError(flag, path, f"is a {kind}, not a {'stop-policy' if want_stop else 'scheduler'}")
        return p

    sched = stop = None
    stop_p = policy_of(stop_model, "stop_model", True) if stop_model is not None else None
    if stop_p is not None:
        stop = Point.of(Arm(stop_p.label, LEARNED, stop_p.params), scheduler)
    if scheduler_model is not None:
        p = policy_of(scheduler_model, "scheduler_model", False)
        arm = Arm(p.label, LEARNED, p.params)
        if stop_p is not None:
            with_stop = tuple(sorted((*p.params, *((f"stop_{k}", v) for k, v in stop_p.params))))
            arm = Arm(f"{p.label.split(' + ')[0]} + {stop_p.label.split(' over ')[0]}", LEARNED, with_stop)
        sched = Point.of(arm, LEARNED)
    return sched, stop


def hand_coded_point(row: Mapping[str, Any]):
    """The experiment point of a selection row (its tuned parameters included)."""
    from evalstop_gym.experiments.spec import Arm, Point

    return Point.of(Arm(row["arm"], row["stopper"], tuple(sorted(json.loads(row["params"]).items()))), row["scheduler"])


def reference_point():
    from evalstop_gym.experiments.spec import Arm, Point

    sched, stopper = PREEMPTION_REFERENCE
    return Point.of(Arm(f"{sched} + {stopper}", stopper), sched)


@dataclass(frozen=True)
class Setting:
    """A world the models are judged in: ``WorkloadConfig`` changes on the reference world, or a replayed trace
    (``trace``: a trace file; its jobs, a seeded sample of ``jobs`` per seed, replace the generated ones)."""

    label: str
    changes: tuple[tuple[str, Any], ...] = ()
    trace: str | None = None
    trace_format: str = "philly"

    def config(self, base: WorkloadConfig) -> WorkloadConfig:
        cfg = base.replace(**dict(self.changes))
        if self.trace is not None:   # the trace gives GPU demands: the generator's demand model must not refuse it
            from evalstop_gym.traces import trace_config

            cfg = cfg.replace(job_types=trace_config().job_types)
        return cfg

    def workload(self, base: WorkloadConfig, seed: int):
        cfg = self.config(base).replace(seed=seed)
        if self.trace is None:
            from evalstop_gym.workload import generate

            return generate(cfg)
        from evalstop_gym.traces import read_trace, replay_trace

        table = read_trace(self.trace, self.trace_format)
        return replay_trace(table, cfg, jobs=cfg.jobs, sample=True, rescale="arrivals", gpu_scale="fit")[0]


def generalisation_settings(base: WorkloadConfig, trace: str | None = None, trace_format: str = "philly",
                            noise_levels: Sequence[float] = NOISE_LEVELS) -> list[Setting]:
    """The reference world, then a larger cluster, the other presets, other noise levels and (with ``trace``)
    a replayed trace, each changing one thing."""
    out = [Setting(f"reference: {base.workload}, {base.gpus} GPUs, {base.jobs} jobs")]
    if (base.gpus, base.jobs) != (LARGE_CLUSTER["gpus"], LARGE_CLUSTER["jobs"]):
        out.append(Setting(f"{LARGE_CLUSTER['gpus']} GPUs, {LARGE_CLUSTER['jobs']} jobs",
                           tuple(sorted(LARGE_CLUSTER.items()))))
    out += [Setting(f"workload {w}", (("workload", w),)) for w in PRESETS if w != base.workload]
    out += [Setting(f"added eval noise sigma {s:g}", (("noise", s),)) for s in noise_levels if s != base.noise]
    if trace is not None:
        out.append(Setting(f"trace {Path(trace).name} ({base.jobs}-job samples, {base.gpus} GPUs)", trace=trace,
                           trace_format=trace_format))
    return out


# -- running -------------------------------------------------------------------------


def play(setting: Setting, points: Sequence, base: WorkloadConfig, seeds: Sequence[int], store) -> Runs:
    """Every point on every seed of ``setting``; a learned point that cannot run there maps to the reason."""
    from evalstop_gym.experiments.runner import RunSpec, pending_specs, run_sweep
    from evalstop_gym.experiments.spec import LEARNED

    from .evaluate import cannot_run, learned_on, run_learned_specs

    first = setting.workload(base, seeds[0])
    runs: Runs = {}
    for p in points:
        if p.stopper == LEARNED:
            why = cannot_run(dict(p.params), first)
            if why is not None:
                runs[p] = why
    todo = [p for p in points if p not in runs]
    if setting.trace is not None:
        from evalstop_gym.api import run_policy
        from evalstop_gym.baselines import make_policy

        for s in seeds:
            w = first if s == seeds[0] else setting.workload(base, s)
            for p in todo:
                m = (learned_on(p.scheduler, dict(p.params), w) if p.stopper == LEARNED
                     else run_policy(w, make_policy(p.scheduler, p.stopper, **dict(p.params))))
                runs.setdefault(p, []).append(m)
        return runs
    cfg = setting.config(base)
    specs = {p: [RunSpec.of(p, cfg, s) for s in seeds] for p in todo}
    run_sweep([s for p in todo if p.stopper != LEARNED for s in specs[p]], store)
    run_learned_specs(pending_specs([s for p in todo if p.stopper == LEARNED for s in specs[p]], store), store)
    for p in todo:
        runs[p] = [store.metrics[s.run_id] for s in specs[p]]
    return runs


# -- the report ----------------------------------------------------------------------
@dataclass
class TargetsReport:
    selection: Selection
    arms: Arms
    seeds: list[int]
    base: WorkloadConfig
    main: Judgement
    arm_table: str                               # Markdown: every arm on the test seeds, mean ± std
    rows: list[Judgement] = field(default_factory=list)   # generalisation (empty unless asked for)

    def markdown(self) -> str:
        from evalstop_gym.agents.evaluate import base_text

        j, a = self.main, self.arms
        parts = ["## Targets on held-out test seeds", "",
                 f"{base_text(self.base)}; held-out test seeds {self.seeds[0]}-{self.seeds[-1]} (n = {len(self.seeds)}); "
                 f"hand-coded policies chosen on validation seeds {self.selection.seeds[0]}-"
                 f"{self.selection.seeds[-1]}; cells: mean ± std over seeds.", "", self.arm_table, "",
                 target_table(j, a), "",
                 f"- (a) learned scheduler + stop-policy: {j.a if j.a is not None else j.a_note}",
                 f"- (b) learned stop-policy: {j.b if j.b is not None else j.b_note}", ""]
        if self.rows:
            parts += ["## Generalisation", "",
                      "Each row changes one thing in the reference world; the same models, the same hand-coded "
                      f"pair ({a.pair.arm}) and detector ({a.detector.arm}) chosen on the reference world's "
                      f"validation seeds, test seeds {self.seeds[0]}-{self.seeds[-1]}. JCT change: the learned "
                      "pair's average JCT against the hand-coded pair's, (learned - pair) / pair, mean per seed "
                      "[95% CI] (negative: lower); p: paired t-test / Holm-adjusted over the row's two claims.", "", generalisation_table(self.rows), ""]
            notes = [f"- {r.setting}: {n}" for r in self.rows for n in (r.a_note, r.b_note)
                     if n and not n.startswith("no learned")]
            if notes:
                parts += ["Rows not run:", *notes, ""]
        return "\n".join(parts)

    def as_json(self) -> str:
        return json.dumps({"seeds": self.seeds, "validation_seeds": self.selection.seeds,
                           "best_pair": self.arms.pair.arm, "best_detector": self.arms.detector.arm,
                           "targets": self.main.as_dict(), "generalisation": [r.as_dict() for r in self.rows]},
                          allow_nan=False, indent=1, default=_finite)


def _finite(v):
    raise TypeError(f"{type(v).__name__} is not JSON")


def change_text(c: Mapping[str, Any] | None, digits: int) -> str:
    """A paired comparison (:func:`evalstop_gym.bench.score.compare`) as ``change [95% CI]``: in % for a size
    (JCT, waste: (learned - hand-coded) / hand-coded, mean per seed), else a difference in the metric's unit."""
    if c is None or c["change"] is None:
        return ""
    unit = "%" if c["unit"] == "%" else ""
    lo, hi = c["ci"]
    ci = "" if lo is None else f" [{lo:+.{digits}f}, {hi:+.{digits}f}]"
    return f"{c['change']:+.{digits}f}{unit}{ci}"


def jct_change(c: Mapping[str, Any] | None) -> str:
    """The learned arm's average JCT against the pair's, ``(learned - pair) / pair`` in percent, mean per seed
    with its 95% CI: negative is lower (better)."""
    return change_text(c, 1)


def p_text(c: Mapping[str, Any] | None) -> str:
    """``p (t) / p (Holm)`` of a comparison; the Holm-adjusted p only for the claims corrected over."""
    from evalstop_gym.experiments.tables import fmt_p

    if c is None:
        return ""
    return fmt_p(c["p"]) + (f" / {fmt_p(c['p_holm'])}" if "p_holm" in c else "")


def target_table(j: Judgement, a: Arms) -> str:
    """The targets as a table: target, learned, hand-coded, paired change [95% CI], p-values, verdict."""
    from tabulate import tabulate

    from evalstop_gym.report import fmt

    def verdict(v: Verdict | None) -> str:   # the reasons follow the table, one line per target
        return ("met" if v.met else "missed") if v is not None else "not judged"

    body = [
        [f"(a) avg JCT >= {TARGET_JCT_GAIN_PCT:g}% lower than {a.pair.arm}", fmt(j.learned_jct, 2),
         fmt(j.pair_jct, 2), jct_change(j.jct), p_text(j.jct), verdict(j.a)],
        [f"(a) preemptions <= {a.reference.arm}'s", fmt(j.learned_preemptions, 1),
         fmt(j.reference_preemptions, 1), "", "", ""],
        [f"(a) quality regret <= {a.pair.arm}'s", fmt(j.learned_regret, 4), fmt(j.pair_regret, 4),
         change_text(j.regret, 4), p_text(j.regret), ""],
        [f"(b) F1 > {a.detector.arm}'s", fmt(j.learned_f1, 3), fmt(j.detector_f1, 3), change_text(j.f1, 3),
         p_text(j.f1), verdict(j.b)],
        ["(b) waste (GPU-h) <= the detector's", fmt(j.learned_waste, 0), fmt(j.detector_waste, 0),
         change_text(j.waste, 1), p_text(j.waste), ""]]
    return tabulate(body, headers=["target", "learned", "hand-coded", "change [95% CI]", "p (t / Holm)",
                                   "verdict"], tablefmt="github", disable_numparse=True)


def generalisation_table(rows: Sequence[Judgement]) -> str:
    from tabulate import tabulate

    from evalstop_gym.report import fmt

    def pair(x, y, d):
        return "" if x is None and y is None else f"{fmt(x, d)} / {fmt(y, d)}"

    body = []
    for r in rows:
        body.append([r.setting, pair(r.learned_jct, r.pair_jct, 2), jct_change(r.jct), p_text(r.jct),
                     pair(r.learned_preemptions, r.reference_preemptions, 1),
                     pair(r.learned_regret, r.pair_regret, 4),
                     ("met" if r.a.met else "missed") if r.a is not None else "n/a",
                     pair(r.learned_f1, r.detector_f1, 3), pair(r.learned_waste, r.detector_waste, 0),
                     ("met" if r.b.met else "missed") if r.b is not None else "n/a"])
    return tabulate(body, headers=["world", "avg JCT (h) learned / pair", "JCT change [95% CI]", "p (t / Holm)",
                                   "preemptions learned / SRTF-Est", "quality regret learned / pair", "(a)", "F1 learned / detector",
                                   "waste (GPU-h) learned / detector", "(b)"],
                    tablefmt="github", disable_numparse=True)


def targets(base: WorkloadConfig | None = None, *, scheduler_model: str | None = None,
            stop_model: str | None = None, seeds: int = 10, first_seed: int = 0, validation_seeds: int = 10,
            first_validation_seed: int = VALIDATION_FIRST, out: str = "results/targets", workers: int = 1,
            generalisation: bool = False, trace: str | None = None, trace_format: str = "philly",
            noise_levels: Sequence[float] = NOISE_LEVELS, settings: Sequence[Setting] | None = None,
            progress: bool = False) -> TargetsReport:
    """Select on validation seeds, then judge the models on held-out test seeds (and, with
    ``generalisation``, in every world of :func:`generalisation_settings`; given ``settings``, in those
    worlds, the first being the reference)."""
    from evalstop_gym.experiments.runner import ResultStore, RunSpec, exclusive
    from evalstop_gym.experiments.spec import Experiment

    from .seeds import check_test_seeds

    check_range("seeds", seeds, 2, integer=True)   # paired tests need two pairs
    check_test_seeds(first_seed, seeds)
    if settings is not None and not settings:
        raise ConfigError("settings", [], "must name at least one world (or be None: the generalisation worlds)")
    for s in noise_levels:
        check_range("noise_levels", s, 0.0, 1.0)
    base = base or WorkloadConfig()
    sched_point, stop_point = learned_points(scheduler_model, stop_model)
    sel = select(base, seeds=validation_seeds, first_seed=first_validation_seed, out=out, workers=workers,
                 progress=progress)
    arms = Arms(sched_point, hand_coded_point(sel.best_pair), reference_point(), stop_point,
                hand_coded_point(sel.best_detector))
    seed_list = list(range(first_seed, first_seed + seeds))
    worlds = list(settings) if settings is not None else (
        generalisation_settings(base, trace, trace_format, noise_levels) if generalisation
        else generalisation_settings(base)[:1])
    with exclusive(out, echo=lambda text: print(text, file=sys.stderr)):
        store = ResultStore(Path(out) / RUNS_FILE)
        judged = []
        for i, world in enumerate(worlds):
            if progress:
                print(f"targets: {world.label} ({i + 1}/{len(worlds)})", file=sys.stderr)
            runs = play(world, arms.points(), base, seed_list, store)
            judged.append(judge(world.label, runs, arms))
            if i == 0:
                ok = [p for p in arms.points() if not isinstance(runs[p], str)]
                exp = Experiment("targets", "Targets", "", None, tuple(ok), ARM_COLUMNS, ())
                results = {RunSpec.of(p, world.config(base), s).run_id: m
                           for p in ok for s, m in zip(seed_list, runs[p])}
                arm_table = _arm_table(exp, results, world.config(base), seed_list)
    rows = judged if generalisation or settings is not None else []
    return TargetsReport(sel, arms, seed_list, base, judged[0], arm_table, rows)


def _arm_table(exp, results, cfg: WorkloadConfig, seeds: Sequence[int]) -> str:
    from evalstop_gym.experiments.tables import markdown_table

    return markdown_table(exp, rows_with_f1(exp, results, cfg, seeds))


# -- command line (`evalstop-gym targets`) -------------------------------------------
HELP = "judge learned models against the best hand-coded policies (chosen on validation seeds)"
DESCRIPTION = ("Tune every hand-coded policy family with the bench's budget on validation seeds and choose the "
               "best scheduler x stopper pair (the bench's JCT rule) and detector (F1), then compare a learned "
               "scheduler + stop-policy and a learned stop-policy with "
               "them on held-out test seeds, paired per seed, with a met / missed verdict per target "
               "(docs/evaluation.md). Without models, prints the selection only. Runs are kept in "
               "OUT/runs.jsonl and reused.")


def add_arguments(p) -> None:
    from evalstop_gym.commands.common import MAX_SEEDS, add_workload_flags

    p.add_argument("--scheduler-model", default=None, metavar="DIR",
                   help="a learned scheduler saved by `train` (EvalStop-Cluster-v0); with --stop-model, that "
                        "stop-policy answers its eval checkpoints")
    p.add_argument("--stop-model", default=None, metavar="DIR",
                   help="a learned stop-policy saved by `train` (EvalStop-StopControl-v0)")
    p.add_argument("--seeds", type=int, default=10,
                   help=f"held-out test seeds --seed .. --seed+N-1 (default %(default)s, at most {MAX_SEEDS})")
    p.add_argument("--validation-seeds", type=int, default=10,
                   help=f"validation seeds of the selection (default %(default)s, at most {MAX_SEEDS})")
    p.add_argument("--validation-seed", type=int, default=VALIDATION_FIRST,
                   help="first validation seed (default %(default)s; test seeds are refused)")
    p.add_argument("--generalisation", action="store_true",
                   help=f"also judge the models on {LARGE_CLUSTER['gpus']} GPUs / {LARGE_CLUSTER['jobs']} jobs, "
                        "the other workload presets, other eval noise and (with --trace) a replayed trace")
    p.add_argument("--noise-levels", default=None, metavar="LIST",
                   help="with --generalisation: Gaussian eval noise sigmas added on top of the world's "
                        f"(default {','.join(f'{s:g}' for s in NOISE_LEVELS)})")
    p.add_argument("--trace", default=None, metavar="PATH",
                   help="with --generalisation: a job trace (docs/traces.md) replayed as one more world")
    p.add_argument("--trace-format", default=None, metavar="NAME", help="layout of --trace (default philly)")
    p.add_argument("--workers", type=int, default=1, help="parallel workers of the selection (default %(default)s)")
    p.add_argument("--out", default="results/targets", metavar="DIR",
                   help="folder for runs.jsonl, selection.md, targets.md and targets.json (default %(default)s)")
    p.add_argument("--no-progress", action="store_true", help="no progress messages")
    add_workload_flags(p)
    p.set_defaults(calibration="realistic")   # the targets are set in the realistic world


def _floats(flag: str, text: str) -> tuple[float, ...]:
    try:
        out = tuple(float(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise ConfigError(flag, text, "must be comma-separated numbers, e.g. 0.02,0.05") from None
    if not out or not all(math.isfinite(x) for x in out):
        raise ConfigError(flag, text, "must be comma-separated numbers, e.g. 0.02,0.05")
    return out


def run(args) -> int:
    from evalstop_gym.commands.common import seed_count, workload_kwargs
    from evalstop_gym.config import UsageError
    from evalstop_gym.files import prepare_out, write_atomic
    from evalstop_gym.traces import TRACE_FORMATS

    seed_count(args.seeds)
    seed_count(args.validation_seeds, "validation_seeds")

    if not args.generalisation:
        for flag, given in (("--trace", args.trace), ("--trace-format", args.trace_format),
                            ("--noise-levels", args.noise_levels)):
            if given is not None:
                raise UsageError(f"{flag} does nothing without --generalisation")
    if args.trace_format is not None and args.trace is None:
        raise UsageError("--trace-format does nothing without --trace")
    fmt = args.trace_format or "philly"
    if fmt not in TRACE_FORMATS:
        raise ConfigError("trace_format", fmt, f"must be one of {', '.join(TRACE_FORMATS)}")
    if args.trace is not None and not Path(args.trace).is_file():
        raise ConfigError("trace", args.trace, "no such file")
    noise_levels = NOISE_LEVELS if args.noise_levels is None else _floats("noise_levels", args.noise_levels)
    wl = workload_kwargs(args)
    first = wl.pop("seed")
    base = WorkloadConfig(**wl)
    prepare_out(args.out)
    out = Path(args.out)
    report = None
    try:
        if args.scheduler_model is None and args.stop_model is None:
            sel = select(base, seeds=args.validation_seeds, first_seed=args.validation_seed, out=out,
                         workers=args.workers, progress=not args.no_progress)
        else:
            report = targets(base, scheduler_model=args.scheduler_model, stop_model=args.stop_model,
                             seeds=args.seeds, first_seed=first, validation_seeds=args.validation_seeds,
                             first_validation_seed=args.validation_seed, out=args.out, workers=args.workers,
                             generalisation=args.generalisation, trace=args.trace, trace_format=fmt,
                             noise_levels=noise_levels, progress=not args.no_progress)
            sel = report.selection
    except KeyboardInterrupt:
        print(f"\ninterrupted: finished runs are kept in {out / RUNS_FILE}; run the same command again to resume",
              file=sys.stderr)
        return 130
    write_atomic(out / "selection.md", sel.markdown())
    if report is None:
        print(sel.markdown())
        return 0
    text = report.markdown()
    write_atomic(out / "targets.md", text)
    write_atomic(out / "targets.json", report.as_json() + "\n")
    print(text)
    return 0
