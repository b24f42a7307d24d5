"""The targets' verdicts: pure functions of the bench's paired comparisons, Holm-corrected (docs/evaluation.md).

:func:`judge` pairs the per-seed metrics of the compared arms in one world
with :func:`evalstop_gym.bench.score.compare` (a % change for JCT and waste, a
difference for F1 and regret, each with its 95% t-interval and paired t-test
p), corrects the p-values of the world's two claims, (a)'s JCT and (b)'s F1,
together with :func:`evalstop_gym.bench.score.holm`, and states each target:
:func:`jct_verdict` (a) and :func:`f1_verdict` (b). A claim not significant
after the correction is a tie, and a tie misses. The protocol around it, the
selection on validation seeds and the worlds, is :mod:`evalstop_gym.agents.targets`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from evalstop_gym.bench.score import ALPHA as BENCH_ALPHA

from evalstop_gym.metrics import f1_counts

TARGET_JCT_GAIN_PCT = 3.0                     # (a): average JCT at least this many percent lower
ALPHA = BENCH_ALPHA                           # (a), (b): Holm-adjusted paired t-test p below this
REGRET = "delivered_quality_regret"          # (a): the learned pair's mean at most the chosen pair's
Runs = dict  # point -> list of per-seed metrics, or a str: why the point cannot run in this world


@dataclass(frozen=True)
class Verdict:
    met: bool
    why: str

    def __str__(self) -> str:
        return ("met" if self.met else "missed") + f": {self.why}"


def _significant(c: Mapping[str, Any], alpha: float) -> bool:
    return c.get("p_holm") is not None and c["p_holm"] < alpha


def _p(c: Mapping[str, Any]) -> str:
    from evalstop_gym.experiments.tables import fmt_p

    return f"p {fmt_p(c['p'])} (t), {fmt_p(c.get('p_holm'))} Holm-adjusted"


def jct_verdict(jct: Mapping[str, Any], learned_preemptions: float, reference_preemptions: float, *,
                learned_regret: float | None = None, pair_regret: float | None = None,
                target_pct: float = TARGET_JCT_GAIN_PCT, alpha: float = ALPHA) -> Verdict:
    """Target (a) from the paired JCT comparison ``jct`` (:func:`evalstop_gym.bench.score.compare` of
    ``avg_jct_h``, learned against the pair: ``change`` in %, negative when the learned arm is lower, with
    ``p_holm``), mean preemptions per episode and mean delivered-quality regret.

    A lower JCT bought by stopping runs too early is not a scheduling gain: when both regrets are given, the
    learned arm must deliver no worse quality on average (mean regret <= the pair's) for (a) to be met."""
    if jct["change"] is None:
        return Verdict(False, "no paired seeds")
    gain = -jct["change"]
    missed = []
    if gain < target_pct:
        missed.append(f"average JCT {_lower(gain)}, the target is >= {target_pct:g}% lower")
    if not _significant(jct, alpha):
        missed.append(f"the difference is a tie: not significant ({_p(jct)}; must be < {alpha:g})")
    if learned_preemptions > reference_preemptions:
        missed.append(f"{learned_preemptions:.1f} preemptions per episode, more than SRTF-Est's "
                      f"{reference_preemptions:.1f}")
    if learned_regret is not None and pair_regret is not None and learned_regret > pair_regret:
        missed.append(f"delivered-quality regret {learned_regret:.4f}, worse than the pair's {pair_regret:.4f}")
    if missed:
        return Verdict(False, "; ".join(missed))
    return Verdict(True, f"average JCT {_lower(gain)} ({_p(jct)}), {learned_preemptions:.1f} preemptions per "
                         f"episode against SRTF-Est's {reference_preemptions:.1f}")


def f1_verdict(f1: Mapping[str, Any], learned_waste: float, detector_waste: float, *,
               alpha: float = ALPHA) -> Verdict:
    """Target (b) from the paired F1 comparison ``f1`` (:func:`evalstop_gym.bench.score.compare`: ``change`` =
    learned minus detector, with ``p_holm``) and mean compute waste (GPU-hours)."""
    if f1["change"] is None:
        return Verdict(False, "no paired seeds")
    missed = []
    if f1["change"] <= 0 or not _significant(f1, alpha):
        how = "below the detector's" if f1["change"] < 0 else "a tie" if not _significant(f1, alpha) \
            else "not above the detector's"
        missed.append(f"F1 {f1['change']:+.3f} against the detector's: {how} ({_p(f1)}; higher with p < {alpha:g} "
                      "is required)")
    if learned_waste > detector_waste:
        missed.append(f"waste {learned_waste:.0f} GPU-h, more than the detector's {detector_waste:.0f}")
    if missed:
        return Verdict(False, "; ".join(missed))
    return Verdict(True, f"F1 {f1['change']:+.3f} against the detector's ({_p(f1)}), waste {learned_waste:.0f} <= "
                         f"{detector_waste:.0f} GPU-h")


def _lower(pct: float) -> str:
    return f"{pct:.1f}% lower" if pct >= 0 else f"{-pct:.1f}% higher"


@dataclass(frozen=True)
class Arms:
    """The experiment points compared: learned ones (``None`` without a model) and the chosen hand-coded ones."""

    learned: Any            # learned scheduler (+ learned stop-policy at its checkpoints)
    pair: Any               # best hand-coded pair (validation)
    reference: Any          # SRTF-Est + EvalStop k=2: its preemptions cap (a)
    learned_stop: Any       # learned stop-policy over the default base scheduler
    detector: Any           # best hand-coded detector over the default base scheduler

    def points(self) -> list:
        return list(dict.fromkeys(p for p in (self.learned, self.pair, self.reference, self.learned_stop,
                                              self.detector) if p is not None))


@dataclass
class Judgement:
    """Both targets in one world (one row of the generalisation table); ``None`` where not judged, with the
    reason in ``a_note`` / ``b_note``."""

    setting: str
    seeds: int
    learned_jct: float | None = None
    pair_jct: float | None = None
    jct: Any = None                          # bench.score.compare: % change learned vs pair, with p_holm
    learned_preemptions: float | None = None
    reference_preemptions: float | None = None
    learned_regret: float | None = None      # mean delivered-quality regret
    pair_regret: float | None = None
    regret: Any = None                       # bench.score.compare: learned minus pair
    a: Verdict | None = None
    a_note: str = ""
    learned_f1: float | None = None
    detector_f1: float | None = None
    f1: Any = None                           # bench.score.compare: learned minus detector, with p_holm
    learned_waste: float | None = None
    detector_waste: float | None = None
    waste: Any = None                        # bench.score.compare: % change learned vs detector
    b: Verdict | None = None
    b_note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {k: {"met": v.met, "why": v.why} if isinstance(v, Verdict) else v for k, v in self.__dict__.items()}


def _mean(runs: Sequence[Mapping[str, Any]], key: str) -> float:
    return sum(m[key] for m in runs) / len(runs)


def _played(runs: Runs, point, what: str, flag: str) -> tuple[list | None, str]:
    """A learned point's per-seed metrics and ``""``, or ``None`` and why it was not judged."""
    got = runs.get(point) if point is not None else None
    if got is None:
        return None, f"no {what} given ({flag})"
    if isinstance(got, str):
        return None, f"not run: {got}"
    return got, ""


def judge(setting: str, runs: Runs, arms: Arms) -> Judgement:
    """Targets (a) and (b) from the per-seed metrics of ``arms`` in one world, paired and Holm-corrected as the
    bench compares arms (:mod:`evalstop_gym.bench.score`)."""
    from evalstop_gym.bench.score import compare, holm

    def values(ms, key):
        return [f1_counts(m) for m in ms] if key == "f1" else [m[key] for m in ms]

    def paired(arm, ref, key):
        return compare(values(arm, key), values(ref, key), key)

    pair, ref = runs[arms.pair], runs[arms.reference]
    j = Judgement(setting, len(pair), pair_jct=_mean(pair, "avg_jct_h"),
                  reference_preemptions=_mean(ref, "preemptions"), pair_regret=_mean(pair, REGRET))
    learned, j.a_note = _played(runs, arms.learned, "learned scheduler", "--scheduler-model")
    if learned is not None:
        j.learned_jct, j.learned_preemptions = _mean(learned, "avg_jct_h"), _mean(learned, "preemptions")
        j.jct, j.regret = paired(learned, pair, "avg_jct_h"), paired(learned, pair, REGRET)
        j.learned_regret = _mean(learned, REGRET)
    det = runs[arms.detector]
    j.detector_waste = _mean(det, "compute_waste_gpu_h")
    stop, j.b_note = _played(runs, arms.learned_stop, "learned stop-policy", "--stop-model")
    if stop is not None:
        # seeds where either F1 is undefined (no hacking run, no stop) are left out of the pairs
        f1 = [(d, s) for d, s in zip(values(det, "f1"), values(stop, "f1")) if d is not None and s is not None]
        if f1:
            j.detector_f1 = sum(d for d, _ in f1) / len(f1)
            j.learned_f1 = sum(s for _, s in f1) / len(f1)
        j.f1, j.waste = paired(stop, det, "f1"), paired(stop, det, "compute_waste_gpu_h")
        j.learned_waste = _mean(stop, "compute_waste_gpu_h")
    claims = [c for c in (j.jct, j.f1) if c is not None]   # the family Holm corrects over: one world's claims
    for c, p_holm in zip(claims, holm([c["p"] for c in claims])):
        c["p_holm"] = p_holm
    if learned is not None:
        j.a = jct_verdict(j.jct, j.learned_preemptions, j.reference_preemptions,
                          learned_regret=j.learned_regret, pair_regret=j.pair_regret)
    if stop is not None:
        j.b = f1_verdict(j.f1, j.learned_waste, j.detector_waste)
    return j
