"""Episode metrics, computed after the episode from the hidden truth.

Definitions (kept stable across versions):

* JCT: finish (completion or stop) minus submit, hours. Mean, p50, p99.
* Makespan: last finish minus first submit, hours. Utilization: GPU-hours run
  over ``gpus * makespan``. Queueing delay: JCT minus hours run.
* Compute waste: GPU-hours a job runs past its true best checkpoint (the
  checkpoint of highest true eval score in its full schedule).
* Detection: positives are hacking runs, negatives every other job. TP: a
  hacking run stopped; FP: any other job stopped; FN: a hacking run not
  stopped. Precision, recall, FPR (``None`` where the denominator is 0), and
  detection delay: eval checkpoints from the true peak to the stop.
* Delivered quality: true score of the checkpoint the tenant gets (best
  observed when stopped, final otherwise); regret: true peak minus that.
* Topology (:mod:`evalstop_gym.cluster`): fragmentation is the time average,
  over the makespan, of the free GPUs while jobs wait and none of them can be
  placed on those GPUs (``fragmentation_gpus``; ``fragmentation`` is that over
  the cluster's GPUs); measured on clusters of nodes, ``None`` on the flat pool. ``spread_lost_gpu_h``: GPU-hours lost to spread
  placement, ``sum(gpus * hours run spread * (1 - spread penalty))``.
  ``utilization_<type>``: GPU-hours run on GPUs of that type over its GPUs x
  makespan (one key per GPU type, on clusters of several types; with one type
  it is ``utilization``).
"""

from __future__ import annotations

import numpy as np

from fractions import Fraction

from .config import JOB_TYPES
from .simulator import Outcome
from .timebase import TICKS_PER_HOUR

METRIC_KEYS = (
    "avg_jct_h", "p50_jct_h", "p99_jct_h", "makespan_h", "utilization", "avg_queue_h",
    "compute_waste_gpu_h", "gpu_hours", "precision", "recall", "fpr", "f1", "detection_delay_evals",
    "jobs", "jobs_stopped", "true_positives", "false_positives", "false_negatives",
    "delivered_quality", "delivered_quality_regret", "preemptions",
    "fragmentation_gpus", "fragmentation", "spread_lost_gpu_h",
)


def f1_counts(metrics) -> float | None:
    """F1 of one episode from its counts, ``2 TP / (2 TP + FP + FN)``: the ``f1`` metric wherever that is
    defined, 0 where a stopper stops no hacking run (``f1`` is undefined there), ``None`` only with no hacking
    run and no stop. Selection rules average it over episodes, so a seed a detector fails on counts as 0."""
    tp, fp, fn = metrics["true_positives"], metrics["false_positives"], metrics["false_negatives"]
    den = 2 * tp + fp + fn
    return 2 * tp / den if den else None


def _ratio(num: float, den: float) -> float | None:
    return float(num / den) if den > 0 else None


def waste_ticks(service_ticks, peak_service_ticks):
    """Ticks run past the true best checkpoint (the compute waste of one job, before its GPUs), elementwise:
    ``service_ticks`` run in total, ``peak_service_ticks`` run when the true best checkpoint was out, as the
    simulator recorded it (with any resume costs paid before it; -1: never reached, so nothing ran past it)."""
    service_at_peak = np.where(np.asarray(peak_service_ticks) >= 0, peak_service_ticks, service_ticks)
    return np.maximum(np.asarray(service_ticks) - service_at_peak, 0)


def compute_metrics(out: Outcome) -> dict[str, float | int | None]:
    """All metrics of one finished episode, as a flat dict of plain Python numbers."""
    w = out.workload
    gold = w.curves.gold
    n = w.n
    # exact integer ticks (1 ms) until the last step, then hours
    jct = out.jct_h
    makespan = float(out.finish_ticks.max() - out.submit_ticks.min()) / TICKS_PER_HOUR
    gpu_hours = float(np.sum(out.service_ticks * w.gpus)) / TICKS_PER_HOUR

    peak_ckpt = np.argmax(gold, axis=1)
    waste = float(np.sum(waste_ticks(out.service_ticks, out.peak_service_ticks) * w.gpus)) / TICKS_PER_HOUR

    pos, stopped = w.hacking, out.stopped
    tp = int(np.sum(pos & stopped))
    fp = int(np.sum(~pos & stopped))
    fn = int(np.sum(pos & ~stopped))
    precision = _ratio(tp, tp + fp)
    recall = _ratio(tp, tp + fn)
    f1 = (2 * precision * recall / (precision + recall)
          if precision is not None and recall is not None and precision + recall > 0 else None)
    tp_mask = pos & stopped
    delay = (float(np.mean(out.evals_seen[tp_mask] - 1 - peak_ckpt[tp_mask])) if tp else None)

    d = out.delivered_ckpt
    rows = np.arange(n)
    delivered = np.where(d >= 0, gold[rows, np.maximum(d, 0)], w.curves.start)
    regret = gold.max(axis=1) - delivered
    p50, p99 = np.percentile(jct, [50, 99]).tolist()  # one call: each is the value np.percentile gives alone
    return {
        "avg_jct_h": float(jct.mean()),
        "p50_jct_h": p50,
        "p99_jct_h": p99,
        "makespan_h": makespan,
        "utilization": gpu_hours / (w.total_gpus * makespan) if makespan > 0 else 0.0,
        "avg_queue_h": float(np.mean(out.finish_ticks - out.submit_ticks - out.service_ticks)) / TICKS_PER_HOUR,
        "compute_waste_gpu_h": waste,
        "gpu_hours": gpu_hours,
        "precision": precision,
        "recall": recall,
        "fpr": _ratio(fp, int(np.sum(~pos))),
        "f1": f1,
        "detection_delay_evals": delay,
        "jobs": n,
        "jobs_stopped": int(stopped.sum()),
        "true_positives": tp,
        "false_positives": fp,
        "false_negatives": fn,
        "delivered_quality": float(delivered.mean()),
        "delivered_quality_regret": float(regret.mean()),
        "preemptions": out.preemptions,
        **_topology_metrics(out),
    }


def _topology_metrics(out: Outcome) -> dict[str, float]:
    """Fragmentation, hours lost to spread placement and per-type utilization (exact to the last step)."""
    w = out.workload
    spec = w.spec
    span = int(out.finish_ticks.max() - out.submit_ticks.min())
    frag = None if out.fragmentation_gpu_ticks is None else out.fragmentation_gpu_ticks / span if span > 0 else 0.0
    lost = Fraction(0)
    for t, name in enumerate(JOB_TYPES if out.spread_ticks.any() else ()):
        mine = w.job_type == t
        loss = 1 - spec.penalty(name)
        if loss:
            lost += loss * int(np.sum(out.spread_ticks[mine] * w.gpus[mine]))
    m = {"fragmentation_gpus": frag, "fragmentation": None if frag is None else frag / w.total_gpus,
         "spread_lost_gpu_h": float(lost / TICKS_PER_HOUR)}
    per_type = spec.types_of_nodes
    for gpu_type, ticks in (out.type_gpu_ticks.items() if len(spec.gpu_types) > 1 else ()):
        gpus = per_type.count(gpu_type) * spec.gpus_per_node
        m[f"utilization_{gpu_type}"] = ticks / (gpus * span) if span > 0 else 0.0
    return m


def job_results(out: Outcome) -> dict[str, list]:
    """Per-job JCT (hours) and stop flag, in job-id order, for pairing jobs across arms."""
    return {"jct_h": (out.finish_h - out.workload.submit_h).tolist(), "stopped": out.stopped.astype(int).tolist()}
