"""The experiment suite as data: the paper's experiments E1-E5, plus E6-E10.

An :class:`Experiment` is a list of :class:`Point` s (one policy at one sweep
value, with the workload fields it changes) run over the same seeds, the
metric columns its table shows, what it plots, and the paper's claims it
checks (:class:`Claim`). Experiments are built against the policy registry
(``evalstop_gym.baselines.SCHEDULERS`` / ``evalstop_gym.baselines.STOPPERS``) at run time: a policy that
is not registered yet is skipped with a note in the experiment's output, never
a crash. "Our detectors" are all registered stoppers except the anchors
``none, evalstop, stopat, lossplateau``.

Every stopper arm is compared with the no-stopper arm on the same base
scheduler and the same workload (:meth:`Experiment.baseline_of`).
"""

from __future__ import annotations

import dataclasses
import operator
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from ..api import DEFAULT_SCHEDULER
from ..config import ConfigError, WorkloadConfig

ANCHOR_STOPPERS = ("none", "evalstop", "stopat", "lossplateau")
EXPECTED_SCHEDULERS = ("fifo", "sjf-est", "srtf-est", "lossaware", "tiresias")
MAIN_BASE = DEFAULT_SCHEDULER   # the paper's base scheduler
FALLBACK_BASE = "fifo"
EVALSTOP_K = 2              # the paper's default k
LEARNED = "learned"         # stopper name of a saved model's arm (run by its provider, .learned, not the pool)
STOPAT_P = 0.65             # the paper's fixed-progress anchor

NOISE_SWEEP = (0.01, 0.02, 0.05, 0.08, 0.10, 0.12)
BASE_RATE_SWEEP = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
K_SWEEP = (1, 2, 3, 4, 5)
EVALS_SWEEP = (5, 10, 20)
EVALS_NOISES = (0.02, 0.05)
LOAD_SWEEP = (0.6, 0.8, 1.0, 1.2, 1.5)
HETERO_SCHEDULER = "max-throughput"  # reads the GPU-type throughput matrix
PEAK_RANGES = ((0.15, 0.45), (0.3, 0.6), (0.45, 0.75), (0.6, 0.9), (0.7, 1.0))  # hacking-peak progress

# improvement columns: name -> the metric it reduces (lower is better for all). ``jct_gain_kept``
# pairs jobs: the JCT gain of the jobs the arm did not stop, each against its own JCT without a stopper.
GAINS = {"jct_gain": "avg_jct_h", "waste_cut": "compute_waste_gpu_h", "gpu_hours_cut": "gpu_hours",
         "jct_gain_kept": "avg_jct_h"}


@dataclass(frozen=True)
class Arm:
    """A stopper with its parameters, and the label it has in tables."""

    label: str
    stopper: str
    params: tuple[tuple[str, Any], ...] = ()


NO_STOPPER = Arm("none", "none")


@dataclass(frozen=True)
class Point:
    """One row of an experiment: a policy on a workload, run over every seed.

    ``workload`` holds the :class:`~evalstop_gym.config.WorkloadConfig` fields
    this point changes on top of the suite's base workload; ``x`` is the value
    of the experiment's swept variable shown in the table (``None``: no sweep).
    """

    arm: str
    scheduler: str
    stopper: str = "none"
    params: tuple[tuple[str, Any], ...] = ()
    workload: tuple[tuple[str, Any], ...] = ()
    x: Any = None

    @classmethod
    def of(cls, arm: Arm, scheduler: str, x: Any = None, **workload: Any) -> "Point":
        return cls(arm.label, scheduler, arm.stopper, arm.params, tuple(sorted(workload.items())), x)


_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt}


@dataclass(frozen=True)
class Check:
    """A target on one table column, e.g. ``Check("precision", ">=", 0.95)``."""

    column: str
    op: str
    value: float

    def holds(self, row: Mapping[str, Any]) -> bool | None:
        v = row.get(self.column)
        return None if v is None else _OPS[self.op](v, self.value)

    def __str__(self) -> str:
        return f"{self.column} {self.op} {self.value:g}"


@dataclass(frozen=True)
class Claim:
    """A claim of the paper (or of the calibration), our target for it, and the rows it covers.

    ``each``: one verdict per matching row; otherwise one verdict over all
    matching rows (it holds if every row meets every check). ``differs``: why
    our model is known not to meet it, as the docs explain (empty: a claim
    that does not hold is a surprise, and ``reproduce --strict`` fails).
    """

    text: str
    paper: str
    where: Callable[[Mapping[str, Any]], bool]
    checks: tuple[Check, ...]
    each: bool = False
    source: str = "target"
    differs: str = ""


@dataclass(frozen=True)
class Experiment:
    name: str
    title: str
    question: str
    x_name: str | None                 # header of the swept variable (None: no sweep)
    points: tuple[Point, ...]
    columns: tuple[str, ...]           # metric / gain columns of the Markdown table
    plot: tuple[str, ...]              # columns plotted, one panel each
    claims: tuple[Claim, ...] = ()
    notes: tuple[str, ...] = ()        # what was skipped or substituted
    plot_refs: tuple[tuple[str, Any, str], ...] = ()  # (column, value or (lo, hi), label)

    def baseline_of(self, point: Point) -> Point | None:
        """The no-stopper point with the same scheduler and workload, if this experiment has one."""
        if point.stopper == "none":
            return None
        for p in self.points:
            if p.stopper == "none" and p.scheduler == point.scheduler and p.workload == point.workload:
                return p
        return None


@dataclass(frozen=True)
class Registry:
    """Registered policy names: schedulers, and each stopper's parameter names."""

    schedulers: tuple[str, ...]
    stoppers: Mapping[str, tuple[str, ...]]

    @classmethod
    def current(cls) -> "Registry":
        from evalstop_gym.baselines import SCHEDULERS, STOPPERS, stopper_params

        return cls(tuple(SCHEDULERS), {s: tuple(stopper_params(s)) for s in STOPPERS})

    @property
    def detectors(self) -> tuple[str, ...]:
        return tuple(s for s in self.stoppers if s not in ANCHOR_STOPPERS)


@dataclass
class _Context:
    """What every experiment builder needs: the registry, the chosen base and detectors."""

    registry: Registry
    base: str
    detectors: tuple[str, ...]
    notes: list[str]
    learned_arm: tuple[Arm, str | None] | None = None   # a saved model's arm and its own scheduler, if any
    world: Any = None    # the WorkloadConfig the suite runs on: what E10 perturbs

    def learned(self, x: Any = None, **workload: Any) -> tuple[Point, ...]:
        """The learned policy's point (none without a model); a stop-policy runs over the base scheduler."""
        if self.learned_arm is None:
            return ()
        arm, scheduler = self.learned_arm
        return (Point.of(arm, scheduler or self.base, x, **workload),)

    def arm(self, stopper: str, **params: Any) -> Arm | None:
        """The arm of a registered stopper, or ``None`` (with a note) if it is not registered."""
        if stopper not in self.registry.stoppers:
            self.note(f"stopper {stopper!r} is not registered yet: its rows are skipped")
            return None
        taken = self.registry.stoppers[stopper]
        for p in [p for p in params if p not in taken]:
            self.note(f"stopper {stopper!r} takes no parameter {p!r}: ran with its default")
            del params[p]
        label = " ".join([stopper, *(f"{k}={_fmt(v)}" for k, v in params.items())])
        return Arm(label, stopper, tuple(sorted(params.items())))

    def evalstop(self, k: int = EVALSTOP_K) -> Arm | None:
        return self.arm("evalstop", k=k)

    def under_test(self) -> list[Arm]:
        """No stopper, EvalStop k=2 and our detectors: the arms of the detection sweeps."""
        arms = [NO_STOPPER, self.evalstop(), *(self.arm(d) for d in self.detectors)]
        if not self.detectors:
            self.note("no noise-robust detectors are registered yet: only EvalStop is swept")
        return [a for a in arms if a is not None]

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)


def _fmt(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _is(stopper: str, **at: Any) -> Callable[[Mapping[str, Any]], bool]:
    """Row filter: rows of ``stopper`` whose columns equal ``at`` (e.g. ``x=10, noise=0.02``)."""
    def where(row: Mapping[str, Any]) -> bool:
        return row["stopper"] == stopper and all(row.get(k) == v for k, v in at.items())
    return where


def _significant(gain: str) -> tuple[Check, Check]:
    return Check(f"{gain}_p_t", "<", 0.05), Check(f"{gain}_p_wilcoxon", "<", 0.05)


DETECTION = ("precision", "recall", "fpr")
IMPROVEMENT = ("jct_gain", "jct_gain_p", "waste_cut", "waste_cut_p")


def _e1(c: _Context) -> Experiment:
    arms = [NO_STOPPER, c.arm("stopat", p=STOPAT_P), c.arm("lossplateau"), c.evalstop(),
            *(c.arm(d) for d in c.detectors)]
    if c.learned_arm is None:
        c.note("no learned-policy row: pass a model saved by `evalstop-gym train` with --model PATH")
    evalstop = _is("evalstop")
    return Experiment(
        "E1", "Main table", f"Which stopper, over the {c.base} base scheduler, finds hacking runs and saves "
        "the most JCT and compute?", None,
        tuple(Point.of(a, c.base) for a in arms if a is not None) + c.learned(),
        (*DETECTION, "f1", "avg_jct_h", *IMPROVEMENT, "jct_gain_kept", "gpu_hours_cut", "compute_waste_gpu_h",
         "detection_delay_evals", "delivered_quality"),
        (*DETECTION, "jct_gain_pct", "waste_cut_pct"),
        claims=(
            Claim("EvalStop k=2 precision", "98%", evalstop, (Check("precision", ">=", 0.95),)),
            Claim("EvalStop k=2 recall", "99%", evalstop, (Check("recall", ">=", 0.95),)),
            Claim("EvalStop k=2 false-positive rate", "1.5%", evalstop, (Check("fpr", "<=", 0.03),)),
            Claim("EvalStop k=2 average JCT improvement vs no stopper", "9%", evalstop,
                  (Check("jct_gain_pct", ">=", 5.0), *_significant("jct_gain"))),
            Claim("EvalStop k=2 compute waste cut vs no stopper", "22%", evalstop,
                  (Check("waste_cut_pct", ">=", 15.0), *_significant("waste_cut"))),
            Claim("StopAt-0.65 false-positive rate", "~65%", _is("stopat"), (Check("fpr", ">=", 0.5),)),
            Claim("LossPlateau misses more than half of hacking runs", "recall < 50%", _is("lossplateau"),
                  (Check("recall", "<=", 0.5),)),
        ),
        plot_refs=(("precision", 0.98, "paper"), ("recall", 0.99, "paper"), ("fpr", 0.015, "paper"),
                   ("jct_gain_pct", 9.0, "paper"), ("waste_cut_pct", 22.0, "paper")))


def _e2(c: _Context) -> Experiment:
    missing = [s for s in EXPECTED_SCHEDULERS if s not in c.registry.schedulers]
    if missing:
        c.note(f"base schedulers not registered yet, skipped: {', '.join(missing)}")
    from ..baselines.ties import DEFAULT_TIE, TIE_RULES
    c.note(f"ties: tie={DEFAULT_TIE!r} (of {', '.join(TIE_RULES)}; evalstop_gym.baselines.ties): a preemptive "
           "base keeps running jobs ahead of waiting ones of equal rank, then waiting jobs in queue order; "
           "'arrival' ranks equal keys by arrival, as peer simulators that re-sort one arrival-ordered list do")
    if "tiresias" in c.registry.schedulers:
        from ..baselines.tiresias import Tiresias
        t = Tiresias()
        c.note(f"tiresias: order={t.order!r} (the reference simulator's queue lists: a queue's running jobs "
               f"ahead of its waiting ones; 'arrival' ranks a queue by arrival), "
               f"demotion_timer={t.demotion_timer!r}, promote_knob={t.promote_knob}")
    arms = [a for a in (NO_STOPPER, c.evalstop()) if a is not None]
    return Experiment(
        "E2", "Composability", "Does EvalStop k=2 improve every base scheduler?", "scheduler",
        tuple(Point.of(a, s, x=s) for s in c.registry.schedulers for a in arms),
        ("avg_jct_h", "p99_jct_h", *IMPROVEMENT, "precision", "recall"),
        ("avg_jct_h", "jct_gain_pct", "waste_cut_pct"),
        claims=(Claim("EvalStop k=2 improves average JCT on every base scheduler", "9-25% on every base",
                      _is("evalstop"), (Check("jct_gain_pct", ">", 0.0), *_significant("jct_gain"))),),
        plot_refs=(("jct_gain_pct", (9.0, 25.0), "paper range"),))


def _e3(c: _Context) -> Experiment:
    arms = c.under_test()
    return Experiment(
        "E3", "Eval-noise sweep", "How do precision, recall and FPR degrade as eval noise sigma grows?",
        "noise", tuple(p for s in NOISE_SWEEP
                       for p in (*(Point.of(a, c.base, x=s, noise=s) for a in arms), *c.learned(x=s, noise=s))),
        (*DETECTION, "detection_delay_evals", "jct_gain", "waste_cut"), DETECTION,
        claims=(
            Claim("EvalStop k=2 precision for sigma <= 0.05", ">= 91%",
                  lambda r: r["stopper"] == "evalstop" and r["x"] <= 0.05, (Check("precision", ">=", 0.91),),
                  source="paper"),
            Claim("at sigma 0.10: precision >= 0.95 with recall >= 0.90", "beyond the paper (k=2 degrades)",
                  lambda r: r["stopper"] != "none" and r["x"] == 0.10,
                  (Check("precision", ">=", 0.95), Check("recall", ">=", 0.90)), each=True,
                  differs="in the paper world at sigma 0.10 no detector at its defaults keeps both; smoothed "
                          "does as a setting (window 6, threshold 0), and one set of defaults cannot serve the "
                          "paper and the realistic world (docs/detectors.md, paper world at eval noise 0.10)"),
        ),
        plot_refs=(("precision", 0.91, "paper, sigma <= 0.05"),))


def _e4(c: _Context) -> Experiment:
    arms = c.under_test()
    return Experiment(
        "E4", "Hacking base-rate sweep", "Does precision hold when 20-80% of RLHF runs hack?",
        "hacking_fraction",
        tuple(Point.of(a, c.base, x=r, hacking_fraction=r) for r in BASE_RATE_SWEEP for a in arms),
        (*DETECTION, "jct_gain", "waste_cut"), DETECTION,
        claims=(Claim("EvalStop k=2 precision over 20-80% hacking base rates", ">= 89%", _is("evalstop"),
                      (Check("precision", ">=", 0.89),), source="paper"),),
        plot_refs=(("precision", 0.89, "paper"),))


def _e5(c: _Context) -> Experiment:
    ks = [a for a in (c.evalstop(k) for k in K_SWEEP) if a is not None]
    points = (Point.of(NO_STOPPER, c.base),   # the k column says which EvalStop
              *(Point.of(dataclasses.replace(a, label="evalstop"), c.base, x=dict(a.params).get("k"))
                for a in ks))
    return Experiment(
        "E5", "k sensitivity", "How many consecutive declines should EvalStop wait for?", "k", points,
        (*DETECTION, "detection_delay_evals", *IMPROVEMENT, "delivered_quality_regret"),
        (*DETECTION, "jct_gain_pct", "waste_cut_pct"))


def _e6(c: _Context) -> Experiment:
    arms = c.under_test()
    points = tuple(Point.of(Arm(f"{a.label} sigma={s:g}", a.stopper, a.params), c.base, x=e,
                            evals_per_job=e, noise=s)
                   for e in EVALS_SWEEP for s in EVALS_NOISES for a in arms)
    k2 = EVALSTOP_K

    return Experiment(
        "E6", "Eval count per job", "Do more evals per job (finer steps, same noise) cause k=2 false alarms?",
        "evals_per_job", points, (*DETECTION, "detection_delay_evals", "jct_gain", "waste_cut"), DETECTION,
        claims=(
            Claim(f"k={k2} false alarms near zero at sigma 0.02, 10 evals", "",
                  _is("evalstop", x=10, noise=0.02), (Check("fpr", "<=", 0.02),), source="calibration"),
            Claim(f"k={k2} false alarms near 5% at sigma 0.05, 10 evals", "",
                  _is("evalstop", x=10, noise=0.05), (Check("fpr", "<=", 0.10),), source="calibration"),
            Claim(f"k={k2} fires on about half of healthy runs at sigma 0.05, 20 evals", "",
                  _is("evalstop", x=20, noise=0.05), (Check("fpr", ">=", 0.25),), source="calibration"),
        ))


def _e7(c: _Context) -> Experiment:
    arms = [a for a in (NO_STOPPER, c.evalstop()) if a is not None]
    return Experiment(
        "E7", "Load sweep", "How much does EvalStop save as the cluster gets busier?", "load",
        tuple(Point.of(a, c.base, x=ld, load=ld) for ld in LOAD_SWEEP for a in arms),
        ("avg_jct_h", "avg_queue_h", "utilization", *IMPROVEMENT), ("avg_jct_h", "jct_gain_pct"))


def _e8(c: _Context) -> Experiment:
    arms = [a for a in (NO_STOPPER, c.evalstop()) if a is not None]
    c.note("each point draws RLHF hacking peaks uniformly from a range 0.3 wide; x is its middle; "
           "the paper calibration's range is 0.3-0.6, the realistic one's 0.2-0.45")
    points = tuple(Point.of(a, c.base, x=round((lo + hi) / 2, 3), **{"curves.hack_peak": (lo, hi)})
                   for lo, hi in PEAK_RANGES for a in arms)
    return Experiment(
        "E8", "Hacking-peak position", "Where in a run hacking sets in: how does it move recall, "
        "JCT gain and waste cut?", "peak_progress_mid", points,
        (*DETECTION, "detection_delay_evals", *IMPROVEMENT), ("recall", "jct_gain_pct", "waste_cut_pct"),
        claims=(Claim("recall >= 0.95 together with a waste cut near the paper's 22% (<= 30%)",
                      "99% recall, 22% waste cut", _is("evalstop"),
                      (Check("recall", ">=", 0.95), Check("waste_cut_pct", "<=", 30.0)), each=True,
                      source="paper",
                      differs="in our model k=2 catches a hacking run about 2 evals after its peak, freeing most "
                              "of its later GPU-hours: with early peaks recall is high and the waste cut far above "
                              "22%; peaks late enough for a cut near 22% leave k=2 too few evals to see two "
                              "declines, so recall falls (docs/results.md, compared with the paper)"),),
        plot_refs=(("recall", 0.99, "paper"), ("jct_gain_pct", 9.0, "paper"), ("waste_cut_pct", 22.0, "paper")))


def _e9(c: _Context) -> Experiment:
    from ..cluster import two_types, uniform

    arms = [a for a in (NO_STOPPER, c.evalstop()) if a is not None]
    clusters = [("flat pool", c.base, None), ("consolidate", c.base, uniform(8, 8, "consolidate")),
                ("first-fit", c.base, uniform(8, 8, "first-fit")), ("spread", c.base, uniform(8, 8, "spread")),
                ("two types", c.base, two_types(8, 8, "consolidate"))]
    if HETERO_SCHEDULER in c.registry.schedulers:  # FIFO order with and without reading the matrix
        clusters += [(f"two types, {s}", s, two_types(8, 8, "consolidate")) for s in (FALLBACK_BASE, HETERO_SCHEDULER)]
    else:
        c.note(f"scheduler {HETERO_SCHEDULER!r} is not registered: its two-type rows are skipped")
    c.note("consolidate / first-fit / spread: 8 nodes x 8 GPUs under that placement policy; two types: "
           "4 nodes of a newer and 4 of an older GPU type (0.55-0.80 of the newer one's speed), consolidated")
    c.note("every cluster has 64 GPUs and plays the same jobs, so the two-type cluster, with less capacity, "
           "runs at a higher effective load")
    points = tuple(Point.of(a, sched, x=label, **({"cluster": spec} if spec is not None else {}))
                   for label, sched, spec in clusters for a in arms)
    return Experiment(
        "E9", "Nodes, placement and GPU types", "Does EvalStop still pay off when GPUs come in 8-GPU nodes "
        "(placed by consolidation, first fit or spreading) and in two GPU generations?", "cluster", points,
        ("avg_jct_h", *IMPROVEMENT, "fragmentation_gpus", "spread_lost_gpu_h", "utilization"),
        ("avg_jct_h", "jct_gain_pct", "spread_lost_gpu_h"),
        claims=(Claim("EvalStop k=2 improves average JCT on every cluster", "9-25% on every base (flat pool)",
                      _is("evalstop"), (Check("jct_gain_pct", ">", 0.0), *_significant("jct_gain")),
                      differs="under spread placement large RLHF jobs that land across nodes run at 0.23 of "
                              "their speed on some seeds, so that row's per-seed gain varies widely and may miss "
                              "significance over 10 seeds (docs/results.md, E9)"),))


def misspecified(base: "WorkloadConfig") -> tuple[tuple[str, dict[str, Any]], ...]:
    """E10's worlds, each relative to the world it perturbs (``base``'s calibration or overrides): "x2" is twice
    that world's own value, so a fitted world is perturbed as much as a hand-set one."""
    lo, hi = base.world.seed_noise_factor
    c = base.curves
    # a world with DPO's own drift or penalty share (LatentModel.dpo_drift, dpo_penalty_share) has it perturbed too
    dpo_drift = {} if getattr(c, "dpo_drift", None) is None else {"curves.dpo_drift": 2.0 * c.dpo_drift}
    dpo_penalty = {} if getattr(c, "dpo_penalty_share", None) is None else {"curves.dpo_penalty_share": 0.0}
    worlds: tuple[tuple[str, dict[str, Any]], ...] = (
        ("as calibrated", {}),
        ("seed noise x2", {"world.seed_noise_factor": (2.0 * lo, 2.0 * hi)}),
        ("plateau drift x2", {"curves.drift": 2.0 * c.drift, **dpo_drift}),
        ("healthy KL grows", {"curves.penalty_share": 0.0, **dpo_penalty}),   # penalised runs' KL levels off
        # the label's own floor is an absolute 0.03 drop, so this one is absolute too
        ("drops near threshold", {"curves.peak_gain_exploitable": (0.03, 0.12)}),
    )
    return worlds + (("all four", {k: v for _, w in worlds for k, v in w.items()}),)


def _e10(c: _Context) -> Experiment:
    arms = c.under_test()
    c.note("meant for --calibration realistic or grounded: the paper world has no eval-set sizes, plateau drift or "
           "KL penalty, so there its first three variants equal the calibrated world")
    c.note("x2: twice the perturbed world's own value (seed noise: each job's eval sd is this factor times its "
           "sampling error; plateau drift: the sd of each step of the true score's drift); healthy KL grows: no "
           "run has a KL penalty; drops near threshold: runs with an exploitable proxy gain only 0.03-0.12 by "
           "their peak, so their falls are near the label's 0.03 minimum drop")
    points = tuple(Point.of(a, c.base, x=label, **world) for label, world in misspecified(c.world) for a in arms)
    return Experiment(
        "E10", "Misspecified worlds", "Do the detectors keep their F1 and waste cut when the world's noise, "
        "KL growth and hacking depth differ from the calibration they were chosen on?", "world", points,
        (*DETECTION, "f1", "waste_cut", "waste_cut_p", "compute_waste_gpu_h", "detection_delay_evals"),
        ("f1", "fpr", "waste_cut_pct"))


EXPERIMENTS: dict[str, tuple[str, Callable[[_Context], Experiment]]] = {
    "E1": ("main table: every stopper over the main base scheduler", _e1),
    "E2": ("composability: every base scheduler with and without EvalStop", _e2),
    "E3": ("eval-noise sweep, sigma 0.01-0.12", _e3),
    "E4": ("hacking base-rate sweep, 20-80% of RLHF runs", _e4),
    "E5": ("k sensitivity, k = 1-5", _e5),
    "E6": ("evals per job 5/10/20 at sigma 0.02 and 0.05", _e6),
    "E7": ("offered-load sweep 0.6-1.5", _e7),
    "E8": ("hacking-peak position sweep, peaks from 15-45% to 70-100% of a run", _e8),
    "E9": ("8-GPU nodes under each placement policy, and two GPU generations", _e9),
    "E10": ("misspecified worlds: more seed noise and jitter, healthy KL growth, shallow hacking", _e10),
}


def parse_names(text: str | None) -> list[str]:
    """``"E1,e3"`` -> ``["E1", "E3"]`` (``None`` or ``"all"``: every experiment)."""
    if text is None or text.strip().lower() == "all":
        return list(EXPERIMENTS)
    names = [t.strip().upper() for t in text.split(",") if t.strip()]
    if not names:
        raise ConfigError("experiments", text, f"must list some of {', '.join(EXPERIMENTS)}")
    for n in names:
        if n not in EXPERIMENTS:
            raise ConfigError("experiments", n, f"unknown experiment; choose from {', '.join(EXPERIMENTS)}")
    return list(dict.fromkeys(names))


def build_suite(names: Sequence[str] | None = None, *, registry: Registry | None = None,
                base_scheduler: str | None = None, detectors: Sequence[str] | None = None,
                model: str | None = None, workload: "WorkloadConfig | None" = None
                ) -> list[Experiment]:
    """Build the named experiments against the registry (default: the live one).

    ``base_scheduler`` defaults to SRTF-Est, falling back to FIFO (with a note)
    while SRTF-Est is not registered; naming an unregistered one is an error.
    ``detectors`` defaults to every registered non-anchor stopper. ``model``:
    the path of a model saved by ``evalstop-gym train``, which adds a
    ``learned`` row to E1 and to every noise level of E3 (:mod:`.learned`).
    ``workload``: the configuration the suite runs on (default: the paper
    world's), whose values E10 perturbs.
    """
    reg = registry or Registry.current()
    world = workload if workload is not None else WorkloadConfig()
    names = list(EXPERIMENTS) if names is None else names
    for n in names:
        if n not in EXPERIMENTS:
            raise ConfigError("experiments", n, f"unknown experiment; choose from {', '.join(EXPERIMENTS)}")
    notes: list[str] = []
    if base_scheduler is None:
        base = MAIN_BASE if MAIN_BASE in reg.schedulers else FALLBACK_BASE
        if base != MAIN_BASE:
            notes.append(f"base scheduler {MAIN_BASE!r} is not registered yet: ran on {base!r} instead")
    elif base_scheduler not in reg.schedulers:
        raise ConfigError("base_scheduler", base_scheduler, f"must be one of {', '.join(reg.schedulers)}")
    else:
        base = base_scheduler
    if detectors is None:
        dets = reg.detectors
    else:
        dets = tuple(dict.fromkeys(detectors))
        for d in dets:
            if d not in reg.detectors:
                raise ConfigError("detectors", d, "must be among the registered detectors: "
                                  f"{', '.join(reg.detectors) or '(none registered yet)'}")
    learned = None
    if model is not None:
        from .learned import provider

        learned = provider().arm(model)   # reads the model's config; no torch yet
    out = []
    for n in names:
        ctx = _Context(reg, base, dets, list(notes), learned, world)
        exp = EXPERIMENTS[n][1](ctx)
        out.append(dataclasses.replace(exp, notes=tuple(ctx.notes)))
    return out
